"""Exact-CPU accounting: how one interval's samples and the kernel's own times become ``cpu_category``.

The policy, in one place (pure: no I/O, no BPF; the recorder reads the inputs and writes the rows).

Inputs, for one interval (tables as mappings; pandas is not imported in the recorder, which keeps
its start-up and RSS down, so "columns" are the keys and values below):

``samples`` {(pid, subcategory): count}
    cpu-clock samples (probes/cpu_sample.bpf.c) classified by stack, at ``period_ns`` apart on
    each CPU. pid 0 is the idle task of every CPU (subcategory ``idle`` when it idled, another one
    for interrupt work that ran on it).
``exact_ns`` {pid: ns}
    each *workload process's* CPU time in the interval, from the scheduler's own total
    (sum_exec_runtime of all its threads, dead ones included): /proc/PID/stat utime + stime (in
    clock ticks, 10 ms, but never drifting: each reading is the exact running total, rounded) for a
    live process, and for one whose last thread exited, its final total from proc_tree's exit hook
    less its last /proc reading (telemetry.ProcessTelemetry). No program runs on sched_switch for it.
``host`` HostTimes
    the host's idle, iowait and steal ns over all CPUs in the interval (/proc/stat: idle and iowait
    are measured, not ticked, on NO_HZ kernels) and its busy ns: CPUs x the interval's length less
    those three. None where /proc/stat was not read.

Policy:

1. **Exact time per workload process.** A process with exact time gets it, split over its
   subcategories in proportion to its sample counts.
2. **The rest of the host's busy time is shared by samples.** Busy ns less the workload's exact
   ns (clamped at 0) is split over every other sampled (pid, subcategory) in proportion to its
   samples: the host's other processes, and interrupt work sampled on the idle task. Their share
   is sampled, their total is the kernel's.
3. **Idle and steal are the kernel's.** ``idle`` (pid 0) is the host's idle + iowait ns; steal
   (the hypervisor ran someone else) is ``idle.steal`` (category ``idle``: no work of this host).
   So busy categories plus idle cover CPUs x interval.
4. A workload process with exact time and no sample (shorter than a period) is recorded under
   ``UNSAMPLED`` (``kernel_other.unsampled``).
5. Without host times each sample without exact time counts ``period_ns``, and idle is its samples.

Output: ``cpu_category`` rows (pid, category, subcategory, samples, cpu_s): category is the
subcategory's top level, samples the count behind it (0 for an unsampled or steal row), cpu_s
seconds.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, NamedTuple

from dpuprof.categories import IDLE, top_level

UNSAMPLED = "kernel_other.unsampled"
STEAL = "idle.steal"


class CpuRow(NamedTuple):
    """One ``cpu_category`` row: seconds of CPU for (pid, subcategory) in one interval."""
    pid: int
    category: str
    subcategory: str
    samples: int
    cpu_s: float


class HostTimes(NamedTuple):
    """The host's CPU time over all CPUs in one interval, ns: ``busy`` (CPUs x length less the
    other three), ``idle`` (idle + iowait), ``steal``."""
    busy: float
    idle: float
    steal: float


def split_by_samples(samples: Mapping[tuple[int, str], int], exact_ns: Mapping[int, float],
                     rest_ns: float | None, period_ns: float) -> dict[tuple[int, str], float]:
    """CPU ns per (pid, subcategory) of the busy samples (policy steps 1, 2, 4, 5): each workload
    process's ``exact_ns[pid]`` split in proportion to its ``samples[(pid, sub)]``; ``rest_ns``
    split over every other sample (``period_ns`` each when None); a process with exact time and
    no samples under UNSAMPLED. Idle samples are left out (``cpu_category_rows`` adds idle)."""
    per_pid: Counter = Counter()
    others = 0
    for (pid, sub), n in samples.items():
        if sub == IDLE:
            continue
        per_pid[pid] += n
        if pid not in exact_ns:
            others += n
    rate = period_ns if rest_ns is None else (rest_ns / others if others else 0.0)
    out = {}
    for (pid, sub), n in samples.items():
        if sub == IDLE:
            continue
        exact = exact_ns.get(pid)
        out[(pid, sub)] = n * rate if exact is None else exact * n / per_pid[pid]
    for pid, exact in exact_ns.items():
        if pid not in per_pid and exact > 0:
            out[(pid, UNSAMPLED)] = exact
    return out


def cpu_category_rows(samples: Mapping[tuple[int, str], int], exact_ns: Mapping[int, float],
                      host: HostTimes | None, period_ns: float) -> list[CpuRow]:
    """The whole policy: one interval's ``cpu_category`` rows, sorted by (pid, subcategory)."""
    rest = None if host is None else max(0.0, host.busy - sum(exact_ns.values()))
    ns = split_by_samples(samples, exact_ns, rest, period_ns)
    idle_samples = sum(n for (pid, sub), n in samples.items() if sub == IDLE)
    idle_ns = idle_samples * period_ns if host is None else host.idle
    if idle_ns > 0 or idle_samples:
        ns[(0, IDLE)] = idle_ns
    if host is not None and host.steal > 0:
        ns[(0, STEAL)] = host.steal
    counts = Counter()
    for (pid, sub), n in samples.items():
        counts[(0, IDLE) if sub == IDLE else (pid, sub)] += n
    return [CpuRow(pid, top_level(sub), sub, counts.get((pid, sub), 0), v / 1e9)
            for (pid, sub), v in sorted(ns.items())]


__all__ = ["UNSAMPLED", "STEAL", "CpuRow", "HostTimes", "split_by_samples", "cpu_category_rows"]
