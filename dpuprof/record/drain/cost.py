"""What the recorder itself costs, per interval: its BPF programs' run time and its own CPU.

``ProbeCost`` turns on the kernel's BPF run-time statistics (the ``BPF_ENABLE_STATS`` command of
bpf(2), Linux >= 5.8: the statistics stay on while the returned fd is held, so a recorder killed
with ``kill -9`` leaves nothing switched on) and drains each loaded program's ``run_cnt`` /
``run_time_ns`` (``struct bpf_prog_info``, dpuprof/record/drain/progstats.py) as ``probe_cost``
rows (program, runs, run_ns) of the interval. The statistics are not free: every run of every BPF
program on the host then reads the clock twice, which added 113 ns a run here (median of 5
interleaved rounds, 20-140; 96 in an earlier run: ``sudo python3 benchmarks/sock_call_cost.py
--rounds 5 --stats``, 2026-12-06, 2-vCPU VM), as much as a short program itself costs, and in no
statistic. So they are on for one interval in ``every`` (``window``): intervals
0, every, 2 x every, ... hold the rows, and readers scale them by the time (meta
``probe_cost_every``). When the sysctl ``kernel.bpf_stats_enabled`` is already 1 (someone else
turned them on for the whole host), every interval counts, at no extra cost, whether or not the
command succeeded; when neither works, no rows are written and ``status`` says why (meta
``probe_cost``).

``RecorderCpu`` gives ``recorder_cpu`` rows (user_s, system_s): the recorder process's own CPU over
the interval (``os.times``: every thread of this process, children excluded). Its BPF programs run
in the context of whatever task hit the event, so their time is in ``probe_cost``, not here.
"""

from __future__ import annotations

import ctypes as ct
import os

from dpuprof.record.drain.progstats import READ, run_stats

NR_BPF_X86_64 = 321  # __NR_bpf on x86-64 (arch/x86/entry/syscalls/syscall_64.tbl)
BPF_ENABLE_STATS = 32  # enum bpf_cmd, include/uapi/linux/bpf.h
BPF_STATS_RUN_TIME = 0  # enum bpf_stats_type
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
MEASURED = "measured"
#: The statistics are on for one interval in this many (module docstring).
STATS_EVERY = 10


def enable_stats(syscall=None) -> tuple[int | None, str | None]:
    """(fd holding BPF run-time statistics on, None) or (None, why not). ``syscall`` replaces
    libc's ``syscall(2)`` (tests)."""
    if os.uname().machine != "x86_64":
        return None, f"BPF_ENABLE_STATS not wired for {os.uname().machine} (x86-64 only)"
    if syscall is None:
        libc = ct.CDLL(None, use_errno=True)
        syscall = libc.syscall
    # union bpf_attr's enable_stats is one __u32 (type); the rest of the buffer must be zero.
    attr = (ct.c_uint32 * 4)(BPF_STATS_RUN_TIME)
    fd = syscall(NR_BPF_X86_64, BPF_ENABLE_STATS, ct.byref(attr), ct.sizeof(attr))
    if fd < 0:
        err = ct.get_errno()
        return None, f"BPF_ENABLE_STATS failed ({os.strerror(err) if err else 'error'})"
    return fd, None


def sysctl_on(path: str = STATS_SYSCTL) -> bool:
    """Whether ``kernel.bpf_stats_enabled`` is 1 (statistics on for everyone)."""
    try:
        with open(path) as fh:
            return fh.read().strip() == "1"
    except OSError:
        return False


class ProbeCost:
    """Drains the loaded programs' runs and run time. ``status`` is ``"measured"`` or
    ``"unavailable: <reason>"``; ``drain()`` returns [(program, runs, run_ns)] deltas since the
    previous call, sorted, programs with no run left out (always [] when unavailable); the
    statistics count only while a window is open: ``window(interval)``, called before each
    interval, opens one for intervals 0, ``every``, 2 x ``every``, ... and closes it otherwise."""

    def __init__(self, bpf, stats=run_stats, enable=enable_stats, sysctl=sysctl_on, every: int = STATS_EVERY):
        self.bpf = bpf
        self.stats = stats
        self.enable = enable
        self.every = every
        self.prev: dict[str, tuple[int, int]] = {}
        self.fd, why = enable()
        if sysctl():  # on already, for the whole host: every interval counts, at no extra cost
            why, self.every = None, 1
        if why is None and stats(bpf) is None:
            why = "bpf_prog_info has no run_time_ns/run_cnt (kernel older than 5.1)"
        self.status = MEASURED if why is None else f"unavailable: {why}"
        self.counting = True  # whether the interval now running is a window's

    def window(self, interval: int) -> None:
        """Statistics on for ``interval`` (the one about to start) when it is a window's, else off."""
        self.counting = interval % self.every == 0
        if self.status != MEASURED or self.every == 1:
            return
        if self.counting:
            if self.fd is None:
                self.fd, _why = self.enable()
        else:
            self.close()

    def drain(self, infos=READ) -> list[tuple]:
        """The rows since the last call; ``infos``: the programs' progstats.prog_infos, when read."""
        if self.status != MEASURED:
            return []
        now = self.stats(self.bpf, infos) or {}
        if not self.counting:  # outside a window: what moved (another's statistics) is not ours
            self.prev = now
            return []
        rows = []
        for prog, (runs, ns) in sorted(now.items()):
            old_runs, old_ns = self.prev.get(prog, (0, 0))
            d_runs, d_ns = max(0, runs - old_runs), max(0, ns - old_ns)  # never negative, even on a reload
            if d_runs or d_ns:
                rows.append((prog, d_runs, d_ns))
        self.prev = now
        return rows

    def close(self) -> None:
        """Turn the statistics off again (our hold on them; idempotent)."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


class RecorderCpu:
    """The recorder's own user and system CPU seconds per interval (children excluded)."""

    def __init__(self, times=os.times):
        self.times = times
        t = times()
        self.prev = (t.user, t.system)

    def sample(self) -> list[tuple]:
        """[(user_s, system_s)] since the previous call (or construction)."""
        t = self.times()
        user, system = max(0.0, t.user - self.prev[0]), max(0.0, t.system - self.prev[1])
        self.prev = (t.user, t.system)
        return [(round(user, 6), round(system, 6))]


__all__ = ["MEASURED", "ProbeCost", "RecorderCpu", "enable_stats", "sysctl_on"]
