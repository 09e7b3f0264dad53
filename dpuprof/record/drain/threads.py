"""Per-thread accounting of the workload: the threads, thread_time and thread_wait tables.

Sources, per interval:

* the on-CPU ns and run-queue delay ns of every live workload thread, cumulative since the thread
  began (read by ProcessTelemetry: from one read of the thread_stats task iterator, with each
  thread's name and birth, tasks.py; without it from /proc/PID/task/TID/schedstat, fields 1 and
  2, and the names and births from /proc). These are the scheduler's own totals and give
  thread_time for every thread that is still alive at the end of the interval.
* the sched_wait probe (probes/sched_wait.bpf.c), when loaded: each thread's birth and exit time,
  the same two counters as the thread exits (read from its task by the probe), and its waits by
  state and waker. /proc no longer shows a thread once it exited, so its last partial interval
  (and the whole life of a thread shorter than an interval) is the difference between its
  counters at exit and the last /proc reading that still showed it (0 for a thread born since).
  Without the probe (psutil mode, or the probe unavailable) that partial interval is lost and
  counted in ``lost`` as ``thread_exit_unaccounted`` (one per thread).

Times: /proc and BPF give CLOCK_MONOTONIC / boot-time instants, converted here to the unix time of
the intervals.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from dpuprof.record.drain.mapio import delete_keys, snapshot
from dpuprof.record.drain.tasks import TaskReading

WAIT_STATES = {1: "sleep", 2: "io", 3: "other"}
_CLK_TCK = os.sysconf("SC_CLK_TCK")
# A live thread's name is read from /proc at first sight, then every this many intervals: threads
# name themselves as they start (pthread_setname_np), and reading every thread's comm every
# interval was one file read per thread per second (512 a second on a 4 x 128-thread job).
COMM_REFRESH = 10


class BpfThread(NamedTuple):
    """One sw_threads entry: unix times (None when not seen); on_cpu_ns and runq_ns the thread's
    schedstat counters (cumulative ns since it began) at its exit, or at its last wake-up while
    it lives (a baseline of the probe's, not a reading: user space uses them only at exit).
    (A NamedTuple: a frozen dataclass took 3x the time to build, once per workload thread per
    interval.)"""
    tid: int
    pid: int
    born: float | None
    exited: float | None
    on_cpu_ns: int
    runq_ns: int
    comm: str


def _lived_ns(t0: float, t1: float, born: float | None, exited: float | None) -> int:
    start = t0 if born is None else max(t0, born)
    end = t1 if exited is None else min(t1, exited)
    return max(0, round((end - start) * 1e9))


def time_rows(t0: float, t1: float, alive: dict[int, tuple[int, int]], prev_alive: dict[int, tuple[int, int]],
              gone: dict[int, tuple[int, int, float | None, float]], born: dict[int, float],
              exited: dict[int, float] | None = None) -> list[tuple]:
    """thread_time rows (tid, on_cpu_ns, runq_ns, off_cpu_ns) of interval [t0, t1] (unix s).

    ``alive``: {tid: (on_cpu_ns, runq_ns)} cumulative readings at t1 of the threads alive then;
    ``prev_alive``: the same at t0 (a thread absent there began within the interval, its
    counters from 0). ``gone``: threads that exited within the interval, {tid: (on_cpu_ns,
    runq_ns, born or None, exit time)} with their counters' increase since t0 (or since birth).
    ``born``: unix birth times of threads that may have begun within the interval; ``exited``:
    exit times of threads /proc still shows (a zombie process's leader). A thread accounted up
    to its exit before (an exit time before t0, nothing new) gets no row. off_cpu_ns is
    the part of the interval the thread lived minus on_cpu_ns and runq_ns, clipped at 0 (the
    readings are taken a little after t1, so a busy thread can show slightly more than it lived).
    """
    rows = []
    for tid, (on, runq) in sorted(alive.items()):
        p_on, p_runq = prev_alive.get(tid, (0, 0))
        d_on, d_runq = max(0, on - p_on), max(0, runq - p_runq)
        lived = _lived_ns(t0, t1, born.get(tid), (exited or {}).get(tid))
        if lived or d_on or d_runq:
            rows.append((tid, d_on, d_runq, max(0, lived - d_on - d_runq)))
    for tid, (d_on, d_runq, t_born, t_exit) in sorted(gone.items()):
        lived = _lived_ns(t0, t1, t_born, t_exit)
        if lived or d_on or d_runq:
            rows.append((tid, d_on, d_runq, max(0, lived - d_on - d_runq)))
    return rows


def wait_rows(current: dict[tuple, tuple[int, int]], previous: dict[tuple, tuple[int, int]],
              workload: set[int]) -> list[tuple]:
    """thread_wait rows (tid, state, waker_pid, waker_tid, ns, count) from cumulative sw_waits
    readings {(tid, pid, state code, waker_pid, waker_tid): (ns, count)}, as the increase since
    ``previous``, for threads of ``workload`` processes only. waker 0: an interrupt (or the idle
    task); -1: the wake-up was not seen (the wait then ends at the switch-in). A wait is counted in the interval
    its wake-up falls in (a wait still going on is not in thread_wait yet; it is in off_cpu_ns)."""
    rows = []
    for key, (ns, count) in sorted(current.items()):
        tid, pid, state, waker_pid, waker_tid = key
        if pid not in workload:
            continue
        p_ns, p_count = previous.get(key, (0, 0))
        d_ns, d_count = max(0, ns - p_ns), max(0, count - p_count)
        if d_ns >= 1 << 62:  # a wrapped (negative) wait from the probe: never a reason to lose the file
            d_ns = 0
        if d_count or d_ns:
            rows.append((tid, WAIT_STATES.get(state, "other"), _signed(waker_pid), _signed(waker_tid), d_ns, d_count))
    return rows


def _signed(u32: int) -> int:
    """The probe's "waker not seen" (0xffffffff) as -1."""
    return -1 if u32 == 0xFFFFFFFF else u32


def proc_start_time(pid: int, tid: int, boot_unix: float) -> float | None:
    """Unix start time of a thread from /proc (clock-tick resolution), or None if gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            after_comm = fh.read().rsplit(")", 1)[1].split()
        return boot_unix + int(after_comm[19]) / _CLK_TCK  # field 22, starttime
    except (OSError, IndexError, ValueError):
        return None


def thread_comm(pid: int, tid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as fh:
            return fh.read().rstrip("\n")
    except OSError:
        return None


class SchedWaitMaps:
    """Reads and prunes the sched_wait probe's maps (sw_threads, sw_waits)."""

    def __init__(self, bpf):
        self.threads = bpf["sw_threads"]
        self.waits = bpf["sw_waits"]

    def snapshot(self, waits: bool = True, known=frozenset()) -> tuple[dict[int, BpfThread], set[int],
                                                                          dict[tuple, tuple[int, int]] | None]:
        """({tid: BpfThread}, every tid in sw_threads, {(tid, pid, state, waker_pid, waker_tid):
        (ns, count)}), cumulative; the third None when ``waits`` is False (sw_waits not read).
        The first leaves out the threads of ``known`` that have not exited: of a live thread whose
        birth is known nothing is used (its counters are the probe's baselines, not a reading),
        and building an entry for each of 512 live threads was ~1.5 ms a drain."""
        mono_to_unix = time.time() - time.monotonic()  # bpf_ktime_get_ns is CLOCK_MONOTONIC
        threads, held = {}, set()
        for tid, v in snapshot(self.threads, plain=True):
            held.add(tid)
            exit_ts = v.exit_ts
            if not exit_ts and tid in known:
                continue
            threads[tid] = BpfThread(
                tid=tid, pid=v.tgid, born=v.born_ts / 1e9 + mono_to_unix if v.born_ts else None,
                exited=exit_ts / 1e9 + mono_to_unix if exit_ts else None,
                on_cpu_ns=v.on_ns, runq_ns=v.runq_ns, comm=v.comm.decode("utf-8", "replace"))
        if not waits:
            return threads, held, None
        return threads, held, {(k.tid, k.tgid, k.state, k.waker_tgid, k.waker_tid): (v.ns, v.count)
                               for k, v in snapshot(self.waits)}

    def forget(self, tids: set[int], wait_keys) -> None:
        """Delete the entries of exited threads ``tids`` and their ``wait_keys``."""
        delete_keys(self.threads, [self.threads.Key(tid) for tid in tids])
        delete_keys(self.waits, [self.waits.Key(*key) for key in wait_keys])


class ThreadRecorder:
    """Per-interval thread rows of the workload; the recorder calls ``interval`` right after
    ProcessTelemetry.sample, so /proc and the probe are read at (nearly) the same instant.

    ``maps``: SchedWaitMaps, or None without the sched_wait probe (then thread_wait stays empty and
    the last partial interval of each exiting thread is counted as lost).
    """

    def __init__(self, maps: SchedWaitMaps | None, started: float | None = None):
        """``started``: unix time the recording began; a thread first seen later but born before
        it (an attached process's, or one that joined a cgroup) has its counters taken as a
        baseline at first sight instead of being charged its whole lifetime in one interval."""
        self.maps = maps
        self.started = started
        self.prev_alive: dict[int, tuple[int, int]] = {}
        self.last_reading: dict[int, tuple[int, int]] = {}  # each thread's last /proc counters
        self.prev_waits: dict[tuple, tuple[int, int]] = {}
        self.born: dict[int, float] = {}
        self.pid_of: dict[int, int] = {}
        self.comms: dict[int, str] = {}  # tid -> name, read from /proc (COMM_REFRESH)
        self.count = 0  # intervals so far
        self.prev_t1: float | None = None  # the end of the last interval
        self._written: dict[int, tuple] = {}  # tid -> the threads row last given of a live thread
        self._pending: list[tuple] = []  # rows for the next interval (threads that ended in a pause)
        self._raw_names: dict[int, bytes] = {}  # tid -> its name as the task iterator last gave it

    def interval(self, t0: float, t1: float, workload: set[int],
                 thread_stats: dict[int, dict[int, tuple[int, int]]],
                 read_waits: bool = True, known: TaskReading | None = None) -> tuple[dict[str, list], list[tuple]]:
        """({"thread_time": rows, "thread_wait": rows, "lost": rows}, threads rows (tid, pid, comm,
        first_seen, last_seen)) for [t0, t1]. ``thread_stats``: ProcessSample.thread_stats;
        ``known``: ProcessSample.threads, whose names and births then replace /proc's.
        A threads row is given only when something in it changed (``_thread_rows``).
        ``read_waits`` False: the waits cannot have changed since the last reading (the wake-up
        program was detached before it: WaitDuty.measures), so sw_waits is not read (beside 4 x
        128 threads a main thread had ~550 (waker, state) entries, ~2 ms a drain to read and
        compare) and thread_wait is empty."""
        bpf_threads, held, waits = self.maps.snapshot(read_waits, self.born.keys()) if self.maps else ({}, set(), {})
        if waits is None:
            waits = self.prev_waits
        alive = {tid: st for pid, stats in thread_stats.items() if pid in workload for tid, st in stats.items()}
        for pid, stats in thread_stats.items():
            for tid in stats:
                self.pid_of[tid] = pid
        boot_unix = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        mono_unix = time.time() - time.monotonic()
        for tid in alive:
            if tid not in self.born:
                b = bpf_threads.get(tid)
                if b is not None and b.born:
                    t = b.born
                elif known is not None and tid in known.born_ns:
                    t = known.born_ns[tid] / 1e9 + mono_unix
                else:
                    t = proc_start_time(self.pid_of[tid], tid, boot_unix)
                if t is not None:
                    self.born[tid] = t
        if self.started is not None:
            old = {tid for tid in alive if tid not in self.prev_alive
                   and self.born.get(tid) is not None and self.born[tid] < self.started}
            for tid in old:  # a baseline, not this interval's time
                self.prev_alive[tid] = alive[tid]
        gone, finished = self._gone(t1, workload, alive, bpf_threads)
        exits = {tid: b.exited for tid, b in bpf_threads.items() if tid in alive and b.exited}
        rows = time_rows(t0, t1, alive, self.prev_alive, gone, self.born, exits)
        # Gone from /proc with no exit recorded by the probe: its last partial interval is lost.
        vanished = [tid for tid in self.prev_alive if tid not in alive and tid not in gone
                    and (tid not in bpf_threads or bpf_threads[tid].exited is None)]
        lost = len(vanished)
        threads = self._thread_rows(t1, alive, gone, bpf_threads, vanished, known.names if known else None)
        tables = {"thread_time": rows,
                  "thread_wait": wait_rows(waits, self.prev_waits, workload) if read_waits else [],
                  "lost": [("thread_exit_unaccounted", lost)] if lost else []}
        self.prev_waits = waits
        self.prev_alive = alive
        self.prev_t1 = t1
        self.last_reading.update(alive)
        self._forget(alive, held, finished, waits)
        return tables, threads

    def rebaseline(self, workload: set[int], thread_stats: dict[int, dict[int, tuple[int, int]]]) -> None:
        """After a pause (a duty cycle's off part): the live workload threads' /proc readings
        (ProcessSample.thread_stats) become the baselines, so the next interval holds nothing of
        the pause; threads gone meanwhile are forgotten (their end fell in the pause). Without the
        sched_wait probe only: --duty refuses it (record/sources.py NOT_PAUSABLE). The threads that
        ended in the pause were last seen at the end of the interval before it: their rows go with
        the next interval's."""
        alive = {tid: st for pid, stats in thread_stats.items() if pid in workload for tid, st in stats.items()}
        self._pending += self._ended_rows([tid for tid in self.prev_alive if tid not in alive])
        self.prev_alive = alive

    def _gone(self, t1, workload, alive, bpf_threads):
        """Threads that exited by t1 and are no longer in /proc: ({tid: (on, runq, born, exit)} of
        workload threads, every such tid, to delete from the maps). One that exited after t1 (after
        the interval ended, before /proc was read) waits for the next interval."""
        gone, finished = {}, set()
        for tid, b in bpf_threads.items():
            if b.exited is None or tid in alive or b.exited > t1:
                continue
            finished.add(tid)
            if b.pid not in workload:
                continue
            base_on, base_runq = self.last_reading.get(tid, (0, 0))  # 0: born since
            gone[tid] = (max(0, b.on_cpu_ns - base_on), max(0, b.runq_ns - base_runq), b.born, b.exited)
        return gone, finished

    def _thread_rows(self, t1, alive, gone, bpf_threads, vanished, names=None) -> list[tuple]:
        """The threads rows that changed: a live thread's when it is first seen or its pid, name or
        exit (a zombie leader's) changed, with last_seen None (alive: RecordingWriter.close writes
        the last interval's end into it, the reader that end where the recorder was killed); one
        that exited with its exit time; one that left /proc unseen by the probe (``vanished``) with
        the end of the last interval that saw it. (Every live thread's row was upserted every
        interval until 2026-12-07: 512 rows a second beside 4 x 128 threads, for a last_seen.)
        A name comes from ``names`` (the task iterator's: {tid: comm bytes}) when given, else from
        /proc at first sight and every COMM_REFRESH intervals."""
        rows, self._pending = self._pending, []
        self.count += 1
        refresh = self.count % COMM_REFRESH == 1
        written, live = self._written, []
        for tid in alive:
            pid = self.pid_of[tid]
            b = bpf_threads.get(tid)
            before = written.get(tid)
            renamed = self._name(pid, tid, b, names, refresh)
            if not renamed and before is not None and before[1] == pid and (b is None or not b.exited):
                continue  # nothing that its row holds can have changed
            last = min(t1, b.exited) if b is not None and b.exited else None
            first = self.born.get(tid) or (before[3] if before else t1)  # unknown birth: first sight
            row = (tid, pid, self.comms[tid], first, last)
            if before != row:
                written[tid] = row
                live.append(row)
        rows += sorted(live)
        for tid in sorted(gone):
            b = bpf_threads[tid]
            written.pop(tid, None)
            rows.append((tid, b.pid, b.comm, self.born.get(tid, b.born or b.exited), b.exited))
        return rows + self._ended_rows(vanished)

    def _name(self, pid: int, tid: int, b: BpfThread | None, names, refresh: bool) -> bool:
        """Bring ``tid``'s name in ``comms`` up to date; whether it may have changed."""
        raw = names.get(tid) if names is not None else None
        if raw is not None:
            if raw == self._raw_names.get(tid):
                return False
            self._raw_names[tid] = raw
            self.comms[tid] = raw.decode("utf-8", "replace")
            return True
        if refresh or tid not in self.comms:
            self.comms[tid] = thread_comm(pid, tid) or (b.comm if b else "")
            return True
        return False

    def _ended_rows(self, tids) -> list[tuple]:
        """Rows of threads that left /proc with no exit recorded: last seen at the end of the
        last interval (``prev_t1``)."""
        rows = []
        for tid in sorted(tids):
            row = self._written.pop(tid, None)
            if row is not None:
                rows.append((*row[:4], self.prev_t1 if row[4] is None else row[4]))
        return rows

    def _forget(self, alive, held: set[int], finished: set[int], waits) -> None:
        """Drop what is kept about threads that are accounted for the last time."""
        keep = alive.keys() | (held - finished)
        per_thread = (self.born, self.pid_of, self.comms, self.last_reading, self._written, self._raw_names)
        # Set operations, not a Python loop over every thread of every dict: 0.7 ms a drain
        # beside 4 x 128 threads, where hardly a thread ends.
        for tid in set().union(*per_thread) - keep:
            for known in per_thread:
                known.pop(tid, None)
        if self.maps is not None and finished:
            # A wait entry ends with its thread, and also with its waker: a main thread that
            # joins a thread per task is woken once by each, a new (waker, state) key every time
            # (180 a second here), and sw_waits would fill (16384 entries) and be read whole.
            # Lossless: a finished thread has left /proc, so it wakes nobody any more, and
            # ``waits`` holds the entries' values now (read now, or unchanged since: read_waits).
            keys = [k for k in waits if k[0] in finished or k[4] in finished]
            for k in keys:
                self.prev_waits.pop(k, None)
            self.maps.forget(finished, keys)
