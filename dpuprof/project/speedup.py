"""The job-level speedup of a projection: the critical-path model where the recording allows it,
the CPU-contention proxy otherwise, and always both side by side.

``job_speedup(inp, dem, rows, requested)`` returns the ``speedup`` object of the projection
(docs/projection-contract.md): ``low``, ``expected``, ``high`` (dimensionless), ``regime`` and
its evidence, the steady ``window``, and ``contention_proxy``, the older T / (T - F_job) estimate
that only models CPU contention (kept so that users and the validation benchmark can compare).
"""

from __future__ import annotations

import pandas as pd

from dpuprof.project import critical_path, outcomes, paths
from dpuprof.projection import window
from dpuprof.project.inputs import ProjectionInput

ASSUMPTIONS = [
    "expected: the critical path of the ranks' main threads over the steady window; the binding bound "
    "(rank path, DataLoader loader, host CPU capacity, GPU) is the regime",
    "the rank path loses the freed CPU that ran on the rank thread itself; its run-queue delay shrinks as a "
    "queue's wait does when the host's utilisation drops (rho / (1 - rho)), and on a saturated host to the "
    "gap the capacity bound leaves; its waits on peers shrink with the network work freed and with the "
    "peers' own path",
    "a loader bounds the step only if it is busy when the rank waits on it; a worker with slack gains nothing",
    "low: the freed CPU two sampling standard deviations smaller, and only the freed work itself gets shorter; "
    "high: two standard deviations larger, every freed competitor CPU-second returns a second of "
    "run-queue delay, and the capacity bound drops by all of it",
    "[low, high] bounds the model under these assumptions; it is not a statistical confidence interval",
]


def job_speedup(inp: ProjectionInput, dem: pd.DataFrame, rows: pd.DataFrame,
                requested: tuple[float, float] | str = "steady") -> dict:
    """The projection's ``speedup`` object for the evaluated ``rows`` (offload_rows.evaluate)."""
    proxy = outcomes.speedup_range(dem, rows)
    win = window.choose(inp.table("intervals"), inp.table("cpu_category"), inp.workload_pids,
                        inp.table("markers"), requested)
    frames = {name: inp.table(name) for name in ("thread_time", "threads", "thread_wait", "thread_category",
                                                 "cpu_category", "processes", "gpu", "intervals")}
    job = paths.build(frames, inp.workload_pids, inp.cpu_count, win, rows) if inp.waits_measured else None
    base = {"pays": proxy["pays"], "workload_cpu_s": proxy["workload_cpu_s"],
            "workload_freed_s": proxy["workload_freed_s"], "other_freed_s": proxy["other_freed_s"],
            "other_infrastructure_s": proxy["other_infrastructure_s"], "freed_s": proxy["freed_s"],
            "contention_proxy": proxy["expected"], "window": win.as_dict()}
    if job is None or not job.ranks:
        why = _no_critical_path(frames, win, job)
        return {**base, "low": 1.0, "expected": proxy["expected"], "high": proxy["high"], "regime": "unknown",
                "regime_why": why + ": expected is the CPU-contention proxy T / (T - F_job), and high adds the "
                "freed CPU of other processes; neither is a bound",
                "bounds": None, "evidence": None, "assumptions": proxy["assumptions"]}
    cp = critical_path.speedup(job)
    return {**base, **cp, "assumptions": ASSUMPTIONS}


def _no_critical_path(frames: dict, win: window.Window, job) -> str:
    """Why ``paths.build`` gave no critical path (``job`` None or without ranks), in words."""
    if job is not None:
        return "no rank thread was busy in the window"
    if not frames["thread_time"].empty and paths.wait_coverage(frames["intervals"], set(win.intervals)) <= 0:
        return ("no wait was measured in the window: record --wait-duty attached the wake-up program in "
                "none of its seconds (a window shorter than the duty period; --wait-duty always measures "
                "waits throughout)")
    return ("the recording has no per-thread waits (schema v1, or recorded without the sched_wait probe: "
            "dpuprof record --light, or a --probes list without sched_wait)")
