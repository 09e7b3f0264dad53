"""Root tests: record real single-purpose workloads with eBPF and check what dpuprof measured.

Each workload does one thing; the share of the workload's CPU in that category must reach the
issue's bound, and the workload's category seconds must agree with its own CPU time (getrusage,
which is /proc's accounting) within 10 %.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PYTHON, WORKLOADS, dpuprof, last_json_line, summary_of, wait_for_intervals

pytestmark = pytest.mark.root

FREQ = 499  # more samples per second of workload than the 99 Hz default: tighter shares


@pytest.fixture(scope="module")
def direct_file(tmp_path_factory):
    # On the root filesystem (not tmpfs), written before recording so setup is not measured.
    path = tmp_path_factory.mktemp("odirect") / "data.bin"
    with open(path, "wb") as fh:
        fh.write(os.urandom(64 << 20))
        os.fsync(fh.fileno())
    return path


CASES = {
    "tcp_loopback": ("network", 0.70, lambda f: [WORKLOADS / "tcp_loopback.py", "3"]),
    "aes_gcm": ("crypto", 0.80, lambda f: [WORKLOADS / "aes_gcm.py", "3"]),
    "odirect_read": ("storage", 0.50, lambda f: [WORKLOADS / "odirect_read.py", f, "3"]),
    "zlib_compress": ("compression", 0.80, lambda f: [WORKLOADS / "zlib_compress.py", "3"]),
}


@pytest.fixture(scope="module")
def case_run(recorded, direct_file):
    """``case_run(name)`` -> (path, summary, the workload's own JSON) of CASES[name], recorded once
    per session (conftest's ``recorded``; tests/test_observer_root.py reads the same tcp_loopback
    run): test_counts_bytes_and_ios checks the odirect_read and tcp_loopback runs' counters,
    test_single_purpose_workload their categories (treat the recordings as read-only)."""
    def run(name):
        out, proc = recorded(PYTHON, *CASES[name][2](direct_file), freq=FREQ)
        return out, summary_of(out), last_json_line(proc.stdout)

    return run


@pytest.mark.parametrize("name", list(CASES))
def test_single_purpose_workload(case_run, name):
    category, bound, _ = CASES[name]
    path, summary, own = case_run(name)
    wl = summary["workload_cpu"]
    share = wl["by_category"][category] / wl["total_s"]
    print(f"{name}: {category} {share:.1%} of {wl['total_s']:.3f} s; own cpu {own['cpu_s']:.3f} s; "
          f"by_category {wl['by_category']}")
    assert share >= bound, f"{category} share {share:.1%} < {bound:.0%}: {wl['by_category']}"
    total = sum(wl["by_category"].values())
    assert total == pytest.approx(own["cpu_s"], rel=0.10), (total, own)
    assert summary["complete"] and summary["exit_code"] == 0
    assert summary["category_split"] is True


def test_counts_bytes_and_ios(case_run):
    _, summary, own = case_run("odirect_read")
    # Every 4 KiB O_DIRECT read is one block IO, counted by the block layer (/proc/diskstats: no
    # program per request by default; tests/test_block_io_root.py holds the probe to the same counts).
    assert summary["io"]["source"] == "/proc/diskstats"
    assert summary["io"]["read_ios"] >= own["reads"]
    assert summary["io"]["read_bytes"] >= 0.95 * own["reads"] * 4096
    _, summary, own = case_run("tcp_loopback")
    assert summary["net"]["source"] == "/proc/PID/net/dev"
    lo = summary["net"]["by_dev"]["lo"]
    assert lo["tx"] >= 0.99 * own["bytes"] and lo["rx"] >= 0.99 * own["bytes"]  # headers add, misses subtract


def test_follows_double_forked_grandchild(tmp_path):
    # The parent exits at once; a double-forked grandchild does the work. It must still count.
    code = ("import os, zlib, time\n"
            "if os.fork() == 0:\n"
            "    if os.fork() == 0:\n"
            "        d = os.urandom(1 << 20); end = time.time() + 2\n"
            "        while time.time() < end: zlib.compress(d)\n"
            "    os._exit(0)\n"
            "os.wait(); time.sleep(2.5)\n")
    _, summary, _ = _record_plain(tmp_path, PYTHON, "-c", code)
    wl = summary["workload_cpu"]
    assert len(summary["processes"]) >= 2  # the middle process may exit before it is ever seen
    assert wl["by_category"]["compression"] > 1.0, wl


def _record_plain(tmp_path, *cmd, extra=(), env=None):
    out = tmp_path / "plain.rec"
    proc = dpuprof("record", "-q", *extra, "-o", out, "--", *cmd, env=env, timeout=120)
    return proc, summary_of(out) if out.exists() else None, out


def test_exit_code_passes_through(tmp_path):
    proc, summary, _ = _record_plain(tmp_path, "sh", "-c", "exit 3")
    assert proc.returncode == 3 and summary["exit_code"] == 3 and summary["complete"]


def test_killed_child_gives_128_plus_signal(tmp_path):
    proc, summary, _ = _record_plain(tmp_path, "sh", "-c", "kill -SEGV $$")
    assert proc.returncode == 128 + signal.SIGSEGV
    assert summary["exit_code"] == 139 and summary["complete"]


def test_command_not_found(tmp_path):
    proc, _, _ = _record_plain(tmp_path, "/nonexistent/cmd")
    assert proc.returncode == 127
    assert "command not found" in proc.stderr and "Traceback" not in proc.stderr


def test_sigint_forwarded_and_recording_valid(tmp_path):
    out = tmp_path / "int.rec"
    rec = subprocess.Popen([PYTHON, "-m", "dpuprof", "record", "-q", "-o", out, "--", "sleep", "30"],
                           stderr=subprocess.PIPE, text=True)
    wait_for_intervals(out, 2, rec)
    rec.send_signal(signal.SIGINT)  # like `kill -INT` from a job scheduler: must be forwarded
    rc = rec.wait(timeout=30)
    assert rc == 128 + signal.SIGINT
    summary = summary_of(out)
    assert summary["complete"] and summary["exit_code"] == 130
    assert summary["duration_s"] >= 1.0


def test_kill_9_keeps_everything_up_to_the_last_interval(tmp_path):
    out = tmp_path / "k9.rec"
    rec = subprocess.Popen([PYTHON, "-m", "dpuprof", "record", "-q", "-o", out, "--", "sleep", "30"])
    wait_for_intervals(out, 3, rec)
    rec.kill()
    rec.wait()
    subprocess.run(["pkill", "-f", "^sleep 30$"], check=False)
    summary = summary_of(out)
    assert summary["complete"] is False
    assert summary["duration_s"] >= 2.0


def test_runs_as_invoking_user_under_sudo():
    # A directory the unprivileged child can reach (pytest's tmp_path parents are root-only).
    tmp_path = Path(tempfile.mkdtemp(prefix="dpuprof-sudo-", dir="/tmp"))
    os.chmod(tmp_path, 0o777)
    env = dict(os.environ, SUDO_UID="65534", SUDO_GID="65534", SUDO_USER="nobody")
    ids = tmp_path / "ids.txt"
    proc, summary, out = _record_plain(tmp_path, "sh", "-c", f"id -u > {ids}; id -g >> {ids}", env=env)
    assert proc.returncode == 0, proc.stderr
    assert ids.read_text().split() == ["65534", "65534"]
    st = os.stat(out)
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert not st.st_mode & stat.S_IWOTH
    # --as-root keeps root.
    proc, _, _ = _record_plain(tmp_path, "sh", "-c", f"id -u > {ids}", extra=("--as-root",), env=env)
    assert ids.read_text().split() == ["0"]


def test_refuses_symlink_at_output(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious")
    link = tmp_path / "out.rec"
    link.symlink_to(target)
    proc = dpuprof("record", "-q", "-o", link, "--", "true")
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    assert target.read_text() == "precious"


def test_status_line_on_stderr_and_quiet(tmp_path, recorded, direct_file):
    out = tmp_path / "s.rec"
    proc = dpuprof("record", "-o", out, "--", "sleep", "2")
    assert "[dpuprof]" in proc.stderr and "samples" in proc.stderr
    assert f"-> {out}" in proc.stderr
    # -q: the zlib_compress case's run, shared (recorded with -q; the workload writes only to stdout).
    _, quiet = recorded(PYTHON, *CASES["zlib_compress"][2](direct_file), freq=FREQ)
    assert quiet.stderr == ""
