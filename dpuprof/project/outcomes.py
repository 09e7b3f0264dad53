"""What the evaluated rows mean for the job: cores available for AI and the speedup range.

Inputs are the demand frame (features.demand) and the evaluated rows (model.evaluate); outputs are
JSON-ready dicts. All ``_s`` values are CPU seconds over the recording.
"""

from __future__ import annotations

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

    - expected: the job's own processes are its critical path (CPU-bound ranks), and only the CPU
      the offloads free from those processes shortens it: T_wl / (T_wl - F_wl).
    - high: in addition, all infrastructure work other processes did (softirq, kworkers) sat on the
      critical path and every freed second comes off it: (T_wl + X) / (T_wl + X - F), never below
      expected.
    - low: freed cycles only help other work; the job itself gains nothing (1.0).
    ``None`` means unbounded (the job's CPU time would vanish entirely).
    """
    t_wl = float(dem["workload_s"].sum()) if not dem.empty else 0.0
    infra = dem[dem["category"].isin(INFRASTRUCTURE)] if not dem.empty else dem
    x_other = float((infra["host_s"] - infra["workload_s"]).clip(lower=0).sum()) if not dem.empty else 0.0
    f_all = float(rows["freed_s"].sum()) if not rows.empty else 0.0
    f_wl = float(rows["workload_freed_s"].sum()) if not rows.empty else 0.0
    f_wl = min(f_wl, f_all)

    def ratio(t, f):
        if t <= 0:
            return 1.0
        rest = t - f
        return None if rest <= 1e-12 * t else t / rest

    expected = ratio(t_wl, f_wl)
    high = ratio(t_wl + x_other, f_all)
    if expected is None or high is None:
        high = None
    else:
        high = max(high, expected)
    low = 1.0 if expected is None else min(1.0, expected)
    assumptions = [
        "low: the freed CPU only helps other work; the job's own time is unchanged",
        "expected: the job's processes are CPU-bound and their own CPU time is the critical path; only the "
        "CPU the offloads free from those processes shortens it",
        "high: all infrastructure work on the host (including softirq and kernel threads outside the job) "
        "sat on the critical path, and every freed second comes off it",
        "offloads that would cost more than they free are left off (see 'rejected')",
    ]
    if t_wl <= 0:
        assumptions.append("the recording has no CPU samples of the workload processes: expected is 1.0")
    return {
        "low": round(low, 6),
        "expected": None if expected is None else round(expected, 6),
        "high": None if high is None else round(high, 6),
        "pays": bool(f_all > 0),
        "workload_cpu_s": round(t_wl, 6),
        "workload_freed_s": round(f_wl, 6),
        "other_infrastructure_s": round(x_other, 6),
        "freed_s": round(f_all, 6),
        "assumptions": assumptions,
    }
