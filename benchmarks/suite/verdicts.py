"""The verdicts: each target of RESULTS.md judged from results.json's measurements, with what was
measured, what perf measured, and (for a missed or unresolved target) why, from diagnosis.py.
A --quick run judges no timings."""

from __future__ import annotations

from .diagnosis import why_accuracy, why_overhead, why_pp, why_rss, why_size, why_startup
from .fmt import num, spread, unit_word
from .stats import cpu_estimate

TARGETS = {
    "accuracy_ratio": 0.10,      # category seconds within +-10 % of ground truth
    "accuracy_pp": 5.0,          # shares within 5 percentage points of perf
    "overhead_train": 1.0,       # % slowdown of DDP steps/s
    "overhead_iperf3": 3.0,      # % slowdown of iperf3 loopback throughput
    "size_ratio": 20.0,          # perf.data / recording, same run
    "startup_s": 1.5,            # record -> child's exec
    "rss_mb": 150.0,             # recorder peak RSS over 10 minutes
}
TIMED = ("overhead_train", "overhead_iperf3", "startup_s", "report_time")


def evaluate(res: dict) -> list[dict]:
    """One dict per target (id, name, target, measured, perf, met: True/False/None, why; slowdowns
    also verdict), in RESULTS.md's order, from run.py's results."""
    out = [*accuracy_targets(res["accuracy"]["table"])]
    for key, wl in (("overhead_train", "ddp"), ("overhead_iperf3", "iperf3")):
        out.append(overhead_target(res, key, wl, TARGETS[key]))
    out += [size_target(res["long"]), startup_target(res["startup"]), rss_target(res["long"]),
            report_target(res["report"])]
    if res["mode"] == "quick":
        for t in out:
            if t["id"] in TIMED or t["id"] == "rss_mb":
                t["met"], t["verdict"] = None, "—"  # a smoke run judges no timings
    return out


def accuracy_targets(rows: list[dict]) -> tuple[dict, dict]:
    """1a, category seconds against ground truth; 1b, category shares against perf."""
    bad = [r for r in rows if r["ratio_cat"] is None or abs(r["ratio_cat"] - 1) > TARGETS["accuracy_ratio"]]
    worst = max(rows, key=lambda r: abs((r["ratio_cat"] or 0) - 1))
    missed_list = ", ".join(f"{r['tool']} {r['kind']} {num(r['ratio_cat'], 3)}×" for r in bad)
    ratio = {
        "id": "accuracy_ratio", "name": "category CPU s vs ground truth",
        "target": "every tool within ±10 %",
        "measured": (f"{len(rows) - len(bad)}/{len(rows)} within"
                     + (f" (missed: {missed_list})" if bad else "")
                     + f"; worst {worst['tool']} ({worst['kind']}) {num(worst['ratio_cat'], 3)}×; "
                     f"totals (all categories) {num(min(r['ratio_total'] for r in rows), 3)}–"
                     f"{num(max(r['ratio_total'] for r in rows), 3)}×"),
        "perf": "—", "met": not bad,
        "why": why_accuracy(bad) if bad else None,
    }
    bad_pp = [r for r in rows if r["pp_vs_perf"] > TARGETS["accuracy_pp"]]
    worst = max(rows, key=lambda r: r["pp_vs_perf"])
    pp = {
        "id": "accuracy_pp", "name": "category shares vs perf (same rules, same run)",
        "target": "within 5 pp",
        "measured": (f"{len(rows) - len(bad_pp)}/{len(rows)} within; worst {worst['tool']} ({worst['kind']}) "
                     f"{num(worst['pp_vs_perf'], 1)} pp in {worst['pp_vs_perf_category']}"),
        "perf": "reference", "met": not bad_pp,
        "why": why_pp(bad_pp) if bad_pp else None,
    }
    return ratio, pp


def overhead_target(res: dict, key: str, wl: str, target: float) -> dict:
    """A slowdown target (``wl``: ddp or iperf3), judged by overhead_verdict."""
    ov = res["overhead"]
    d = ov[wl]["conditions"]
    dp, pf = d["dpuprof"], d.get("perf")
    met, verdict = overhead_verdict(res, wl, target)
    return {
        "id": key, "name": f"slowdown of {'DDP steps/s' if wl == 'ddp' else 'iperf3 loopback throughput'}",
        "target": f"≤ {target:g} %",
        "measured": f"{num(dp['slowdown_pct'], 1, ' %')} (per-round range {spread(dp)}; {ov[wl]['rounds']} rounds)"
                    + _cost_note(dp) + _estimate_note(res, wl),
        "perf": f"{num(pf['slowdown_pct'], 1, ' %')} ({spread(pf)})" + _cost_note(pf) if pf else "not run in --quick",
        "met": met, "verdict": verdict,
        "why": why_overhead(res, wl, target) if verdict != "yes" else None,
    }


def size_target(lg: dict) -> dict:
    """Output size per minute, perf.data over the recording of the same run."""
    return {
        "id": "size_ratio", "name": "output size per minute, perf.data / recording (same run)",
        "target": "≥ 20×",
        "measured": f"{num(lg['size_ratio'], 1)}× ({num(lg['rec_mb_per_min'], 3)} MB/min)",
        "perf": f"{num(lg['perf_mb_per_min'], 2)} MB/min",
        "met": lg["size_ratio"] >= TARGETS["size_ratio"],
        "why": None if lg["size_ratio"] >= TARGETS["size_ratio"] else why_size(lg),
    }


def startup_target(st: dict) -> dict:
    """Start-up, launch to the child's exec (median)."""
    return {
        "id": "startup_s", "name": "start-up: `dpuprof record` launched -> child exec",
        "target": "≤ 1.5 s",
        "measured": f"{num(st['dpuprof']['median_s'], 2, ' s')} (max {num(st['dpuprof']['max_s'], 2, ' s')}; bare exec "
                    f"{num(1000 * st['bare']['median_s'], 1, ' ms')})",
        "perf": f"{num(st['perf']['median_s'], 2, ' s')}",
        "met": st["dpuprof"]["median_s"] <= TARGETS["startup_s"],
        "why": None if st["dpuprof"]["median_s"] <= TARGETS["startup_s"] else why_startup(st),
    }


def rss_target(lg: dict) -> dict:
    """The recorder's peak RSS over 10 minutes (extrapolated from a shorter run)."""
    minutes = lg["duration_s"] / 60
    est = lg["rss_10min_estimate_mb"]
    return {
        "id": "rss_mb", "name": f"recorder peak RSS over {'10 min' if minutes >= 10 else '10 min (extrapolated)'}",
        "target": "≤ 150 MB",
        "measured": (f"{num(est, 0, ' MB')} ({'measured' if minutes >= 10 else 'extrapolated'}; peak VmHWM "
                     f"{num(lg['rss_peak_hwm_mb'], 0, ' MB')} over {num(minutes, 1)} min, growth "
                     f"{num(lg['rss_slope_mb_per_min'], 2, ' MB/min')})"),
        "perf": "—", "met": est <= TARGETS["rss_mb"],
        "why": None if est <= TARGETS["rss_mb"] else why_rss(lg),
    }


def report_target(rep: dict) -> dict:
    """`dpuprof report`'s time on the long fixture, against bench_report.py's own target."""
    if "skipped" in rep:
        return {"id": "report_time", "name": "report time on the long fixture", "target": "< 3 s",
                "measured": f"not measured: {rep['skipped']}", "perf": "—", "met": None, "why": None}
    row = next(r for r in rep["results"] if r["command"].startswith("dpuprof report"))
    return {
        "id": "report_time", "name": f"`{row['command']}`", "target": f"< {row['target_s']:g} s",
        "measured": f"{num(row['median_s'], 2, ' s')} (median of {row['runs']}; "
                    f"{num(rep['fixture_bytes'] / 1e6, 1, ' MB')} recording)"
                    + (" — long fixture absent, largest fixture used" if rep.get("note") else ""),
        "perf": "—", "met": bool(row["ok"]),
        "why": None if row["ok"] else "see the report engineer's notes (benchmarks/bench_report.py)",
    }


def overhead_verdict(res: dict, wl: str, target: float) -> tuple[bool | None, str]:
    """Judge a slowdown target. The per-round slowdowns' range is a confidence interval for their
    median (sign test: about 94 % with 5 rounds, 88 % with 4): the target is met when the whole range
    is within it, missed when the whole range is beyond it, and otherwise the throughput does not
    resolve it on this machine; then the CPU cost (BPF run time plus the recorder's CPU, which load
    hardly moves) decides, and the verdict says so."""
    dp = res["overhead"][wl]["conditions"]["dpuprof"]
    lo, hi = 100 * (1 - dp["ratio_max"]), 100 * (1 - dp["ratio_min"])
    est = cpu_estimate(res, wl)
    by_cpu = None if est is None else est["machine_pct"] <= target
    yes_no = lambda ok: "yes" if ok else "**no**"  # noqa: E731
    # The throughput resolves the target only when the rounds agree to within twice its size.
    if hi - lo <= 2 * target and (hi <= target or lo > target):
        ok = hi <= target
        if by_cpu is None or by_cpu == ok:
            return ok, yes_no(ok)
        return ok, f"{yes_no(ok)} by throughput; {yes_no(by_cpu)} by CPU cost"
    if by_cpu is None:
        return None, "unresolved (throughput too noisy)"
    return by_cpu, f"{yes_no(by_cpu)} by CPU cost (throughput unresolved)"


def _estimate_note(res: dict, wl: str) -> str:
    est = cpu_estimate(res, wl)
    if not est:
        return ""
    return f"; CPU cost (BPF + recorder) {num(est['machine_pct'], 2, ' %')} of the machine"


def _cost_note(cond: dict) -> str:
    if cond.get("cpu_cost_pct") is None:
        return ""
    return f"; CPU per {unit_word(cond['work_unit'])} {num(cond['cpu_cost_pct'], 1, ' %', sign=True)}"
