"""Exact-CPU accounting: how one interval's samples and scheduler times become ``cpu_category``.

The policy, in one place (pure: no I/O, no BPF; the recorder reads the inputs and writes the rows).

Inputs, for one interval (tables as mappings; pandas is not imported in the recorder, which keeps
its start-up and RSS down, so "columns" are the keys and values below):

``samples`` {(pid, subcategory): count}
    cpu-clock samples (probes/cpu_sample.bpf.c) classified by stack, at ``period_ns`` apart on
    each CPU. pid 0 is the idle task of every CPU (subcategory ``idle``).
``switch_ns`` {pid: ns}
    on-CPU time per process from sched_switch: the probe credits the time since the previous
    switch (or sample) on that CPU to the task leaving it, with ``bpf_ktime_get_ns``. Covers every
    process, idle (pid 0) included, so over all pids it adds up to CPUs x interval.
``schedstat_ns`` {pid: ns}
    for each *live workload process*: the sum over its threads of the /proc/PID/task/TID/schedstat
    ``sum_exec_runtime`` delta (what getrusage and top report; telemetry.ProcessTelemetry). A
    process whose threads could not be listed gives its psutil user+system delta instead.

Policy:

1. **Exact time per process.** A live workload process is charged its schedstat time; a workload
   process that exited within the interval (no schedstat) and every other process, its
   sched_switch time.
2. **The wake-up surplus comes out of idle.** The scheduler charges a woken task for part of its
   wake-up path, which ran in the context of whatever was current -- usually the idle task. So
   the workload's total surplus over its sched_switch time, when positive, is subtracted from
   pid 0 (never below zero), and the host still adds up.
3. **A deficit is recorded as ``idle.steal``.** When the workload's schedstat time is below its
   sched_switch time, the difference ran on no one's account: sum_exec_runtime follows
   ``rq_clock_task``, which under CONFIG_PARAVIRT_TIME_ACCOUNTING leaves out the time the
   hypervisor gave the vCPU to someone else (steal), while ``bpf_ktime_get_ns`` counts it. It is
   written as pid 0, subcategory ``STEAL`` (category ``idle``: no work of this host), so busy
   categories plus idle still cover CPUs x interval. (fixtures/storage-heavy, recorded before
   this rule, falls 3.65 CPU-s short of 65.04 with 4.49 s of /proc/stat steal.)
4. **Samples give the mix, the scheduler the total.** Each process's exact time is split over its
   subcategories in proportion to its sample counts.
5. A process that was sampled but has no exact time counts ``period_ns`` per sample.
6. A process that ran but was never sampled (shorter than a period) is recorded under
   ``UNSAMPLED`` (``kernel_other.unsampled``); pid 0 under ``idle``.

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


def exact_times(switch_ns: Mapping[int, float], schedstat_ns: Mapping[int, float]) -> dict[int, float]:
    """Exact on-CPU ns per process (policy steps 1 to 3).

    ``switch_ns`` {pid: ns} for every process that ran, pid 0 = idle; ``schedstat_ns`` {pid: ns}
    for the live workload processes. Returns {pid: ns}: schedstat where given, sched_switch time
    otherwise, idle less the workload's net surplus (clamped at 0).

    The net deficit, when schedstat is below sched_switch time, is not in these times: see
    ``deficit_ns`` (written as ``STEAL`` by ``cpu_category_rows``).
    """
    exact = {pid: float(ns) for pid, ns in switch_ns.items()}
    surplus = 0.0
    for pid, ns in schedstat_ns.items():
        exact[pid] = float(ns)
        surplus += ns - switch_ns.get(pid, 0)
    if surplus > 0 and exact.get(0):
        exact[0] = max(0.0, exact[0] - surplus)
    return exact


def deficit_ns(switch_ns: Mapping[int, float], schedstat_ns: Mapping[int, float]) -> float:
    """The workload's net schedstat deficit this interval, in ns (0 when it has a surplus): the
    time sched_switch saw workload processes current that their schedstat does not charge them
    and ``exact_times`` charges nobody. On a VM this is the steal time spent while they were
    current (policy step 3)."""
    net = sum(ns - switch_ns.get(pid, 0) for pid, ns in schedstat_ns.items())
    return max(0.0, -net)


def split_by_samples(samples: Mapping[tuple[int, str], int], exact_ns: Mapping[int, float],
                     period_ns: float) -> dict[tuple[int, str], float]:
    """CPU ns per (pid, subcategory), policy steps 4 to 6: each process's ``exact_ns[pid]`` split
    in proportion to its ``samples[(pid, sub)]``; ``period_ns`` per sample without exact time; a
    process with exact time and no samples under UNSAMPLED (pid 0: ``idle``)."""
    per_pid: Counter = Counter()
    for (pid, _sub), n in samples.items():
        per_pid[pid] += n
    out = {}
    for (pid, sub), n in samples.items():
        exact = exact_ns.get(pid)
        out[(pid, sub)] = n * period_ns if exact is None else exact * n / per_pid[pid]
    for pid, exact in exact_ns.items():
        if pid not in per_pid and exact > 0:
            out[(pid, IDLE if pid == 0 else UNSAMPLED)] = exact
    return out


def cpu_category_rows(samples: Mapping[tuple[int, str], int], switch_ns: Mapping[int, float],
                      schedstat_ns: Mapping[int, float], period_ns: float) -> list[CpuRow]:
    """The whole policy: one interval's ``cpu_category`` rows, sorted by (pid, subcategory)."""
    ns = split_by_samples(samples, exact_times(switch_ns, schedstat_ns), period_ns)
    steal = deficit_ns(switch_ns, schedstat_ns)
    if steal > 0:
        ns[(0, STEAL)] = steal
    return [CpuRow(pid, top_level(sub), sub, samples.get((pid, sub), 0), v / 1e9)
            for (pid, sub), v in sorted(ns.items())]


__all__ = ["UNSAMPLED", "STEAL", "CpuRow", "exact_times", "deficit_ns", "split_by_samples", "cpu_category_rows"]
