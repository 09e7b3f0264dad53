"""The suite's statistics: medians over rounds, per-round ratios against the bare run, category
shares and their largest difference, and the recorder's RSS trend. Pure functions of numbers; the
confidence statement for a median is the range of per-round values (a sign-test interval, judged in
verdicts.py)."""

from __future__ import annotations

import statistics

from dpuprof.categories import CATEGORIES


def median(xs):
    """Median of the values that are not None; None when none are left."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cost_pct(cost: list, bare: list) -> float | None:
    """Median over rounds of the extra CPU per unit of work against the same round's bare run, %."""
    ratios = [c / b for c, b in zip(cost, bare) if c and b]
    return 100 * (median(ratios) - 1) if ratios else None


def ratio_summary(values: list[float], bare: list[float]) -> dict:
    """Per-round ratios of ``values`` to the same round's ``bare`` value: their median, smallest and
    largest, and the slowdown 1 - median in %."""
    ratios = [v / b for v, b in zip(values, bare)]
    return {"ratio_median": median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "slowdown_pct": 100 * (1 - median(ratios))}


def shares(seconds: dict[str, float]) -> dict[str, float]:
    """Each category's share of the total (0 where the total is 0), over dpuprof's CATEGORIES."""
    total = sum(seconds.values())
    return {c: seconds[c] / total if total else 0.0 for c in CATEGORIES}


def worst_difference(a: dict[str, float], b: dict[str, float]) -> tuple[float, str]:
    """The largest |a - b| over the categories, in percentage points, and its category."""
    diffs = {c: 100 * (a[c] - b[c]) for c in CATEGORIES}
    worst = max(CATEGORIES, key=lambda c: abs(diffs[c]))
    return abs(diffs[worst]), worst


def rss_trend(samples: list[tuple]) -> dict:
    """From a recorder's /proc samples (seconds since launch, RSS MB, VmHWM MB, CPU s, has a child,
    ...): the peak VmHWM, the highest RSS while its command ran, the RSS growth over the second half
    (least-squares slope, MB/min), that growth extrapolated to a 10-minute run (MB), and the
    recorder's CPU over the second half (% of one core, None when too short)."""
    s = samples
    peak_hwm = max(x[2] for x in s)
    steady = [x for x in s if x[4]] or s  # while the command ran (after the probes compiled)
    rss_max = max(x[1] for x in steady)
    # Growth over the second half of the command's run, extrapolated linearly to 10 minutes.
    half = [x for x in steady if x[0] >= (steady[0][0] + steady[-1][0]) / 2]
    slope = 0.0
    if len(half) >= 4 and half[-1][0] - half[0][0] > 1:
        n = len(half)
        mt, mr = sum(x[0] for x in half) / n, sum(x[1] for x in half) / n
        den = sum((x[0] - mt) ** 2 for x in half)
        slope = sum((x[0] - mt) * (x[1] - mr) for x in half) / den * 60 if den else 0.0  # MB/min
    elapsed_min = s[-1][0] / 60
    extrap = max(peak_hwm, rss_max, steady[-1][1] + max(0.0, slope) * max(0.0, 10 - elapsed_min))
    cpu_half = None
    if len(half) >= 2 and half[-1][0] - half[0][0] > 1:
        cpu_half = 100 * (half[-1][3] - half[0][3]) / (half[-1][0] - half[0][0])
    return {"rss_peak_hwm_mb": peak_hwm, "rss_steady_max_mb": rss_max, "rss_slope_mb_per_min": slope,
            "rss_10min_estimate_mb": extrap, "recorder_cpu_pct_second_half": cpu_half}


def cpu_estimate(res: dict, wl: str) -> dict | None:
    """What dpuprof costs in CPU on ``wl``, from BPF run-time statistics and the recorder's /proc CPU."""
    if wl == "ddp":
        lg = res.get("long") or {}
        if lg.get("workload") != "ddp" or not lg.get("bpf") or lg.get("recorder_cpu_pct") is None:
            return None
        bpf, rec = lg["bpf"], lg["recorder_cpu_pct"]
    else:
        row = ((res["overhead"].get("bpf_cost") or {}).get(wl) or {}).get("dpuprof") or {}
        if not row.get("bpf") or row.get("recorder_cpu_pct") is None:
            return None
        bpf, rec = row["bpf"], row["recorder_cpu_pct"]
    cpus = res["machine"]["cpus"] or 1
    return {"bpf_core_pct": bpf["core_pct"], "runs_per_s": bpf["runs_per_s"], "ns_per_run": bpf["ns_per_run"],
            "recorder_core_pct": rec, "machine_pct": (bpf["core_pct"] + rec) / cpus}

