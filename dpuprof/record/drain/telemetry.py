"""Host and process telemetry from psutil/procfs, sampled once per interval.

Every method returns rows for the Recording tables named in its docstring, as deltas since the
previous call (seconds of CPU, bytes, counts).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import psutil

HOST_CPU_FIELDS = ("user", "nice", "system", "irq", "softirq", "iowait", "steal", "idle")


class HostTelemetry:
    def __init__(self):
        self._cpu = psutil.cpu_times()
        self._disk = psutil.disk_io_counters()
        self._net = psutil.net_io_counters(pernic=True)

    def sample(self) -> dict[str, list[tuple]]:
        """Rows for host_cpu (field, seconds), host_disk (4 counters) and host_net (dev, ...)."""
        cpu = psutil.cpu_times()
        rows_cpu = [(f, max(0.0, getattr(cpu, f, 0.0) - getattr(self._cpu, f, 0.0)))
                    for f in HOST_CPU_FIELDS if hasattr(cpu, f)]
        self._cpu = cpu
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
    """One ``ProcessTelemetry.sample``: ``proc_cpu`` rows (pid, user_s, system_s) from psutil;
    ``schedstat_ns`` {pid: ns}, each process's exact CPU time in the interval (the input of the same
    name in accounting.py); ``thread_stats`` {pid: {tid: (on_cpu_ns, runq_ns)}}, the cumulative
    schedstat readings behind it, for per-thread accounting (threads.py)."""
    proc_cpu: list
    schedstat_ns: dict
    thread_stats: dict


class ProcessTelemetry:
    """Per-process CPU of the workload tree.

    A process's exact CPU time is the sum over its threads of /proc/PID/task/TID/schedstat (the
    scheduler's sum_exec_runtime, in ns -- what getrusage and top report, without /proc/PID/stat's
    10 ms ticks and their lagging utime/stime split; fields 1 and 2 are sum_exec_runtime and
    run_delay). A thread that ended within the interval loses only its last partial interval.
    """

    def __init__(self):
        self._procs: dict[int, psutil.Process] = {}
        self._prev: dict[int, tuple[float, float]] = {}
        self._thread_ns: dict[int, dict[int, int]] = {}

    def sample(self, pids) -> ProcessSample:
        """Deltas since the previous call for ``pids`` (a first call takes baselines)."""
        rows = []
        exact_ns: dict[int, float] = {}
        thread_stats: dict[int, dict[int, tuple[int, int]]] = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
            except psutil.NoSuchProcess:  # exited (psutil.ZombieProcess is one too)
                self.forget(pid)
                continue
            except psutil.AccessDenied:  # keeps its baseline: a later reading still gives a delta
                self._procs.pop(pid, None)
                self._thread_ns.pop(pid, None)
                continue
            u0, s0 = self._prev.get(pid, (0.0, 0.0))
            self._prev[pid] = (t.user, t.system)
            du, ds = max(0.0, t.user - u0), max(0.0, t.system - s0)
            if du or ds:
                rows.append((pid, du, ds))
            exact = self._schedstat_delta_ns(pid, thread_stats)
            exact_ns[pid] = (du + ds) * 1e9 if exact is None else float(exact)
        return ProcessSample(rows, exact_ns, thread_stats)

    def forget(self, pid: int) -> None:
        """Drop ``pid``'s baselines (it has exited: a later process under the same pid starts
        from nothing, and a host where jobs come and go does not keep every pid it had)."""
        self._procs.pop(pid, None)
        self._prev.pop(pid, None)
        self._thread_ns.pop(pid, None)

    def retain(self, pids) -> None:
        """Forget every process not in ``pids`` (the workload now)."""
        for pid in [p for p in self._prev.keys() | self._procs.keys() if p not in pids]:
            self.forget(pid)

    def _schedstat_delta_ns(self, pid: int, thread_stats: dict) -> int | None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        now: dict[int, int] = {}
        stats = thread_stats[pid] = {}
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    fields = fh.read().split()
                now[int(tid)] = int(fields[0])
                stats[int(tid)] = (int(fields[0]), int(fields[1]))
            except (OSError, ValueError, IndexError):
                continue
        prev = self._thread_ns.get(pid, {})
        self._thread_ns[pid] = now
        return sum(max(0, ns - prev.get(tid, 0)) for tid, ns in now.items())


def process_info(pid: int) -> tuple[int | None, str, str] | None:
    """(ppid, comm, cmdline) of a live process, or None."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return p.ppid(), p.name(), " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def is_process(pid: int) -> bool:
    """True for a thread-group leader (a process), False for a thread id or a vanished pid."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Tgid:"):
                    return int(line.split()[1]) == pid
    except OSError:
        pass
    return False

