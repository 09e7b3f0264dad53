"""The workload of a recording (targets.py) and the /proc facts behind it (procfs.py), on real
processes started here. No root and no eBPF: the BPF ``tree`` map is stood in for by a mapping
with the same ctypes interface."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import poll_until
from dpuprof.errors import UserError
from dpuprof.record.workload import procfs
from dpuprof.record.workload.targets import Target, Watched, Workload, cgroup_dir, check_pids, make_target, parse_pids

PY = sys.executable
# Prints "child grandchild" and then keeps the tree alive until stdin closes.
TREE = """
import os, sys, threading, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    g = os.fork()
    if g == 0:
        sys.stdin.read(); os._exit(0)
    os.write(w, str(g).encode()); sys.stdin.read(); os.waitpid(g, 0); os._exit(0)
g = os.read(r, 32).decode()
threading.Thread(target=sys.stdin.read, daemon=True).start()
print(pid, g, flush=True)
sys.stdin.read()
os.waitpid(pid, 0)
"""


class FakeTreeMap:
    """The BPF hash map's user-space interface as used by targets.py: ctypes keys and values."""

    def __init__(self):
        self.data: dict[int, int] = {}

    def __setitem__(self, key, value):
        self.data[key.value] = value.value

    def items(self):
        import ctypes as ct
        return [(ct.c_uint32(k), ct.c_uint32(v)) for k, v in self.data.items()]


@pytest.fixture
def tree():
    proc = subprocess.Popen([PY, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child, grandchild = map(int, proc.stdout.readline().split())
    yield proc, child, grandchild
    proc.stdin.close()
    proc.wait(timeout=10)


def test_parse_pids():
    assert parse_pids("12") == (12,)
    assert parse_pids("12, 34,12") == (12, 34)
    for bad in ("", "abc", "1,,2", "0", "-5", "1.5"):
        with pytest.raises(UserError):
            parse_pids(bad)


def test_make_target_names_exactly_one_workload():
    assert make_target(["true"], None, False, None, None).kind == "command"
    assert make_target([], "1", False, None, 3.0).kind == "attach"
    assert make_target([], None, True, None, None).kind == "system-wide"
    assert make_target(["true"], None, True, None, None).kind == "command"  # -a -- CMD
    assert make_target([], None, False, "/x", None).kind == "cgroup"
    for args in ((["true"], "1", False, None, None), ([], None, False, None, 5.0),
                 ([], "1", False, "/x", None), (["true"], None, False, "/x", None)):
        with pytest.raises(UserError) as err:
            make_target(*args)
        assert "\n" not in str(err.value)


def test_check_pids_on_real_processes(tree):
    proc, child, _ = tree
    assert set(check_pids([proc.pid, child], os.getpid())) == {proc.pid, child}
    with pytest.raises(UserError, match="is dpuprof itself"):
        check_pids([os.getpid()], os.getpid())
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(UserError, match=f"-p {gone.pid}: no such process"):
        check_pids([gone.pid], os.getpid())
    ready, stop = threading.Event(), threading.Event()
    ids = []
    t = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), ready.set(), stop.wait()))
    t.start()
    ready.wait()
    try:
        with pytest.raises(UserError, match=f"is a thread of process {os.getpid()}"):
            check_pids([ids[0]], 1)
    finally:
        stop.set()
        t.join()


def test_check_pids_refuses_a_zombie():
    z = subprocess.Popen(["true"])
    poll_until(lambda: (st := procfs.stat(z.pid)) is not None and st.state == "Z", timeout=2, every=0.01)
    try:
        with pytest.raises(UserError, match="has exited"):
            check_pids([z.pid], os.getpid())
    finally:
        z.wait()


def test_descendants_has_the_tree_map_shape(tree):
    proc, child, grandchild = tree
    got = procfs.descendants([proc.pid])
    assert got[proc.pid] == os.getpid()  # a root's parent is its real parent
    assert got[child] == proc.pid and got[grandchild] == child
    threads = [t for t in procfs.tasks(proc.pid) if t != proc.pid]
    assert threads and all(got[t] == proc.pid for t in threads)  # a thread's parent is its process
    assert procfs.descendants([proc.pid], exclude=(child,)).keys() == {proc.pid, *threads}


def test_attach_seeds_the_existing_tree_and_keeps_exited_processes(tree):
    proc, child, grandchild = tree
    member = FakeTreeMap()
    work = Workload(Target(pids=(proc.pid,)), recorder_pid=os.getpid(), tree_map=FakeTreeMap(),
                    also_seed=[(member, 1)])
    work.prepare()
    watched = work.start(None, 1, 1)
    assert isinstance(watched, Watched) and watched.poll() is None
    seeded = work.tree_map.data
    assert {proc.pid, child, grandchild} <= seeded.keys() and seeded[grandchild] == child
    assert member.data == dict.fromkeys(seeded, 1)  # a probe's own membership map, seeded alike
    assert work.meta()["workload"] == "attach" and work.meta()["attached"][0]["pid"] == proc.pid
    pids = work.pids(dict(seeded))
    assert {proc.pid, child, grandchild} <= pids
    os.kill(grandchild, signal.SIGKILL)  # a process that exits mid-recording stays in the workload
    assert poll_until(lambda: not procfs.alive(grandchild), timeout=10, every=0.01)
    assert grandchild in work.pids(dict(seeded))


def test_watched_never_signals_and_ends_when_the_tree_has_exited(tree):
    proc, child, grandchild = tree
    work = Workload(Target(pids=(proc.pid,)), recorder_pid=os.getpid())  # psutil mode: no tree map
    work.prepare()
    watched = work.start(None, 1, 1)
    watched.send(signal.SIGKILL)  # the recorder's forwarding path: a no-op for attached processes
    time.sleep(0.1)
    assert procfs.alive(proc.pid) and watched.poll() is None
    assert {proc.pid, child, grandchild} <= work.pids(None)
    proc.stdin.close()
    proc.wait(timeout=10)
    assert poll_until(lambda: watched.poll() is not None, timeout=5)
    assert watched.poll() == 0 and watched.exited


def test_watched_stops_on_request_without_touching_the_job(tree):
    proc, _, _ = tree
    work = Workload(Target(pids=(proc.pid,)), recorder_pid=os.getpid())
    work.prepare()
    watched = work.start(None, 1, 1)
    watched.stop_requested_at = time.time()  # what the recorder does on Ctrl-C / SIGTERM
    assert watched.poll() == 0 and not watched.exited
    assert procfs.alive(proc.pid)


def test_system_wide_is_every_process_but_the_recorder():
    work = Workload(Target(system_wide=True), recorder_pid=os.getpid())
    work.prepare()
    watched = work.start(None, 1, 1)
    assert watched.poll() is None  # runs until stopped
    pids = work.pids(None)
    assert 1 in pids and os.getpid() not in pids and 0 not in pids
    work.add_seen({0, os.getpid(), 999_999_999})  # a process that ran and exited between reads
    assert 999_999_999 in work.pids(None) and os.getpid() not in work.pids(None)
    assert 12345 in work.symbolized(set()) and not work.keep_cmdline()
    assert work.meta()["workload"] == "system-wide"


def test_system_wide_forgets_a_process_the_interval_after_it_ran():
    work = Workload(Target(system_wide=True), recorder_pid=os.getpid())
    work.start(None, 1, 1)
    first = work.pids(None)
    work.add_seen({999_999_998})  # ran in this interval, gone before /proc was read
    assert 999_999_998 in first  # the recorder's workload set of this interval has it
    assert 999_999_998 in work.pids(None)  # and the next interval's (late thread exits, late counts)
    assert 999_999_998 not in work.pids(None)  # then it is forgotten: the set holds no dead pids
    assert work.count >= len(first)  # the status line's "processes seen" still counts it


def test_cgroup_errors_are_one_line(tmp_path):
    with pytest.raises(UserError) as err:
        cgroup_dir("/no/such/group/dpuprof-test")
    assert "\n" not in str(err.value) and "--cgroup" in str(err.value)
    with pytest.raises(UserError):
        cgroup_dir(str(tmp_path))


def test_stop_reason_says_why_the_recording_ended(tree):
    from dpuprof.record.workload.targets import STOP_TEXT, stop_reason

    proc, _, _ = tree
    work = Workload(Target(pids=(proc.pid,)), recorder_pid=os.getpid())
    work.prepare()
    watched = work.start(None, 1, 1)
    assert stop_reason(watched) == "duration"  # the loop ended while the job still ran
    watched.stop_requested_at = time.time()
    assert stop_reason(watched) == "stopped"
    assert stop_reason(Watched(None)) == "duration"
    ended = Watched(None)
    ended.exited = True
    assert stop_reason(ended) == "workload exited"
    assert set(STOP_TEXT) == {"command exited", "duration", "stopped", "workload exited"}


def test_cgroup_newcomers_that_started_before_are_marked_moved_in(tmp_path, monkeypatch):
    # A stand-in cgroup directory (a real one is exercised by the root test): cgroup.procs lists pids.
    import dpuprof.record.workload.targets as targets

    group = tmp_path / "grp"
    group.mkdir()
    procs_file = group / "cgroup.procs"
    old = subprocess.Popen(["sleep", "30"])  # started before the recording
    time.sleep(0.05)  # /proc's start time has 10-ms ticks: old must be older by more than one
    try:
        procs_file.write_text("")
        monkeypatch.setattr(targets, "cgroup_dir", lambda path: str(group))
        work = Workload(Target(cgroup="/grp"), recorder_pid=os.getpid())
        work.prepare()
        watched = work.start(None, 1, 1)
        assert watched.poll() == 0 and watched.exited  # an empty cgroup: nothing to wait for
        watched.exited = False
        procs_file.write_text(f"{old.pid}\n")  # moved in during the recording
        assert old.pid in work.pids(None)
        assert work.take_moved_in() == [old.pid] and work.take_moved_in() == []
        new = subprocess.Popen(["sleep", "30"])  # born during the recording: counts whole
        try:
            procs_file.write_text(f"{old.pid}\n{new.pid}\n")
            assert new.pid in work.pids(None) and work.take_moved_in() == []
            assert watched.poll() is None
        finally:
            new.kill()
            new.wait()
    finally:
        old.kill()
        old.wait()
