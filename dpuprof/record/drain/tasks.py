"""Every thread's scheduler counters, birth and name from one read of the thread_stats task
iterator (probes/thread_stats.bpf.c), where /proc took a file read per thread (schedstat.py).

The counters are the fields /proc/PID/task/TID/schedstat prints (se.sum_exec_runtime and
sched_info.run_delay, ns, cumulative since the thread began), so the two sources give the same
numbers; a thread's birth is its task's start_time (CLOCK_MONOTONIC ns) and its name the task's
comm at the read.
"""

from __future__ import annotations

import struct
from typing import Callable, NamedTuple

ITER_FUNC = "bpf_iter__task"  # the probe's iterator function (bcc's BPF_ITER(task))
# struct ts_record: tid, tgid, on_ns, runq_ns, start_ns, comm[16] (no padding: 48 bytes)
RECORD = struct.Struct("=IIQQQ16s")


class TaskReading(NamedTuple):
    """One read, of the threads of the processes asked for: ``stats`` {tgid: {tid: (on_cpu_ns,
    runq_ns)}}, ``names`` {tid: comm as bytes, NULs stripped}, ``born_ns`` {tid: start_time,
    CLOCK_MONOTONIC ns}."""
    stats: dict[int, dict[int, tuple[int, int]]]
    names: dict[int, bytes]
    born_ns: dict[int, int]


def parse(raw: bytes, tgids) -> TaskReading:
    """The records of ``raw`` (what the iterator wrote) whose tgid is in ``tgids``."""
    stats: dict[int, dict[int, tuple[int, int]]] = {}
    names, born = {}, {}
    whole = memoryview(raw)[:len(raw) - len(raw) % RECORD.size]  # a view: no copy of the read
    for tid, tgid, on, runq, start, comm in RECORD.iter_unpack(whole):
        if tgid in tgids:
            stats.setdefault(tgid, {})[tid] = (on, runq)
            names[tid] = comm.rstrip(b"\0")
            born[tid] = start
    return TaskReading(stats, names, born)


class TaskIterator:
    """``read(tgids)`` -> TaskReading through ``read_raw`` (LoadedProbes.read_iter of ITER_FUNC)."""

    def __init__(self, read_raw: Callable[[], bytes]):
        self.read_raw = read_raw

    def read(self, tgids) -> TaskReading:
        return parse(self.read_raw(), tgids)
