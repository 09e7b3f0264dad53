"""Host and process telemetry from psutil/procfs, sampled once per interval.

Every method returns rows for the Recording tables named in its docstring, as deltas since the
previous call (seconds of CPU, bytes, counts).
"""

from __future__ import annotations

import os

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


class ProcessTelemetry:
    """Per-process CPU of the workload tree.

    ``sample(pids)`` returns proc_cpu rows (pid, user_s, system_s) from psutil, and sets
    ``last_deltas`` {pid: seconds}: the process's exact CPU time in the interval, the sum over its
    threads of /proc/PID/task/TID/schedstat (the scheduler's sum_exec_runtime, in ns -- what
    getrusage and top report, without /proc/PID/stat's 10 ms ticks and their lagging utime/stime
    split). A thread that ended within the interval loses only its last partial interval.
    ``thread_stats`` {pid: {tid: (on_cpu_ns, runq_ns)}}: the cumulative schedstat readings behind
    it (fields 1 and 2: sum_exec_runtime and run_delay), for per-thread accounting (threads.py).
    """

    def __init__(self):
        self._procs: dict[int, psutil.Process] = {}
        self._prev: dict[int, tuple[float, float]] = {}
        self._thread_ns: dict[int, dict[int, int]] = {}
        self.last_deltas: dict[int, float] = {}
        self.thread_stats: dict[int, dict[int, tuple[int, int]]] = {}

    def sample(self, pids) -> list[tuple]:
        rows = []
        self.last_deltas = {}
        self.thread_stats = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._procs.pop(pid, None)
                self._thread_ns.pop(pid, None)
                continue
            u0, s0 = self._prev.get(pid, (0.0, 0.0))
            self._prev[pid] = (t.user, t.system)
            du, ds = max(0.0, t.user - u0), max(0.0, t.system - s0)
            if du or ds:
                rows.append((pid, du, ds))
            exact = self._schedstat_delta_ns(pid)
            self.last_deltas[pid] = (du + ds) if exact is None else exact / 1e9
        return rows

    def _schedstat_delta_ns(self, pid: int) -> int | None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        now: dict[int, int] = {}
        stats = self.thread_stats[pid] = {}
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

