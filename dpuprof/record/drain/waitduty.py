"""The duty cycle of the wait probe's one hot program (``record --wait-duty W/P``, issue 32).

``sched_waking`` (probes/sched_wait.bpf.c) runs at every wake-up on the host; its floor alone,
an empty program, is ~61 ns a wake-up, ~1 % of a core under fio's ~190k wake-ups a second, where
the budget for the whole recorder is 1 %. So it is attached for the first ``on`` intervals of every
``period`` (counted from interval 0) and detached in between; its two rare companions (a thread's
birth, its exit: the short-lived threads' CPU) stay attached throughout, and every other table is
recorded as before. Waits are then a sample of time: each interval records the seconds the
program was attached in it (``intervals.waits_s``), and the projection scales the waits seen by
the window's seconds over those attached (project/paths.py), the estimator of a systematic sample
of time windows (Google-Wide Profiling samples machines and windows so).

At each attach the main threads' baselines in ``sw_threads`` are written anew (``seed``) from
/proc: on-CPU and run-queue ns (/proc/PID/task/PID/schedstat, the same two task fields that the
program reads: se.sum_exec_runtime and sched_info.run_delay), the voluntary switch count, and the
wake-up time "now" (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock). Without them a main thread's
first wake-up after the off part would measure every wait of the off part as one, charged to that
one waker; with them it measures the part of its wait since the attach. A wait still going on at
a detach loses its part before the detach (its wake-up is not seen): for waits much shorter than
``on`` intervals this is a small share, and what the probe did not see goes to the reason "other"
in the model, as it always did. Raw tracepoints attach and close in about a millisecond
(load/attach.py), so the switches cost nothing worth counting.
"""

from __future__ import annotations

import os
import time

from dpuprof.record.workload import procfs

HOT = "sched_waking"  # the raw tracepoint's key in LoadedProbes.raw_tracepoints


def read_baseline(pid: int) -> tuple[int, int, int] | None:
    """(on-CPU ns, run-queue ns, voluntary switches) of ``pid``'s main thread now, None if gone.
    Read afresh, not from the interval's /proc readings (drain/schedstat.py): those were taken
    before the drain, and a thread that ran since would have that run counted in its first wait."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            on, runq = (int(x) for x in fh.read().split()[:2])
    except (OSError, ValueError):
        return None
    nvcsw = procfs.voluntary_switches(pid)
    return None if nvcsw is None else (on, runq, nvcsw)


def is_on(interval: int, on: int, period: int) -> bool:
    """Whether ``interval`` (0-based) is in an on part: the first ``on`` of every ``period``."""
    return interval % period < on


class WaitDuty:
    """Attaches ``sched_waking`` for the first ``on`` intervals of every ``period`` (see the
    module docstring). The recorder calls ``covered(t0, t1)`` as it writes interval [t0, t1] (the
    seconds the program was attached in it, ``intervals.waits_s``), then ``turn(next, pids)``
    with the next interval's index and the workload's live processes. Interval 0 is on: the
    probes load attached."""

    def __init__(self, probes, on: int, period: int, clock=time.time, baseline=read_baseline):
        if not 0 < on < period:
            raise ValueError(f"on ({on}) must be at least 1 and less than period ({period})")
        self.probes, self.on, self.period = probes, on, period
        self.clock, self.baseline = clock, baseline
        self.hot = probes.raw_tracepoints[HOT]  # (fd, event, fn), to attach again under the same key
        self.since: float | None = clock()  # attached since (unix s); None while detached
        self.closed_s = 0.0  # attached seconds of spans that ended since the last covered()
        self.last_t1: float | None = None

    def covered(self, t0: float, t1: float) -> float:
        """Seconds the program was attached within [t0, t1], the interval being written."""
        s = self.closed_s
        if self.since is not None:
            s += max(0.0, t1 - max(self.since, t0))
        self.closed_s = 0.0
        self.last_t1 = t1
        return min(s, t1 - t0)

    def measures(self, interval: int) -> bool:
        """Whether waits may have been measured in ``interval``: it is in an on part, or follows
        one (a wake-up that raced the detach at its start lands in it). The waits of the other
        intervals need not be read (ThreadRecorder.interval ``read_waits``)."""
        return is_on(interval, self.on, self.period) or is_on(interval - 1, self.on, self.period)

    def turn(self, interval: int, pids) -> None:
        """Attach (seeding the baselines of ``pids``' main threads) or detach for ``interval``."""
        want = is_on(interval, self.on, self.period)
        if want and self.since is None:
            self.seed(pids)
            self.probes.attach_raw_tracepoint(HOT, self.hot.event, self.hot.fn)
            self.since = self.clock()
        elif not want and self.since is not None:
            os.close(self.probes.raw_tracepoints.pop(HOT).fd)
            now = self.clock()
            start = self.since if self.last_t1 is None else max(self.since, self.last_t1)
            self.closed_s += max(0.0, now - start)
            self.since = None

    def seed(self, pids) -> None:
        """Write each live main thread's baselines into sw_threads (see the module docstring). A
        thread that has exited (exit_ts set) is left as it is."""
        table = self.probes["sw_threads"]
        for pid in pids:
            got = self.baseline(pid)
            if got is None:
                continue
            try:
                leaf = table[pid]
            except KeyError:
                leaf = table.Leaf()
                leaf.tgid = pid
            if leaf.exit_ts:
                continue
            leaf.on_ns, leaf.runq_ns, leaf.nvcsw = got
            leaf.wake_ts = time.monotonic_ns()  # bpf_ktime_get_ns: CLOCK_MONOTONIC
            try:
                table[pid] = leaf
            except OSError:
                pass  # the map is full: its first wake-up is then not measured (sw_lost[2])


__all__ = ["WaitDuty", "is_on", "read_baseline"]
