"""The recorder's state stays bounded on a host where processes, stacks and libraries come and go
(issue 23): the LRU, the eviction rules, and each structure that forgets (no root, no BPF)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dpuprof.agent.jobs import NO_JOB, Job, JobLabels
from dpuprof.agent.rotate import RotatingWriter
from dpuprof.record.drain.mapio import exited_entries
from dpuprof.record.drain import samples
from dpuprof.record.drain.samples import SampleDrainer, process_comms
from dpuprof.record.drain.telemetry import ProcessTelemetry
from dpuprof.record.lru import Lru
from dpuprof.record.recorder import Options, Recorder, stale_processes
from dpuprof.record.stacks import symbols
from dpuprof.record.stacks.classify import Classifier
from dpuprof.recording import load


def test_lru_drops_the_least_recently_used_and_says_which():
    lru = Lru(2)
    assert lru.put("a", 1) == [] and lru.put("b", 2) == []
    assert lru.get("a") == 1  # "a" is now the most recent: "b" goes first
    assert lru.put("c", 3) == [("b", 2)]
    assert "b" not in lru and lru.get("b", "gone") == "gone" and len(lru) == 2
    assert list(lru.keys()) == ["a", "c"]
    assert lru.put("a", 10) == [] and lru.put("d", 4) == [("c", 3)] and lru.get("a") == 10


def test_exited_entries_go_only_once_gone_and_drained():
    drained = {(0,): (5,), (10,): (7,), (11,): (8,), (12,): (9,)}
    entries = [(0, (0,), (5,)),     # the idle task: never
               (10, (10,), (7,)),   # alive
               (11, (11,), (8,)),   # gone, nothing new since the drain: deleted
               (12, (12,), (10,)),  # gone, but counted more since the drain (its last switch-out)
               (13, (13,), (1,))]   # gone, never drained
    assert exited_entries(entries, live={10}, drained=drained) == [(11,)]


def test_stale_processes_are_those_outside_the_workload_not_seen_lately():
    known = {1: (0, "init", "", 1, 0.0, 100.0), 2: (1, "old", "", 1, 0.0, 50.0),
             3: (1, "recent", "", 0, 0.0, 95.0), 4: (1, "job", "", 1, 0.0, 10.0)}
    assert stale_processes(known, workload={1, 4}, before=90.0) == [2]


class _Map(dict):
    """Stands in for a bcc table where SampleDrainer's constructor only keeps a reference."""


def _drainer(max_stacks: int) -> SampleDrainer:
    bpf = {name: _Map() for name in ("py_ranges", "counts", "stacks0", "stacks1", "spill0", "spill1", "idle_ips",
                                     "active")}
    return SampleDrainer(bpf, symbolizer=None, classifier=Classifier(), max_stacks=max_stacks)


def test_each_buffers_stack_maps_are_walked_every_clear_walk_every_drains(monkeypatch):
    d = _drainer(max_stacks=2)
    walked = []
    monkeypatch.setattr(samples, "clear_stack_map", lambda table: walked.append(table) or 0)
    monkeypatch.setattr(samples, "delete_stack_ids", lambda table, ids: 0)
    d._clear(0)  # prime: the buffer not written
    for i in range(2 * samples.CLEAR_WALK_EVERY):
        d._clear(1 - i % 2, entries=[])  # the drains alternate buffers, starting with 1
    times = [sum(t is table for t in walked) for table in d.stacks]
    assert times == [3, 2], times  # buffer 0: prime's walk too


def test_a_process_is_named_by_its_main_threads_most_sampled_name():
    keys = [(7, 7, b"sh", 1),          # caught between fork and exec, under its parent's name
            (7, 7, b"openssl", 40),    # after the exec
            (9, 12, b"pt_data_worker", 30), (9, 9, b"python3", 2),  # a pool's threads outnumber it
            (11, 13, b"gloo", 3), (11, 14, b"worker", 5)]          # main thread never sampled
    for order in (keys, keys[::-1]):  # the hash map's order decides nothing
        assert process_comms(order) == ({7: "openssl", 9: "python3", 11: "worker"}, {7, 9})


def test_stack_interning_is_bounded_and_names_the_ids_it_lets_go():
    d = _drainer(max_stacks=2)
    new, dropped = [], []
    ids = [d._intern(f"main;f{i} (app)", "app", 100, [], [f"f{i} (app)"], new, dropped) for i in range(3)]
    assert ids == [1, 2, 3] and [row[0] for row in new] == [1, 2, 3]
    assert dropped == [1] and set(d.stack_class) == {2, 3}
    # Sampled again later: a new id (never a reused one: the old may still be in the file), a new row.
    again = d._intern("main;f0 (app)", "app", 100, [], ["f0 (app)"], new, dropped)
    assert again == 4 and new[-1][:2] == (4, "main;f0 (app)") and dropped == [1, 2]
    assert d._intern("main;f2 (app)", "app", 100, [], ["f2 (app)"], new, dropped) == 3  # still held
    assert len(new) == 4


def test_a_forgotten_process_or_stack_is_not_copied_into_the_next_file(tmp_path):
    told = []
    w = RotatingWriter(tmp_path, "node", {"command": [], "interval_s": 1.0}, rotate_s=2, now=lambda: 1000.0,
                       on_forget=told.append)
    rows = [(pid, 1, f"p{pid}", "", 1, 1000.0, 1001.0, None, "/a.service") for pid in (100, 101)]
    w.write_interval(0, 1000.0, 1001.0, {"cpu_category": [(100, "compute", "compute.other", 1, 0.01),
                                                          (101, "compute", "compute.other", 1, 0.01)],
                                         "stack_samples": [(100, 1, 1), (101, 2, 1)]},
                     processes=rows, stacks=[(1, "main;a", "compute", "compute.other"),
                                             (2, "main;b", "compute", "compute.other")])
    w.forget(processes=[101], stacks=[2])
    for i in (1, 2):  # the second file starts at interval 2, pid 100 and stack 1 only
        w.write_interval(i, 1000.0 + i, 1001.0 + i, {"cpu_category": [(100, "compute", "compute.other", 1, 0.01)],
                                                     "stack_samples": [(100, 1, 1)]},
                         processes=[(100, 1, "p100", "", 1, 1000.0, 1001.0 + i, None, "/a.service")])
    w.close(end_time=1003.0)
    first, second = (load(p) for p in sorted(tmp_path.glob("node-*.rec")))
    assert set(first.table("processes")["pid"]) == {100, 101}
    assert set(second.table("processes")["pid"]) == {100}
    assert set(second.table("stacks")["stack_id"]) == {1} and second.complete
    assert w.processes.keys() == {100} and w.stacks.keys() == {1}
    assert told == [[101]]  # the metrics' job labels forget it too


def test_job_labels_forget_pids_but_keep_their_jobs_until_a_rotation():
    labels = JobLabels(max_jobs=1)
    labels.note(1, "/a.service")
    labels.forget([1, 2])  # 2 was never noted
    assert labels.of(1) == NO_JOB and labels.jobs == {Job("unit", "a.service")}
    labels.note(3, "/b.service")  # the cap still counts a.service until retain()
    assert labels.of(3) == JobLabels.OTHER
    assert labels.retain({3}) == {Job("unit", "a.service")}


def test_process_baselines_are_dropped_when_the_process_exits_or_leaves():
    child = subprocess.Popen([sys.executable, "-c", "sum(range(3_000_000))"])
    telemetry = ProcessTelemetry()
    telemetry.sample([child.pid, os.getpid()])
    child.wait()
    telemetry.sample([child.pid, os.getpid()])  # gone, no exit recorded yet: it may come a drain late
    assert child.pid in telemetry._prev
    telemetry.sample([child.pid, os.getpid()])  # still none: nothing is kept for it
    assert child.pid not in telemetry._prev and child.pid not in telemetry._procs
    telemetry.retain(set())  # left the workload: the recorder's periodic eviction
    assert not telemetry._prev and not telemetry._procs
    # A process met again after being forgotten starts from nothing: its CPU since it began.
    spent = sum(os.times()[:2])
    (pid, user, system), = [r for r in telemetry.sample([os.getpid()]).proc_cpu if r[0] == os.getpid()]
    assert user + system >= spent - 0.02


def test_an_exited_process_is_charged_its_final_total_less_its_last_reading():
    child = subprocess.Popen([sys.executable, "-c", "sum(range(3_000_000))"])
    telemetry = ProcessTelemetry()
    telemetry.sample([child.pid])
    u0, s0 = telemetry._prev[child.pid]
    child.wait()
    got = telemetry.sample([child.pid], exits={child.pid: (u0 + s0) * 1e9 + 25e6})
    assert got.exact_ns[child.pid] == pytest.approx(25e6)
    assert child.pid not in telemetry._prev  # accounted for the last time


class _NoKernel:
    """bcc.BPF's place: these tests resolve no kernel address through it."""

    @staticmethod
    def ksym(addr):
        raise AssertionError("not used")


def test_kernel_symbols_are_cleared_when_the_cache_is_full(monkeypatch):
    asked = []
    monkeypatch.setattr(symbols, "_kernel_resolver", lambda _cls: lambda addr: asked.append(addr) or f"k{addr}")
    monkeypatch.setattr(symbols, "MAX_KERNEL_ADDRS", 2)
    sym = symbols.Symbolizer(_NoKernel)
    assert [sym.kernel(a) for a in (1, 2, 1, 3, 1)] == ["k1", "k2", "k1", "k3", "k1"]
    assert asked == [1, 2, 3, 1]  # 3 found the cache full: 1 was resolved again


def test_elf_files_beyond_the_bound_are_unloaded_and_read_again_when_needed(monkeypatch):
    monkeypatch.setattr(symbols, "MAX_ELF_FILES", 1)
    sym = symbols.Symbolizer(_NoKernel)
    libc, libm = ctypes.CDLL(None), ctypes.CDLL("libm.so.6")
    pid = os.getpid()
    addr = {name: ctypes.cast(fn, ctypes.c_void_p).value
            for name, fn in (("getpid", libc.getpid), ("cos", libm.cos), ("getppid", libc.getppid))}
    frames = {name: sym.user(pid, a) for name, a in addr.items()}  # libc, libm (libc out), libc again
    assert "getpid (libc" in frames["getpid"] and "getppid (libc" in frames["getppid"]  # __getpid: an alias
    assert "cos" in frames["cos"] and "(libm" in frames["cos"]
    assert len(sym._files) == 1


def test_thread_stats_reads_every_live_thread_of_a_process():
    stop = threading.Event()
    extra = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in extra:
        t.start()
    try:
        stats = ProcessTelemetry().sample([os.getpid()]).thread_stats[os.getpid()]
        tids = {int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")}
        assert set(stats) == tids and {t.native_id for t in extra} <= tids
        with open(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat") as fh:
            on_now = int(fh.read().split()[0])
        on, runq = stats[threading.get_native_id()]
        assert 0 < on <= on_now and runq >= 0  # this thread's counters, read just before
    finally:
        stop.set()
        for t in extra:
            t.join()
    assert ProcessTelemetry().sample([2 ** 22 + 1]).thread_stats == {}  # no such process


def test_a_process_takes_the_name_it_was_sampled_under(tmp_path):
    """/proc's name, read when a process is first noted, can be its parent's (a shell's ``sh``
    between fork and exec); the name a later drain sampled its main thread under replaces it."""
    rec = Recorder(Options(command=["true"], output=tmp_path / "x.rec"))
    pid = os.getpid()  # a live process: the first note reads its name from /proc
    rec._note_process(pid, None, False, 1.0)
    assert rec.known_procs[pid][1] == Path(f"/proc/{pid}/comm").read_text().strip()
    proc_name = rec.known_procs[pid][1]
    rec._note_process(pid, "gloo", False, 2.0)  # sampled in a pool thread only: /proc's name stays
    assert rec.known_procs[pid][1] == proc_name
    rec._note_process(pid, "openssl", False, 3.0, named=True)  # its main thread's samples
    rec._note_process(pid, None, False, 4.0)  # a note with no sampled name keeps it
    assert rec.known_procs[pid][1] == "openssl" and rec.known_procs[pid][5] == 4.0
