"""Which charts a report has, and the DataFrames each is drawn from.

``charts_for(report)`` returns ``Chart`` specs; ``chart.draw()`` makes a Figure (or draws into a
given SubFigure, for the one-page PNG). The HTML, markdown and PNG renderers share this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE
from dpuprof.render.view import Report, RunView


@dataclass
class Chart:
    key: str        # file-name friendly id
    title: str
    caption: str
    draw: Callable  # draw(fig=None) -> Figure
    pair: str = ""  # charts with the same pair name are shown side by side (A and B)


def _charts():
    """:mod:`dpuprof.render.charts`, imported when a chart is drawn, not when the list is made:
    matplotlib takes about half a second to import, and the HTML and markdown renderers draw in
    worker processes (:mod:`dpuprof.render.chartpool`), so the process listing charts needs none."""
    from dpuprof.render import charts

    return charts


class _Draw:
    """``draw(fig=None)``: chart function ``name`` of :mod:`dpuprof.render.charts` on these
    arguments. A named function and its data rather than a closure, so that a chart can be sent
    to a worker process that is already drawing (:mod:`dpuprof.render.chartpool`)."""

    def __init__(self, name: str, *args, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, fig=None):
        return getattr(_charts(), self.name)(*self.args, fig=fig, **self.kwargs)


# ----------------------------------------------------------------------------- data for charts

def before_after(v: RunView, label: str = "") -> pd.DataFrame:
    """Rows Measured (and Projected with DPU when there is a projection); columns categories; cores."""
    dur = v.duration_s or 1.0
    prefix = f"{label}: " if label else ""
    rows = {f"{prefix}Measured": {c: float(v.cats.loc[c, "cpu_s"]) / dur for c in CATEGORIES}}
    if v.projection is not None:
        rows[f"{prefix}Projected with DPU"] = {c: v.projected_s(c) / dur for c in CATEGORIES}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(CATEGORIES))


def cores_frame(v: RunView, label: str = "") -> pd.DataFrame:
    """Rows Measured (/ Projected with DPU); columns pct (of all cores) and cores."""
    cfa = v.projection.cores_for_ai if v.projection is not None else None
    prefix = f"{label}: " if label else ""
    before = cfa.before_pct if cfa is not None and cfa.before_pct is not None else v.cores_for_ai_pct
    rows = {f"{prefix}Measured": before}
    after = cfa.after_pct if cfa is not None else None
    if after is not None:
        rows[f"{prefix}Projected with DPU"] = after
    df = pd.DataFrame({"pct": pd.Series(rows, dtype=float)})
    df["cores"] = df["pct"] * v.cpu_count / 100
    return df


def waterfall_steps(v: RunView) -> tuple[float, pd.DataFrame]:
    """(measured infrastructure cores, steps) from the projection rows, largest saving first."""
    dur = v.duration_s or 1.0
    start = v.infra_s / dur
    rows = []
    for r in v.projection.rows if v.projection is not None else []:
        if r.freed_s is None or r.freed_s <= 0 or r.category not in INFRASTRUCTURE:
            continue
        label = f"{r.subcategory or r.category} / {r.mechanism}"
        if r.node:
            label = f"{r.node}: {label}"
        rows.append({"label": label, "category": r.category, "freed": r.freed_s / dur})
    if not rows:
        return start, pd.DataFrame(columns=["category", "freed"])
    df = pd.DataFrame(rows).groupby(["label", "category"], as_index=False)["freed"].sum()
    df = df.sort_values("freed", ascending=False).set_index("label")
    # keep the chart readable: steps under 2 % of the start, and any past the 10th, share one bar
    small = (df["freed"] < 0.02 * start) | (pd.Series(range(len(df)), index=df.index) >= 10)
    if small.sum() > 1:
        rest = df[small]
        df = pd.concat([df[~small], pd.DataFrame({"category": ["other"], "freed": [rest["freed"].sum()]},
                                                 index=[f"{len(rest)} smaller"])])
    return start, df


# ----------------------------------------------------------------------------- chart lists

def _single(v: RunView, prefix: str = "", label: str = "") -> list[Chart]:
    name = f" — {label}" if label else ""
    out = []
    if v.category_split:
        ba = before_after(v)
        title = f"Host CPU by category{', before and after' if v.projection else ''}{name}"
        out.append(Chart(f"{prefix}cpu-by-category", title,
                         "Average cores per category over the recording; projected bars come from the "
                         "DPU projection. The dashed line is all cores.",
                         _Draw("category_bars", ba, v.cpu_count, title=title)))
        cf = cores_frame(v)
        title = f"CPU cores available for AI{name}"
        out.append(Chart(f"{prefix}cores-for-ai", title,
                         "Cores not spent on network, storage, crypto or compression, as a share of all "
                         "cores; dotted lines are the vendor brief's claims.",
                         _Draw("cores_for_ai", cf, title=title)))
    title = f"Categories over time{name}"
    out.append(Chart(f"{prefix}categories-over-time", title,
                     "Cores used per category in each recording interval." if v.category_split else
                     "Host CPU time per field (psutil mode: no category split).",
                     _Draw("timeline", v.timeline, title=title)))
    if v.projection and v.category_split:
        start, steps = waterfall_steps(v)
        title = f"Savings by category and mechanism{name}"
        out.append(Chart(f"{prefix}savings-waterfall", title,
                         "Infrastructure cores measured, minus what each offload mechanism frees, "
                         "to what stays on the host.",
                         _Draw("waterfall", steps, start, title=title)))
    title = f"Network and storage throughput{name}"
    out.append(Chart(f"{prefix}throughput", title, "Bytes per second per interval; IOPS on the right axis.",
                     _Draw("throughput", v.io, title=title)))
    return out


def charts_for(report: Report) -> list[Chart]:
    if report.kind == "single":
        return _single(report.main)
    if report.kind == "compare":
        a, b = report.runs
        out = []
        if report.comparison is not None and a.category_split and b.category_split:
            cmp = report.comparison
            out.append(Chart("compare-shares", "Share of busy CPU, A vs B",
                             "Per category; * marks a change beyond sampling noise "
                             "(two-proportion z-test, Bonferroni over six categories).",
                             _Draw("compare_shares", cmp, a.name, b.name)))
            both = pd.concat([before_after(a, "A"), before_after(b, "B")])
            out.append(Chart("cpu-by-category", "Host CPU by category, A and B",
                             "Average cores per category; with projections, each run's projected bar too.",
                             _Draw("category_bars", both, max(a.cpu_count, b.cpu_count))))
            cf = pd.concat([cores_frame(a, "A"), cores_frame(b, "B")])
            out.append(Chart("cores-for-ai", "CPU cores available for AI, A and B",
                             "Cores not spent on infrastructure, as a share of all cores.",
                             _Draw("cores_for_ai", cf)))
        top = max(float(v.timeline.sum(axis=1).max()) if len(v.timeline) else 0.0 for v in (a, b)) * 1.05
        for tag, v in (("A", a), ("B", b)):
            title = f"{tag}: {v.name} — categories over time"
            out.append(Chart(f"{tag.lower()}-categories-over-time", title,
                             "Cores used per category in each interval (same scale for A and B).",
                             _Draw("timeline", v.timeline, title, ymax=top or None),
                             pair="timeline"))
        for tag, v in (("A", a), ("B", b)):
            title = f"{tag}: {v.name} — network and storage throughput"
            out.append(Chart(f"{tag.lower()}-throughput", title,
                             "Bytes per second per interval; IOPS on the right axis.",
                             _Draw("throughput", v.io, title),
                             pair="throughput"))
        return out
    # merge: per node and total
    total = report.total
    out = []
    if total.category_split:
        dur = {v.name: v.duration_s or 1.0 for v in report.runs}
        per_node = pd.DataFrame({v.name: v.cats.loc[list(CATEGORIES), "cpu_s"] / dur[v.name]
                                 for v in report.runs}).T
        out.append(Chart("cpu-by-node", "Host CPU by category, per node",
                         "Average cores per category on each node.",
                         _Draw("category_bars", per_node, max(v.cpu_count for v in report.runs),
                               title="Host CPU by category, per node")))
        cf = pd.concat([cores_frame(v, v.name) for v in report.runs] + [cores_frame(total, "total")])
        out.append(Chart("cores-for-ai", "CPU cores available for AI, per node and total",
                         "Cores not spent on infrastructure, as a share of all cores.",
                         _Draw("cores_for_ai", cf)))
    return out + [c for c in _single(total, "total-", "cluster total") if c.key != "total-cores-for-ai"]
