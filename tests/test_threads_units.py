"""Unit tests of per-thread accounting (dpuprof/record/drain/threads.py) and the probe registry's
dependency and tracefs-offset handling: pure functions on synthetic readings."""

from __future__ import annotations

import pytest

from dpuprof.record.load import probes
from dpuprof.record.drain.threads import BpfThread, ThreadRecorder, time_rows, wait_rows
from dpuprof.record.drain import threads as threads_mod

MS = 1_000_000


def test_time_rows_deltas_and_off_cpu_of_a_live_thread():
    rows = time_rows(10.0, 11.0, alive={7: (300 * MS, 50 * MS)}, prev_alive={7: (100 * MS, 10 * MS)},
                     gone={}, born={7: 5.0})
    assert rows == [(7, 200 * MS, 40 * MS, 760 * MS)]


def test_time_rows_thread_born_within_the_interval_counts_from_zero_and_from_birth():
    rows = time_rows(10.0, 11.0, alive={8: (100 * MS, 0)}, prev_alive={}, gone={}, born={8: 10.75})
    assert rows == [(8, 100 * MS, 0, 150 * MS)]


def test_time_rows_gone_thread_lives_until_its_exit_and_off_cpu_is_clipped():
    rows = time_rows(10.0, 11.0, alive={}, prev_alive={}, born={},
                     gone={9: (20 * MS, 5 * MS, None, 10.1), 10: (90 * MS, 0, 10.95, 11.0)})
    assert rows == [(9, 20 * MS, 5 * MS, 75 * MS), (10, 90 * MS, 0, 0)]  # 10: 90 ms in 50 ms lived -> 0


def test_wait_rows_are_deltas_of_workload_threads_with_state_names_and_unknown_waker():
    prev = {(7, 1, 1, 1, 8): (100, 2)}
    cur = {(7, 1, 1, 1, 8): (350, 5), (7, 1, 2, 0, 0): (40, 1), (7, 1, 1, 0xFFFFFFFF, 0xFFFFFFFF): (9, 1),
           (50, 2, 1, 1, 7): (1000, 1), (7, 1, 3, 1, 1): (0, 0)}
    rows = wait_rows(cur, prev, workload={1})
    # Thread 50 is not in the workload; the "other" row did not change.
    assert rows == [(7, "sleep", 1, 8, 250, 3), (7, "sleep", -1, -1, 9, 1), (7, "io", 0, 0, 40, 1)]


class FakeMaps:
    """Stands in for SchedWaitMaps: scripted snapshots; records what is forgotten."""

    def __init__(self):
        self.threads: dict[int, BpfThread] = {}
        self.waits: dict[tuple, tuple[int, int]] = {}
        self.forgotten: list[tuple[set, list]] = []
        self.reads = 0  # snapshots that read the waits

    def snapshot(self, waits: bool = True, known=frozenset()):
        self.reads += waits
        shown = {tid: b for tid, b in self.threads.items() if b.exited or tid not in known}
        return shown, set(self.threads), dict(self.waits) if waits else None

    def forget(self, tids, keys):
        self.forgotten.append((set(tids), list(keys)))
        for tid in tids:
            self.threads.pop(tid, None)
        for k in keys:
            self.waits.pop(k, None)


def _bt(tid, on, runq, born=None, exited=None, pid=1, comm="worker"):
    return BpfThread(tid=tid, pid=pid, born=born, exited=exited, on_cpu_ns=on, runq_ns=runq, comm=comm)


def test_time_rows_zombie_leader_lives_until_its_exit_and_then_gets_no_rows():
    rows = time_rows(10.0, 11.0, alive={1: (50 * MS, 0)}, prev_alive={1: (40 * MS, 0)}, gone={}, born={},
                     exited={1: 10.2})
    assert rows == [(1, 10 * MS, 0, 190 * MS)]
    rows = time_rows(11.0, 12.0, alive={1: (50 * MS, 0)}, prev_alive={1: (50 * MS, 0)}, gone={}, born={},
                     exited={1: 10.2})
    assert rows == []


def test_exiting_thread_gets_its_last_partial_interval_from_the_probe():
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    # Interval 0: thread 2 alive in /proc (schedstat) and in the probe.
    maps.threads = {2: _bt(2, 100 * MS, 10 * MS, born=0.5)}
    tables, threads = rec.interval(0.0, 1.0, {1}, {1: {2: (100 * MS, 10 * MS)}})
    assert tables["thread_time"] == [(2, 100 * MS, 10 * MS, 390 * MS)]
    assert threads[0][:2] == (2, 1) and threads[0][3] == 0.5 and threads[0][4] is None  # alive
    # Interval 1: it exited at 1.4 s; /proc no longer lists it; the probe's counters grew by 30+5 ms.
    maps.threads = {2: _bt(2, 130 * MS, 15 * MS, born=0.5, exited=1.4, comm="gone")}
    maps.waits = {(2, 1, 1, 1, 1): (200 * MS, 1)}
    tables, threads = rec.interval(1.0, 2.0, {1}, {1: {}})
    assert tables["thread_time"] == [(2, 30 * MS, 5 * MS, 365 * MS)]
    assert tables["thread_wait"] == [(2, "sleep", 1, 1, 200 * MS, 1)]
    assert tables["lost"] == []
    assert threads == [(2, 1, "gone", 0.5, 1.4)]
    assert maps.forgotten == [({2}, [(2, 1, 1, 1, 1)])]
    # Interval 2: nothing more about it.
    tables, threads = rec.interval(2.0, 3.0, {1}, {1: {}})
    assert tables["thread_time"] == [] and threads == []


def test_thread_born_and_gone_within_one_interval_is_accounted_from_birth():
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    maps.threads = {3: _bt(3, 20 * MS, 1 * MS, born=0.2, exited=0.3)}
    tables, threads = rec.interval(0.0, 1.0, {1}, {1: {}})
    assert tables["thread_time"] == [(3, 20 * MS, 1 * MS, 79 * MS)]
    assert threads == [(3, 1, "worker", 0.2, 0.3)]


def test_exit_after_the_interval_end_waits_for_the_next_interval():
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    maps.threads = {4: _bt(4, 10 * MS, 0, born=0.1)}
    rec.interval(0.0, 1.0, {1}, {1: {4: (10 * MS, 0)}})
    # It exited at 2.001 s, after t1 = 2.0 but before /proc was read.
    maps.threads = {4: _bt(4, 15 * MS, 0, born=0.1, exited=2.001)}
    tables, _ = rec.interval(1.0, 2.0, {1}, {1: {}})
    assert tables["thread_time"] == [] and tables["lost"] == [] and maps.forgotten == []
    tables, _ = rec.interval(2.0, 3.0, {1}, {1: {}})
    assert tables["thread_time"] == [(4, 5 * MS, 0, 0)]  # 5 ms in 1 ms lived: off clipped at 0


def test_a_live_thread_is_timed_by_proc_and_its_exit_against_its_last_proc_reading():
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    # The probe's counters of a live thread are its baselines at its last wake-up, not a reading.
    maps.threads = {8: _bt(8, 90 * MS, 1 * MS, born=0.5)}
    tables, _ = rec.interval(0.0, 1.0, {1}, {1: {8: (100 * MS, 2 * MS)}})
    assert tables["thread_time"] == [(8, 100 * MS, 2 * MS, 398 * MS)]
    maps.threads = {8: _bt(8, 140 * MS, 4 * MS, born=0.5)}
    tables, _ = rec.interval(1.0, 2.0, {1}, {1: {8: (150 * MS, 5 * MS)}})
    assert tables["thread_time"] == [(8, 50 * MS, 3 * MS, 947 * MS)]
    # It exits at 2.5 s with the kernel's totals: the part since the last /proc reading is charged.
    maps.threads = {8: _bt(8, 170 * MS, 6 * MS, born=0.5, exited=2.5)}
    tables, _ = rec.interval(2.0, 3.0, {1}, {1: {}})
    assert tables["thread_time"] == [(8, 20 * MS, 1 * MS, 479 * MS)]


def test_without_the_probe_an_exit_is_counted_as_lost():
    rec = ThreadRecorder(None)
    rec.interval(0.0, 1.0, {1}, {1: {5: (10 * MS, 0), 6: (1 * MS, 0)}})
    tables, _ = rec.interval(1.0, 2.0, {1}, {1: {6: (2 * MS, 0)}})
    assert tables["lost"] == [("thread_exit_unaccounted", 1)]
    assert [r[0] for r in tables["thread_time"]] == [6]
    assert tables["thread_wait"] == []


def test_threads_of_other_processes_are_left_out():
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    maps.threads = {9: _bt(9, 1, 1, born=0.1, exited=0.2, pid=99)}
    tables, threads = rec.interval(0.0, 1.0, {1}, {1: {}, 99: {10: (5, 5)}})
    assert tables["thread_time"] == [] and threads == []
    assert maps.forgotten and 9 in maps.forgotten[0][0]  # its map entry is still pruned


def test_a_probe_whose_dependency_is_unavailable_is_skipped_with_the_reason():
    by_name = {p.name: p for p in probes.PROBES}
    unavailable = {}
    kept = probes._with_needs([by_name["cpu_sample"], by_name["sched_wait"]], unavailable)
    assert [p.name for p in kept] == ["cpu_sample"]
    assert unavailable == {"sched_wait": "needs probe proc_tree, unavailable"}
    assert probes._with_needs([by_name["proc_tree"], by_name["sched_wait"]], {}) == \
        [by_name["proc_tree"], by_name["sched_wait"]]


def test_a_wrapped_wait_from_the_probe_counts_its_wake_up_but_no_time():
    # 2^64 - 151: a wait the probe computed as negative (a switch-out stamped after the waker read
    # its clock) must not reach the packed blob, whose values stop at 2^62 - 1.
    rows = wait_rows({(2, 1, 1, 1, 1): ((1 << 64) - 151, 3)}, {(2, 1, 1, 1, 1): (0, 2)}, {1})
    assert rows == [(2, "sleep", 1, 1, 0, 1)]


def test_waits_not_read_while_the_wake_up_program_was_off_keep_their_baseline():
    """read_waits False (WaitDuty.measures: the program was detached before the interval began):
    sw_waits is not read, thread_wait is empty, and the next reading's deltas start from the last
    one read, so no wait is lost or counted twice."""
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    key = (1, 1, 1, 1, 2)
    maps.waits[key] = (100, 1)
    assert rec.interval(0.0, 1.0, {1}, {1: {}})[0]["thread_wait"] == [(1, "sleep", 1, 2, 100, 1)]
    maps.waits[key] = (150, 2)  # a wake-up that raced the detach: read in the interval after
    assert rec.interval(1.0, 2.0, {1}, {1: {}})[0]["thread_wait"] == [(1, "sleep", 1, 2, 50, 1)]
    reads = maps.reads
    tables, _ = rec.interval(2.0, 3.0, {1}, {1: {}}, read_waits=False)
    assert tables["thread_wait"] == [] and maps.reads == reads
    maps.waits[key] = (400, 5)  # on again
    assert rec.interval(3.0, 4.0, {1}, {1: {}})[0]["thread_wait"] == [(1, "sleep", 1, 2, 250, 3)]


def test_a_main_threads_waits_on_a_finished_waker_are_forgotten_once_drained():
    """A main thread that joins a thread per task is woken by each of them once: those entries
    are deleted when the waker is finished, after their last values were drained (not kept and
    read every drain until sw_waits fills)."""
    maps = FakeMaps()
    rec = ThreadRecorder(maps)
    maps.threads = {1: _bt(1, 10 * MS, 0, born=0.1), 5: _bt(5, 1 * MS, 0, born=0.2)}
    maps.waits = {(1, 1, 1, 1, 5): (100, 1)}
    rec.interval(0.0, 1.0, {1}, {1: {1: (10 * MS, 0), 5: (1 * MS, 0)}})
    assert maps.forgotten == []
    # Thread 5 woke the main thread once more, then exited (gone from /proc).
    maps.threads[5] = _bt(5, 2 * MS, 0, born=0.2, exited=1.5)
    maps.waits = {(1, 1, 1, 1, 5): (300, 2), (1, 1, 1, 0, 0): (50, 1)}
    tables, _ = rec.interval(1.0, 2.0, {1}, {1: {1: (11 * MS, 0)}})
    assert (1, "sleep", 1, 5, 200, 1) in tables["thread_wait"]  # its last wake-up is counted
    assert maps.forgotten == [({5}, [(1, 1, 1, 1, 5)])]  # then the entry goes; the main thread's own stay
    assert maps.waits == {(1, 1, 1, 0, 0): (50, 1)}
    # A new thread under the reused id 5 starts a new entry: counted whole.
    maps.waits[(1, 1, 1, 1, 5)] = (70, 1)
    tables, _ = rec.interval(2.0, 3.0, {1}, {1: {1: (12 * MS, 0)}})
    assert tables["thread_wait"] == [(1, "sleep", 1, 5, 70, 1)]


def test_a_live_threads_row_is_given_when_it_changes_and_ends_where_it_was_last_seen(monkeypatch):
    """threads rows follow what changed: a live thread's once (last_seen None), again when its
    name changes; one that leaves /proc without a recorded exit (no probe) ends at the last
    interval that saw it."""
    names = {5: "a", 6: "b"}
    monkeypatch.setattr(threads_mod, "thread_comm", lambda pid, tid: names[tid])
    monkeypatch.setattr(threads_mod, "COMM_REFRESH", 2)  # names read anew every second interval
    rec = ThreadRecorder(None)
    _, threads = rec.interval(0.0, 1.0, {1}, {1: {5: (1 * MS, 0), 6: (1 * MS, 0)}})
    assert threads == [(5, 1, "a", 1.0, None), (6, 1, "b", 1.0, None)]  # birth unknown: first sight
    _, threads = rec.interval(1.0, 2.0, {1}, {1: {5: (2 * MS, 0), 6: (2 * MS, 0)}})
    assert threads == []
    names[6] = "renamed"
    _, threads = rec.interval(2.0, 3.0, {1}, {1: {5: (3 * MS, 0), 6: (3 * MS, 0)}})
    assert threads == [(6, 1, "renamed", 1.0, None)]
    _, threads = rec.interval(3.0, 4.0, {1}, {1: {5: (4 * MS, 0)}})
    assert threads == [(6, 1, "renamed", 1.0, 3.0)]  # gone unseen: last seen at the end of 3.0


def test_threads_that_ended_in_a_pause_end_at_the_interval_before_it():
    rec = ThreadRecorder(None)
    rec.interval(0.0, 1.0, {1}, {1: {5: (1 * MS, 0), 6: (1 * MS, 0)}})
    rec.rebaseline({1}, {1: {5: (9 * MS, 0)}})  # thread 6 ended while the recorder sat out
    _, threads = rec.interval(4.0, 5.0, {1}, {1: {5: (10 * MS, 0)}})
    assert [(r[0], r[4]) for r in threads] == [(6, 1.0)]
