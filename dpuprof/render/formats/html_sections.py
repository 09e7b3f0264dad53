"""Template context for the GPU beside the host, the per-step view and the time window a report
covers: plain data (text and table rows) that reports/templates/sections/{gpu,steps}.html and
run.html place; the templates escape it (Jinja2 autoescape).
"""

from __future__ import annotations

from dpuprof.render.causes import HEADER, TOP, cause_frame, cause_rows
from dpuprof.render.gpu import gpu_view
from dpuprof.render.steps import steps_view
from dpuprof.render.view import RunView

#: per-step rows shown in the HTML table (all of them are in the JSON)
MAX_STEP_ROWS = 500


def window_text(v: RunView) -> str:
    """One line: which part of the recording the report covers, and how it was chosen."""
    win = v.meta.window
    if win is None:
        return (f"Window: the whole run, 0–{v.duration_s:.1f} s, start-up included "
                "(dpuprof report --time START:END or --time steady narrows it).")
    span = f"{win.start_s}–{win.end_s} s of the recording ({win.intervals} intervals)"
    how = win.how
    if how.startswith("--time"):
        return f"Window: {span}, {how}."
    return f"Window: steady state (--time steady), {span}; chosen by {how}."


def _gib(x) -> str:
    return "?" if x is None or x != x else f"{float(x) / 2 ** 30:.2f}"


def _pct(x) -> str:
    return "?" if x is None or x != x else f"{float(x):.1f}"


def gpu_context(v: RunView, figure, heading: str = "GPU") -> dict | None:
    """The GPU section of ``v``: ``{"heading", "note"}`` (the one "no GPU recorded: ..." line), or
    ``{"heading", "figure", "devices", "processes"}`` with the timeline chart (same x axis as
    Categories over time) and table dicts (header, rows, num_cols); None for a merged total.
    ``figure``: html.py's figure builder."""
    if v.recording is None:
        return None

    gpu, note = gpu_view(v.recording)
    if gpu is None:
        return {"heading": heading, "note": note}
    from dpuprof.render.charts import to_png  # matplotlib: only where there is a GPU chart to draw
    from dpuprof.render.gpu_chart import gpu_timeline

    x = v.timeline.index
    xlim = (float(x.min()), float(x.max()) + v.interval_s) if len(x) else None
    png = to_png(gpu_timeline(gpu, f"GPU over time — {v.name}", xlim, step_s=v.interval_s))
    rows = [[str(int(i)), r["name"], _pct(r["util_mean_pct"]), _pct(r["util_max_pct"]), _gib(r["mem_max_bytes"]),
             _gib(r["mem_total_bytes"]), str(int(r["intervals"]))] for i, r in gpu.devices.iterrows()]
    out = {"heading": heading, "note": None,
           "figure": figure("GPU over time", "NVML utilisation (solid, left) and device memory used (dashed, "
                            "right) per interval, on the x axis of Categories over time.", png, "gpu-over-time"),
           "devices": {"header": ["GPU", "name", "util mean %", "util max %", "memory max GiB", "memory GiB",
                                  "intervals"], "rows": rows, "num_cols": (0, 2, 3, 4, 5, 6)},
           "processes": None}
    p = gpu.processes
    if not p.empty:
        prow = [[str(int(r.gpu_index)), str(int(r.pid)), str(r.comm), "yes" if r.in_workload else "no",
                 _pct(r.sm_util_mean_pct), _pct(100 * r.sm_share if r.sm_share == r.sm_share else None),
                 _gib(r.mem_max_bytes)] for r in p.itertuples(index=False)]
        out["processes"] = {"header": ["GPU", "pid", "process", "workload", "SM util mean %",
                                       "share of GPU's SM %", "memory max GiB"],
                            "rows": prow, "num_cols": (0, 1, 4, 5, 6)}
    return out


def steps_context(v: RunView) -> dict | None:
    """The per-step section: the summary line and table, and the per-step rows (the first
    MAX_STEP_ROWS; all are in the JSON); None without step markers or for a merged total."""
    if v.recording is None:
        return None

    sv = steps_view(v.recording)
    if sv is None:
        return None
    s = sv.summary()
    summ = [["wall (s)", f"{s['wall_s']['median']:.4f}", f"{s['wall_s']['p90']:.4f}", f"{s['wall_s']['mean']:.4f}"],
            ["infrastructure CPU (s)", f"{s['infra_cpu_s']['median']:.4f}", f"{s['infra_cpu_s']['p90']:.4f}",
             f"{s['infra_cpu_s']['mean']:.4f}"],
            ["busy host CPU (s)", f"{s['cpu_s']['median']:.4f}", "", f"{s['cpu_s']['mean']:.4f}"]]
    f = sv.frame.head(MAX_STEP_ROWS)
    rows = [[str(int(r.step)), f"{r.t_s:.3f}", f"{r.wall_s:.4f}", f"{r.infra_cpu_s:.4f}", f"{r.cpu_s:.4f}"]
            for r in f.itertuples(index=False)]
    more = f" (first {MAX_STEP_ROWS} of {len(sv.frame)}; all in the JSON)" if len(sv.frame) > MAX_STEP_ROWS else ""
    return {"summary_line": sv.summary_line(), "count": len(sv.frame), "more": more,
            "summary": {"header": ["per step", "median", "p90", "mean"], "rows": summ, "num_cols": (1, 2, 3)},
            "rows": {"header": ["step", "start (s)", "wall (s)", "infrastructure CPU (s)", "busy host CPU (s)"],
                     "rows": rows, "num_cols": range(5)}}


def causes_context(v: RunView) -> dict | None:
    """Kernel work by its user-space cause (render/causes.py) as a table dict; None without causes."""
    if v.recording is None:
        return None

    rows = cause_rows(cause_frame(v.recording))
    return {"header": HEADER, "rows": rows, "num_cols": (2, 3), "top": TOP} if rows else None
