"""The pure part of benchmarks/agent_soak.py: per-window rows from the recordings and the /proc
samples, the verdict, and the Markdown (tests/test_benchmarks_soak.py)."""

from __future__ import annotations

import bisect

#: Lost kinds that grow with the load, not with the agent's age: reported, not judged.
#: user_stack_unwalkable: code without frame pointers; thread_exit_unaccounted: without the
#: sched_wait probe (the light setting) every thread that exits is counted so, by design.
UNJUDGED_LOSS = ("user_stack_unwalkable", "thread_exit_unaccounted")
LIMIT = 1.10  # no window more than 10 % above the first


def cpu_at(samples: list, t: float) -> float | None:
    """The agent's CPU seconds at unix time ``t``, linear between the two samples around it
    (``samples`` [(t, cpu_s, rss_kb)] in time order); the nearest end sample outside them; None
    without samples."""
    if not samples:
        return None
    times = [s[0] for s in samples]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, c0, _), (t1, c1, _) = samples[i - 1], samples[i]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1


def rss_in(samples: list, start: float, end: float) -> tuple[float | None, float | None]:
    """(VmRSS in MB of the last sample at or before ``end``, largest VmRSS in MB of the samples in
    [start, end]); the first falls back to the first sample after ``end``, the second to it."""
    inside = [s[2] for s in samples if start <= s[0] <= end]
    before = [s[2] for s in samples if s[0] <= end]
    last = before[-1] if before else (samples[0][2] if samples else None)
    to_mb = (lambda kb: None if kb is None else round(kb / 1024, 2))
    return to_mb(last), to_mb(max(inside) if inside else last)


def window_rows(files: list[dict], samples: list, window_s: float) -> list[dict]:
    """One row per recording file (agent_soak.file_window's dicts, in time order) with the agent's
    CPU and RSS from ``samples``, cost % and judged loss, and ratios to the first judged window
    (``<key>_ratio``; None where the first is 0 or missing). A file shorter than half a window
    is not judged."""
    rows = []
    for f in files:
        start, end = f["start"], f["end"]
        c0, c1 = cpu_at(samples, start), cpu_at(samples, end)
        agent_cpu = None if c0 is None else round(c1 - c0, 3)
        rss_end, rss_max = rss_in(samples, start, end)
        spent = (agent_cpu or 0.0) + (f["bpf_s"] or 0.0)
        lost = f["lost_by_kind"]
        rows.append(dict(f, seconds=round(end - start, 1), judged=end - start >= window_s / 2,
                         agent_cpu_s=agent_cpu, rss_end_mb=rss_end, rss_max_mb=rss_max,
                         cost_pct=round(100 * spent / f["workload_cpu_s"], 3) if f["workload_cpu_s"] > 0 else None,
                         lost=sum(lost.values()),
                         lost_judged=sum(n for k, n in lost.items() if k not in UNJUDGED_LOSS)))
    first = next((r for r in rows if r["judged"]), None)
    for r in rows:
        for key in ("rss_end_mb", "rss_max_mb", "agent_cpu_s", "bpf_s", "workload_cpu_s", "cost_pct",
                    "lost", "lost_judged", "bytes"):
            base = first.get(key) if first else None
            r[key + "_ratio"] = round(r[key] / base, 3) if base and r.get(key) is not None else None
    return rows


def judge(rows: list[dict], loss_floor: int = 20) -> dict:
    """{"ok", "failures": [line]}: every judged window after the first within LIMIT of the first
    in RSS at its end, cost % and judged loss (0 against 0 is flat; at most ``loss_floor`` judged
    losses always passes)."""
    judged = [r for r in rows if r["judged"]]
    failures = []
    if not judged:
        return {"ok": False, "failures": ["no window lasted half a window: nothing to judge"]}
    first = judged[0]
    for i, r in enumerate(judged[1:], start=1):
        for key, unit in (("rss_end_mb", "MB"), ("cost_pct", "%")):
            if r[key] is not None and first[key] is not None and r[key] > LIMIT * first[key]:
                failures.append(f"window {i}: {key} {r[key]:g} {unit} > 1.1 x the first's {first[key]:g}")
        if r["lost_judged"] > max(LIMIT * first["lost_judged"], loss_floor):
            failures.append(f"window {i}: {r['lost_judged']} judged losses > 1.1 x the first's "
                            f"{first['lost_judged']} and > the floor {loss_floor}")
    return {"ok": not failures, "failures": failures, "windows_judged": len(judged)}


def _num(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def markdown(rows: list[dict], verdict: dict, args, load_before, load_after) -> str:
    """The report: the windows table with ratios to the first, the verdict, how it was measured."""
    head = ("| window | s | RSS end MB (x1st) | RSS max MB | agent CPU s | BPF s | workload CPU s | cost % (x1st) "
            "| lost (judged, x1st) | MB |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"## dpuprof agent soak: {args.duration:g} s, {args.window:g}-s windows", "", head]
    for i, r in enumerate(rows):
        mark = "" if r["judged"] else " (short: not judged)"
        lines.append(f"| {i}{mark} | {r['seconds']:g} | {_num(r['rss_end_mb'], '{:.1f}')} "
                     f"({_num(r['rss_end_mb_ratio'])}) | {_num(r['rss_max_mb'], '{:.1f}')} | "
                     f"{_num(r['agent_cpu_s'])} | {_num(r['bpf_s'])} | {_num(r['workload_cpu_s'], '{:.1f}')} | "
                     f"{_num(r['cost_pct'])} ({_num(r['cost_pct_ratio'])}) | {r['lost']} ({r['lost_judged']}, "
                     f"{_num(r['lost_judged_ratio'])}) | {r['bytes'] / 1e6:.2f} |")
    lines += ["", "Verdict: " + ("flat: no window more than 10 % above the first in RSS, cost or judged loss"
                                 if verdict["ok"] else "NOT flat: " + "; ".join(verdict["failures"])), "",
              "RSS: the agent's VmRSS (/proc, every %g s). Agent CPU: its utime + stime (/proc/PID/stat). "
              "BPF: the recording's probe_cost (BPF_ENABLE_STATS run time). Workload CPU: cpu_category "
              "outside idle and observer, the agent's pid left out. Cost = (agent CPU + BPF) / workload CPU. "
              "Lost: the lost table; judged: all kinds but %s; at most %d judged losses always pass."
              % (args.period, ", ".join(UNJUDGED_LOSS), args.loss_floor),
              f"Load average (1, 5, 15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}; "
              f"after: {' '.join(f'{x:.2f}' for x in load_after)}."]
    return "\n".join(lines)
