"""What the evaluated rows mean for the job: cores available for AI and the speedup range.

Inputs are the demand frame (features.demand) and the evaluated rows (offload_rows.evaluate); outputs are
JSON-ready dicts. All ``_s`` values are CPU seconds over the recording.
"""

from __future__ import annotations

import math

import pandas as pd

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE


def by_category(dem: pd.DataFrame, rows: pd.DataFrame) -> dict:
    """{category: {before_s, after_s, freed_s}} for the six categories (host-wide)."""
    before = dem.groupby("category")["host_s"].sum() if not dem.empty else pd.Series(dtype=float)
    freed = rows.groupby("category")["freed_s"].sum() if not rows.empty else pd.Series(dtype=float)
    out = {}
    for c in CATEGORIES:
        b = float(before.get(c, 0.0))
        f = float(freed.get(c, 0.0))
        out[c] = {"before_s": round(b, 6), "after_s": round(b - f, 6), "freed_s": round(f, 6)}
    return out


def totals(dem: pd.DataFrame, rows: pd.DataFrame) -> dict:
    """Host-wide busy CPU before/after, freed, and the infrastructure part."""
    before = float(dem["host_s"].sum()) if not dem.empty else 0.0
    infra = float(dem.loc[dem["category"].isin(INFRASTRUCTURE), "host_s"].sum()) if not dem.empty else 0.0
    freed = float(rows["freed_s"].sum()) if not rows.empty else 0.0
    wl = float(dem["workload_s"].sum()) if not dem.empty else 0.0
    wl_freed = float(rows["workload_freed_s"].sum()) if not rows.empty else 0.0
    return {"before_s": round(before, 6), "after_s": round(before - freed, 6), "freed_s": round(freed, 6),
            "infrastructure_before_s": round(infra, 6), "infrastructure_after_s": round(infra - freed, 6),
            "workload_before_s": round(wl, 6), "workload_after_s": round(wl - wl_freed, 6),
            "workload_freed_s": round(wl_freed, 6)}


def cores_for_ai(dem: pd.DataFrame, rows: pd.DataFrame, cpu_count: int, duration_s: float) -> dict:
    """Share of host CPU capacity (cpu_count x duration) not spent on infrastructure, before/after."""
    cap = float(cpu_count) * float(duration_s)
    t = totals(dem, rows)
    infra_before, infra_after = t["infrastructure_before_s"], t["infrastructure_after_s"]
    before = 100.0 * (1.0 - infra_before / cap) if cap > 0 else 0.0
    after = 100.0 * (1.0 - infra_after / cap) if cap > 0 else 0.0
    return {
        "before_pct": round(before, 4), "after_pct": round(after, 4),
        "before_cores": round(cpu_count * before / 100.0, 4), "after_cores": round(cpu_count * after / 100.0, 4),
        "assumptions": [
            "cores for AI = 100 % minus network, storage, crypto and compression CPU, of cpu_count x duration "
            "(idle counts as available, as in the vendor tables)",
            "after = before plus the CPU the enabled offloads free host-wide (all processes)",
        ],
    }


def speedup_range(dem: pd.DataFrame, rows: pd.DataFrame) -> dict:
    """low / expected / high speedup of the recorded job.

    T = the job's own CPU seconds (its processes, all categories), F_wl = CPU the enabled offloads
    free from the job's processes, F_other = CPU they free from other processes (softirq, kernel
    threads and other tenants).

    - expected: the job's processes are CPU-bound and their own CPU time is the critical path; only
      what the offloads free from them shortens it: T / (T - F_wl).
    - high: all offloaded time sat on the critical path, including the freed work other processes
      did (which then also lengthened the path): (T + F_other) / (T - F_wl) >= expected.
    - low: freed cycles only help other work; the job itself gains nothing (1.0).
    ``None`` means unbounded (the job's CPU time would vanish entirely).
    """
    t_wl = float(dem["workload_s"].sum()) if not dem.empty else 0.0
    infra = dem[dem["category"].isin(INFRASTRUCTURE)] if not dem.empty else dem
    x_other = float((infra["host_s"] - infra["workload_s"]).clip(lower=0).sum()) if not dem.empty else 0.0
    f_all = float(rows["freed_s"].sum()) if not rows.empty else 0.0
    f_wl = min(float(rows["workload_freed_s"].sum()) if not rows.empty else 0.0, f_all)
    f_other = max(0.0, f_all - f_wl)

    assumptions = [
        "low: the freed CPU only helps other work; the job's own time is unchanged",
        "expected: the job's processes (ranks and their DataLoader workers) are CPU-bound on this host, so the "
        "CPU the offloads free from those processes shortens the job: T / (T - F_job)",
        "high: every freed second sat on the job's critical path, including infrastructure work other "
        "processes did for it (softirq, kernel threads): (T + F_other) / (T - F_job)",
        "offloads that would cost more than they free are left off (see 'rejected')",
    ]
    if t_wl <= 0:
        expected = high = 1.0
        assumptions.append("the recording has no CPU samples of the workload processes: expected and high are 1.0")
    else:
        rest = t_wl - f_wl
        if rest <= 1e-12 * t_wl:
            expected = high = None
        else:
            expected = t_wl / rest
            high = (t_wl + f_other) / rest
            # A denormal workload time overflows the ratio: unbounded, as above (found by hypothesis:
            # t_wl = 1.1e-308 s against 0.5 s of other processes' freed work).
            expected, high = (x if math.isfinite(x) else None for x in (expected, high))
    low = 1.0
    return {
        "low": low,
        "expected": None if expected is None else round(expected, 6),
        "high": None if high is None else round(high, 6),
        "pays": bool(f_all > 0),
        "workload_cpu_s": round(t_wl, 6),
        "workload_freed_s": round(f_wl, 6),
        "other_freed_s": round(f_other, 6),
        "other_infrastructure_s": round(x_other, 6),
        "freed_s": round(f_all, 6),
        "assumptions": assumptions,
    }
