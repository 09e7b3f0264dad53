"""record/drain/tasks.py: the task iterator's records parsed, and what the per-thread tables take
from a reading (names, births) in place of /proc (synthetic records: a pure function's test)."""

from __future__ import annotations

import os

from dpuprof.record.drain import threads as threads_mod
from dpuprof.record.drain.tasks import RECORD, TaskIterator, TaskReading, parse
from dpuprof.record.drain.telemetry import ProcessTelemetry
from dpuprof.record.drain.threads import ThreadRecorder

MS = 1_000_000


def _rec(tid, tgid, on, runq=0, start=0, comm=b"worker"):
    return RECORD.pack(tid, tgid, on, runq, start, comm)


def test_parse_keeps_the_processes_asked_for_and_strips_names():
    raw = _rec(10, 10, 5, 1, 7, b"main") + _rec(11, 10, 6, 2, 8) + _rec(20, 20, 9) + b"\x01\x02"  # a torn tail
    got = parse(raw, {10})
    assert got == TaskReading({10: {10: (5, 1), 11: (6, 2)}}, {10: b"main", 11: b"worker"}, {10: 7, 11: 8})
    assert parse(b"", {10}) == TaskReading({}, {}, {})


def test_process_telemetry_reads_threads_from_the_iterator_and_falls_back_to_proc():
    me = os.getpid()
    calls = []

    def read_raw():
        calls.append(1)
        if len(calls) > 1:
            raise OSError(5, "gone")
        return _rec(me, me, 42 * MS, 3, 0, b"main") + _rec(2 ** 22 + 5, 2 ** 22 + 5, 1)

    telemetry = ProcessTelemetry(TaskIterator(read_raw))
    first = telemetry.sample([me])
    assert first.thread_stats == {me: {me: (42 * MS, 3)}} and first.threads.names == {me: b"main"}
    second = telemetry.sample([me])  # the read failed: /proc from here on
    assert second.threads is None and me in second.thread_stats[me]
    assert telemetry.sample([me]).threads is None and len(calls) == 2
    telemetry.close()


def test_names_and_births_come_from_the_reading_without_proc(monkeypatch):
    def no_proc(*_args):
        raise AssertionError("read /proc")

    monkeypatch.setattr(threads_mod, "thread_comm", no_proc)
    monkeypatch.setattr(threads_mod, "proc_start_time", no_proc)
    rec = ThreadRecorder(None)
    known = TaskReading({1: {5: (MS, 0)}}, {5: b"loader"}, {5: 1})
    _, rows = rec.interval(0.0, 1.0, {1}, known.stats, known=known)
    assert [(r[0], r[2], r[4]) for r in rows] == [(5, "loader", None)] and rows[0][3] > 0
    _, rows = rec.interval(1.0, 2.0, {1}, known.stats, known=known)
    assert rows == []
    renamed = known._replace(names={5: b"loader-2"})
    _, rows = rec.interval(2.0, 3.0, {1}, renamed.stats, known=renamed)
    assert [(r[0], r[2]) for r in rows] == [(5, "loader-2")]
