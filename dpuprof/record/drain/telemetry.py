"""Host and process telemetry from psutil/procfs, sampled once per interval.

Every method returns rows for the Recording tables named in its docstring, as deltas since the
previous call (seconds of CPU, bytes, counts).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import psutil

from dpuprof.record.drain.accounting import HostTimes
from dpuprof.record.drain.schedstat import SchedstatFiles
from dpuprof.record.drain.tasks import TaskIterator, TaskReading

HOST_CPU_FIELDS = ("user", "nice", "system", "irq", "softirq", "iowait", "steal", "idle")


class HostTelemetry:
    """The host's CPU, disk and network counters. ``times`` is the last ``sample``'s HostTimes
    (accounting.py), None before the first."""

    def __init__(self):
        self._cpu = psutil.cpu_times()
        self._at = time.monotonic()
        self._disk = psutil.disk_io_counters()
        self._net = psutil.net_io_counters(pernic=True)
        self._cpus = psutil.cpu_count() or 1
        self.times: HostTimes | None = None

    def sample(self) -> dict[str, list[tuple]]:
        """Rows for host_cpu (field, seconds), host_disk (4 counters) and host_net (dev, ...)."""
        cpu, at = psutil.cpu_times(), time.monotonic()
        delta = {f: max(0.0, getattr(cpu, f, 0.0) - getattr(self._cpu, f, 0.0)) for f in HOST_CPU_FIELDS}
        rows_cpu = [(f, d) for f, d in delta.items() if hasattr(cpu, f)]
        # /proc/stat's idle and iowait are measured (NO_HZ), steal is the hypervisor's own count.
        idle, steal = (delta["idle"] + delta["iowait"]) * 1e9, delta["steal"] * 1e9
        span = (at - self._at) * 1e9 * self._cpus
        self.times = HostTimes(max(0.0, span - idle - steal), idle, steal)
        self._cpu, self._at = cpu, at
        disk = psutil.disk_io_counters()
        rows_disk = []
        if disk is not None and self._disk is not None:
            rows_disk = [tuple(max(0, getattr(disk, f) - getattr(self._disk, f))
                               for f in ("read_bytes", "write_bytes", "read_count", "write_count"))]
        self._disk = disk
        net = psutil.net_io_counters(pernic=True)
        rows_net = []
        for dev, now in sorted(net.items()):
            before = self._net.get(dev)
            if before is None:
                continue
            delta = tuple(max(0, getattr(now, f) - getattr(before, f))
                          for f in ("bytes_sent", "bytes_recv", "packets_sent", "packets_recv"))
            if any(delta):
                rows_net.append((dev, *delta))
        self._net = net
        return {"host_cpu": rows_cpu, "host_disk": rows_disk, "host_net": rows_net}


class ProcessSample(NamedTuple):
    """One ``ProcessTelemetry.sample``: ``proc_cpu`` rows (pid, user_s, system_s) from /proc/PID/stat;
    ``exact_ns`` {pid: ns}, each process's CPU time in the interval (the input of the same name
    in accounting.py); ``thread_stats`` {pid: {tid: (on_cpu_ns, runq_ns)}}, the cumulative
    schedstat readings of its live threads, for per-thread accounting (threads.py)."""
    proc_cpu: list
    exact_ns: dict
    thread_stats: dict
    threads: TaskReading | None = None  # names and births too, where the task iterator read them


class ProcessTelemetry:
    """Per-process CPU of the workload tree.

    A process's CPU time is /proc/PID/stat's utime + stime: the kernel keeps them summing to the
    scheduler's sum_exec_runtime over all the process's threads, dead ones included (only their
    split between user and system is ticked), so the running total is exact to the clock tick it
    is printed in (10 ms) and its deltas never drift. (The sum of the live threads' schedstat, used
    before, lost every thread that ended: 3.2 s of 4 s for 16 threads of 0.25 s.) A process whose
    last thread exited (no /proc any more) is charged its final total from proc_tree's exit hook
    (``exits``) less its last reading; without one, its last partial interval is left to its
    samples.

    Per thread, the same two counters (on-CPU and run-queue ns) from one read of the task
    iterator ``tasks`` (tasks.py) where the thread_stats probe is loaded, else from
    /proc/PID/task/TID/schedstat through files kept open (schedstat.py): ``close()`` releases them.
    """

    def __init__(self, tasks: TaskIterator | None = None):
        self._procs: dict[int, psutil.Process] = {}
        self._prev: dict[int, tuple[float, float]] = {}
        self._gone: set[int] = set()  # read before, not found at the last call: an exit may follow
        self._schedstat = SchedstatFiles()
        self._tasks = tasks

    def sample(self, pids, exits: dict[int, float] | None = None) -> ProcessSample:
        """Deltas since the previous call for ``pids`` (a first call takes baselines); ``exits``
        {pid: final on-CPU ns} of processes that ended since the previous call."""
        rows, exact_ns, thread_stats = [], {}, {}
        read = set()
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
            except psutil.NoSuchProcess:  # exited (psutil.ZombieProcess is one too)
                continue
            except psutil.AccessDenied:  # keeps its baseline: a later reading still gives a delta
                self._procs.pop(pid, None)
                continue
            read.add(pid)
            u0, s0 = self._prev.get(pid, (0.0, 0.0))
            self._prev[pid] = (t.user, t.system)
            du, ds = max(0.0, t.user - u0), max(0.0, t.system - s0)
            if du or ds:
                rows.append((pid, du, ds))
            exact_ns[pid] = (du + ds) * 1e9
        threads = self._read_threads(read)
        if threads is not None:
            thread_stats = threads.stats
        else:
            for pid in read:
                stats = self._schedstat.read(pid)
                if stats:
                    thread_stats[pid] = stats
        self._account_exits(exits or {}, read, {p for p in pids if p in self._prev} - read, exact_ns)
        return ProcessSample(rows, exact_ns, thread_stats, threads)

    def _read_threads(self, pids: set[int]) -> TaskReading | None:
        """The threads of ``pids`` from the task iterator; None without it, or once a read failed
        (then /proc from here on)."""
        if self._tasks is None:
            return None
        try:
            return self._tasks.read(pids)
        except OSError:
            self._tasks = None
            return None

    def baseline(self, pids) -> None:
        """Take the CPU readings of ``pids`` as baselines (processes that joined the workload:
        their CPU before joining is not the workload's)."""
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            self._prev[pid] = (t.user, t.system)

    def _account_exits(self, exits: dict[int, float], read: set[int], missing: set[int], exact_ns: dict) -> None:
        """Charge each process that ended (in ``exits``, not read now) its final total less its
        last reading; forget a ``missing`` process (read before, not found now) at its second miss
        with no exit recorded (its exit may be recorded a drain late: it ended after the hook's
        map was read)."""
        for pid, total_ns in exits.items():
            if pid in read:
                continue  # a zombie /proc still showed: its reading holds the whole total
            u0, s0 = self._prev.get(pid, (0.0, 0.0))
            exact_ns[pid] = exact_ns.get(pid, 0.0) + max(0.0, total_ns - (u0 + s0) * 1e9)
            self.forget(pid)
            missing.discard(pid)
        for pid in missing & self._gone:
            self.forget(pid)
        self._gone = missing - self._gone

    def forget(self, pid: int) -> None:
        """Drop ``pid``'s baselines (it has exited: a later process under the same pid starts
        from nothing, and a host where jobs come and go does not keep every pid it had)."""
        self._procs.pop(pid, None)
        self._prev.pop(pid, None)
        self._schedstat.forget(pid)

    def retain(self, pids) -> None:
        """Forget every process not in ``pids`` (the workload now)."""
        for pid in [p for p in self._prev.keys() | self._procs.keys() if p not in pids]:
            self.forget(pid)

    def close(self) -> None:
        """Close the threads' schedstat files kept open (schedstat.py)."""
        self._schedstat.close()
