"""Root tests: attach to running processes (-p), system-wide windows (-a), --duration, output
name templates and the bad-input paths, with the real eBPF probes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import PYTHON, WORKLOADS, children_of, dpuprof, last_json_line, poll_until, summary_of, wait_for_intervals

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
    from dpuprof.record.workload.procfs import descendants
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
        # the receiver child exists before dpuprof attaches: it must be found in /proc
        assert poll_until(lambda: children_of(job.pid)), "the workload's receiver did not start"
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


def _assert_stopped_at_duration(rec, duration_s: float, t0: float, t1: float):
    """``rec`` (recorded with -d ``duration_s`` between the test's clock readings ``t0`` and ``t1``)
    ended at its first interval end at or past the duration: never before (a deadline does not
    fire early), and no interval after it, however slow the machine. Its intervals lie inside
    the command's own run."""
    iv = rec.table("intervals").sort_values("t_start")
    deadline = rec.meta["start_time"] + duration_s
    assert iv["t_start"].iloc[0] == pytest.approx(rec.meta["start_time"])
    assert iv["t_end"].iloc[-1] >= deadline and (iv["t_end"].iloc[:-1] < deadline).all(), (iv, deadline)
    assert t0 <= iv["t_start"].iloc[0] and iv["t_end"].iloc[-1] <= t1
    assert rec.meta["stop_reason"] == "duration"


def test_system_wide_for_three_seconds(tmp_path):
    out = tmp_path / "host.rec"
    t0 = time.time()
    proc = dpuprof("record", "-q", "-a", "-d", "3", "-o", out, timeout=240)
    t1 = time.time()
    assert proc.returncode == 0, proc.stderr
    rec, s = _load(out), summary_of(out)
    _assert_stopped_at_duration(rec, 3.0, t0, t1)
    assert rec.meta["workload"] == "system-wide" and rec.meta["system_wide"] is True
    assert s["workload"] == "system-wide"  # report --format json says so too
    assert rec.meta["stop_reason"] == "duration" and rec.meta["command"] == []
    pids = rec.workload_pids
    rpid = rec.meta["recorder_pid"]
    assert 1 in pids and rpid not in pids and 0 not in pids and len(pids) > 10
    # Every busy sample but the recorder's and the idle task's is the workload's: pid 0 is no
    # process, and an interrupt it took (a softirq's busy row) is the host's, not a process's.
    cat = rec.table("cpu_category")
    busy = cat[~cat["category"].isin(["idle", "observer"]) & ~cat["pid"].isin([0, rpid])]  # not work (NOT_WORK)
    # the summary rounds seconds to 6 decimals
    assert s["workload_cpu"]["total_s"] == pytest.approx(busy["cpu_s"].sum(), abs=2e-6)
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
    proc = dpuprof("record", "-q", "-d", "2", "-o", out, "--", "sh", "-c", "sleep 4; echo ran-on; exit 3",
                   timeout=240)
    took = time.time() - t0
    assert proc.returncode == 3, proc.stderr  # the command's own status, after its natural end
    assert "ran-on" in proc.stdout and "keeps running" in proc.stderr
    s = summary_of(out)
    assert took >= 4 and s["complete"]
    _assert_stopped_at_duration(_load(out), 2.0, t0, t0 + took)


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


def _started(rec_proc):
    """Wait for dpuprof's first status line: the recording is running."""
    first = rec_proc.stderr.readline()
    assert first.startswith("[dpuprof]"), first


def test_sigterm_stops_the_recording_not_the_attached_job(tmp_path):
    job = subprocess.Popen([PYTHON, "-c", "import time\nwhile True: sum(range(50000)); time.sleep(0.01)"])
    out = tmp_path / "term.rec"
    rec_proc = subprocess.Popen([PYTHON, "-m", "dpuprof", "record", "-p", str(job.pid), "-o", str(out)],
                                stderr=subprocess.PIPE, text=True)
    try:
        _started(rec_proc)
        assert wait_for_intervals(out, 1, rec_proc) >= 1  # recording, with an interval written
        rec_proc.send_signal(signal.SIGTERM)  # as Slurm or kill would
        rest = rec_proc.communicate(timeout=60)[1]
        assert rec_proc.returncode == 0, rest
        time.sleep(0.3)
        assert job.poll() is None, "SIGTERM to dpuprof must not reach the attached job"
    finally:
        if rec_proc.poll() is None:
            rec_proc.kill()
        job.kill()
        job.wait()
    rec = _load(out)
    assert rec.meta["stop_reason"] == "stopped" and rec.complete
    assert job.pid in rec.workload_pids and rec.duration_s >= 1.0


def test_cgroup_v2_subtree_is_the_workload(tmp_path):
    from dpuprof.record.workload.procfs import cgroup2_mount

    mount = cgroup2_mount()
    assert mount, "this machine has a cgroup v2 hierarchy (hybrid hosts: /sys/fs/cgroup/unified)"
    name = f"dpuprof-test-{os.getpid()}"
    top = os.path.join(mount, name)
    inner = os.path.join(top, "inner")
    os.makedirs(inner)
    inside = subprocess.Popen([PYTHON, WORKLOADS / "zlib_compress.py", "300"], stdout=subprocess.DEVNULL)
    outside = subprocess.Popen([PYTHON, "-c", "import time\nwhile True: sum(range(50000)); time.sleep(0.01)"])
    try:
        with open(os.path.join(inner, "cgroup.procs"), "w") as fh:
            fh.write(str(inside.pid))
        out = tmp_path / "cg.rec"
        proc = dpuprof("record", "-q", "-F", FREQ, "--cgroup", "/" + name, "-d", "3", "-o", out, timeout=240)
        assert proc.returncode == 0, proc.stderr
        assert inside.poll() is None and outside.poll() is None
        rec, s = _load(out), summary_of(out)
        assert inside.pid in rec.workload_pids and outside.pid not in rec.workload_pids
        assert rec.meta["workload"] == "cgroup" and rec.meta["cgroup"] == top
        wl = s["workload_cpu"]
        assert wl["by_category"]["compression"] / wl["total_s"] >= 0.80, wl  # the launch-mode bound
        procs = rec.table("processes").set_index("pid")
        assert procs.loc[inside.pid, "cgroup"] == f"/{name}/inner"
        assert "cgroup /" in dpuprof("report", out, "--format", "markdown").stdout
    finally:
        for p in (inside, outside):
            p.kill()
            p.wait()
        os.rmdir(inner)
        os.rmdir(top)


def test_workload_in_a_pid_namespace_keeps_its_container_pid(tmp_path):
    out = tmp_path / "ns.rec"
    proc = dpuprof("record", "-q", "-F", FREQ, "-o", out, "--", "unshare", "--pid", "--fork", "--mount-proc",
                   PYTHON, WORKLOADS / "zlib_compress.py", "3", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rec, s = _load(out), summary_of(out)
    procs = rec.table("processes")
    inner = procs[(procs["in_workload"] != 0) & (procs["ns_pid"] == 1)]
    assert len(inner) == 1, procs  # PID 1 of its namespace, recorded under its host pid
    host_pid = int(inner["pid"].iloc[0])
    assert host_pid != 1
    wl = s["workload_cpu"]
    own = last_json_line(proc.stdout)["cpu_s"]  # the workload's getrusage, inside the namespace
    assert wl["total_s"] == pytest.approx(own, rel=0.10), (wl, own)
    # (Start-up inside unshare dilutes the share on a busy machine; the category bound is tested
    # in launch mode, this test is about following the tree into the namespace.)
    assert wl["by_category"]["compression"] / wl["total_s"] >= 0.60, wl
    by_pid = {p["pid"]: p for p in s["processes"]}
    assert by_pid[host_pid]["cpu_s"] >= 0.8 * wl["total_s"]


def test_attach_into_a_pid_namespace(tmp_path):
    job = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", PYTHON, WORKLOADS / "zlib_compress.py",
                            "300"], stdout=subprocess.DEVNULL)
    try:
        assert poll_until(lambda: children_of(job.pid)), "the namespace's first process did not start"
        out = tmp_path / "nsa.rec"
        proc = dpuprof("record", "-q", "-F", FREQ, "-p", job.pid, "-d", "2", "-o", out, timeout=240)
        assert proc.returncode == 0, proc.stderr
        assert job.poll() is None
        rec = _load(out)
        procs = rec.table("processes").set_index("pid")
        inner = procs[(procs["in_workload"] != 0) & (procs["ns_pid"] == 1)]
        assert len(inner) == 1, procs
        cat = rec.table("cpu_category")
        mine = cat.loc[cat["pid"] == inner.index[0], "cpu_s"].sum()
        wl = cat.loc[cat["pid"].isin(rec.workload_pids) & (cat["category"] != "idle"), "cpu_s"].sum()
        assert mine > 0.2 and mine >= 0.9 * wl, (mine, wl)  # the namespace's busy pid 1 is the workload
    finally:
        _kill_tree(job)


def test_inside_a_pid_namespace_without_host_pids_is_one_line(tmp_path):
    # A container without hostPID: the probes report host PIDs that this /proc does not show.
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PYTHON, "-m", "dpuprof", "record",
                           "-o", str(tmp_path / "x.rec"), "--", "true"], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(WORKLOADS.parent))
    line = _one_line_exit_2(proc)
    assert "PID namespace" in line and "hostPID" in line
    assert not (tmp_path / "x.rec").exists()
