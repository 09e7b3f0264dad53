"""Root tests: attach to running processes (-p), system-wide windows (-a), --duration, output
name templates and the bad-input paths, with the real eBPF probes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import PYTHON, WORKLOADS, dpuprof, summary_of

pytestmark = pytest.mark.root

FREQ = 499


def _load(path):
    from dpuprof.recording import load
    return load(path)


def _one_line_exit_2(proc):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("dpuprof: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def _kill_tree(proc):
    from dpuprof.record.procfs import descendants
    for pid in descendants([proc.pid]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def test_attach_to_a_running_tcp_workload(tmp_path):
    # Long enough to outlive the probes' compile on a busy machine; killed once checked.
    job = subprocess.Popen([PYTHON, WORKLOADS / "tcp_loopback.py", "300"], stdout=subprocess.PIPE)
    try:
        time.sleep(0.5)  # the receiver child exists before dpuprof attaches: it must be found in /proc
        out = tmp_path / "attach.rec"
        proc = dpuprof("record", "-q", "-F", FREQ, "-p", job.pid, "-d", "3", "-o", out, timeout=240)
        assert proc.returncode == 0, proc.stderr
        assert job.poll() is None, "the attached job must keep running after the recording"
        rec, s = _load(out), summary_of(out)
        wl = s["workload_cpu"]
        share = wl["by_category"]["network"] / wl["total_s"]
        print(f"attach: network {share:.1%} of {wl['total_s']:.3f} s; {wl['by_category']}")
        assert share >= 0.70, wl  # the launch-mode bound (test_record_root.py)
        assert 2.5 <= s["duration_s"] <= 4.0
        workload = {p["pid"] for p in s["processes"] if p["cpu_s"] > 0.1}
        assert job.pid in workload and len(workload) >= 2  # sender and its existing receiver child
        assert rec.meta["workload"] == "attach" and rec.meta["stop_reason"] == "duration"
        assert rec.meta["attached"][0]["pid"] == job.pid and rec.meta["exit_code"] is None
        assert s["net"]["by_dev"]["lo"]["tx"] > 10 << 20
        report = dpuprof("report", out, "--format", "markdown")
        assert f"attached to pid {job.pid}" in report.stdout, report.stdout[:500]
        time.sleep(0.5)
        assert job.poll() is None
    finally:
        _kill_tree(job)


FORK_LATER = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
pid = os.fork()
if pid == 0:
    t = time.process_time()
    while time.process_time() - t < 1.0:
        sum(range(20000))  # pure Python between the clock reads (themselves syscalls)
    os._exit(0)
open(sys.argv[2], "w").write(str(pid))
os.waitpid(pid, 0)
"""


def test_attach_follows_children_born_later_and_stops_when_the_tree_exits(tmp_path):
    go, kid = tmp_path / "go", tmp_path / "kid"
    job = subprocess.Popen([PYTHON, "-c", FORK_LATER, go, kid])
    out = tmp_path / "later.rec"
    rec_proc = subprocess.Popen([PYTHON, "-m", "dpuprof", "record", "-F", str(FREQ), "--interval", "0.5",
                                 "-p", str(job.pid), "-o", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        first = rec_proc.stderr.readline()  # the status line: the recording is running
        assert first.startswith("[dpuprof]"), first
        go.write_text("")
        rest = rec_proc.communicate(timeout=60)[1]
        assert rec_proc.returncode == 0, rest
        assert job.wait(timeout=10) == 0  # it ran to its normal end
    finally:
        if rec_proc.poll() is None:
            rec_proc.kill()
        if job.poll() is None:
            job.kill()
    child = int(kid.read_text())
    rec, s = _load(out), summary_of(out)
    assert rec.meta["stop_reason"] == "workload exited", rest
    assert "every attached process exited" in rest
    by_pid = {p["pid"]: p for p in s["processes"]}
    assert child in by_pid, by_pid  # born after attaching, exited before the end: data kept
    assert by_pid[child]["cpu_s"] >= 0.7 and by_pid[child]["by_category"]["compute"] >= 0.6


def test_system_wide_for_three_seconds(tmp_path):
    out = tmp_path / "host.rec"
    t0 = time.time()
    proc = dpuprof("record", "-q", "-a", "-d", "3", "-o", out, timeout=240)
    assert proc.returncode == 0, proc.stderr
    rec, s = _load(out), summary_of(out)
    assert 2.9 <= s["duration_s"] <= 3.6 and time.time() - t0 >= 3
    assert rec.meta["workload"] == "system-wide" and rec.meta["system_wide"] is True
    assert rec.meta["stop_reason"] == "duration" and rec.meta["command"] == []
    pids = rec.workload_pids
    rpid = rec.meta["recorder_pid"]
    assert 1 in pids and rpid not in pids and 0 not in pids and len(pids) > 10
    # Every busy sample but the recorder's (and the idle task's) is the workload's.
    cat = rec.table("cpu_category")
    busy = cat[cat["category"] != "idle"]
    assert s["workload_cpu"]["total_s"] == pytest.approx(busy.loc[busy["pid"] != rpid, "cpu_s"].sum(), rel=1e-6)
    assert (rec.table("processes")["cmdline"] == "").all()  # no other users' command lines
    report = dpuprof("report", out, "--format", "markdown")
    assert "every process (system-wide)" in report.stdout


def test_system_wide_with_a_command_keeps_its_tree_as_the_workload(tmp_path):
    out = tmp_path / "aw.rec"
    proc = dpuprof("record", "-q", "-a", "-o", out, "--", "sh", "-c", "exit 4", timeout=240)
    assert proc.returncode == 4, proc.stderr
    rec = _load(out)
    assert rec.meta["workload"] == "command" and rec.meta["system_wide"] is True
    assert rec.workload_pids == {rec.meta["root_pid"]}


def test_duration_with_a_command_leaves_it_running(tmp_path):
    out = tmp_path / "d.rec"
    t0 = time.time()
    proc = dpuprof("record", "-q", "-d", "2", "-o", out, "--", "sh", "-c", "sleep 6; echo ran-on; exit 3",
                   timeout=240)
    took = time.time() - t0
    assert proc.returncode == 3, proc.stderr  # the command's own status, after its natural end
    assert "ran-on" in proc.stdout and "keeps running" in proc.stderr
    s = summary_of(out)
    assert 1.9 <= s["duration_s"] <= 2.6 and took >= 6
    assert _load(out).meta["stop_reason"] == "duration" and s["complete"]


def test_output_name_templates(tmp_path):
    env = dict(os.environ, SLURM_PROCID="5")
    template = str(tmp_path / "run-%h-%q{SLURM_PROCID}-%n.rec")
    for _ in range(2):
        proc = dpuprof("record", "-q", "-o", template, "--", "true", env=env, timeout=240)
        assert proc.returncode == 0, proc.stderr
    host = socket.gethostname()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"run-{host}-5-1.rec", f"run-{host}-5-2.rec"]
    env.pop("SLURM_PROCID")
    line = _one_line_exit_2(dpuprof("record", "-q", "-o", template, "--", "true", env=env))
    assert "SLURM_PROCID is not set" in line
    assert len(list(tmp_path.iterdir())) == 2


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    out = tmp_path / "x.rec"
    assert "no such process" in _one_line_exit_2(dpuprof("record", "-p", gone.pid, "-o", out))
    assert "cannot be combined" in _one_line_exit_2(dpuprof("record", "-p", os.getpid(), "-o", out, "--", "true"))
    assert "unknown key %z" in _one_line_exit_2(dpuprof("record", "-o", tmp_path / "r%z.rec", "--", "true"))
    assert "no such cgroup" in _one_line_exit_2(dpuprof("record", "--cgroup", "/dpuprof-no-such-group", "-o", out))
    assert "nothing to record" in _one_line_exit_2(dpuprof("record", "-d", "1", "-o", out))
    assert not out.exists()
