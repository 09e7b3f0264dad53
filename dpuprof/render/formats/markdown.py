"""Markdown: the tables as GitHub-flavoured markdown, the charts as PNG files beside it
(``REPORT.md`` + ``REPORT.<chart>.png``). Written to standard output, it has no images.

Cells are HTML-escaped as well as markdown-escaped: markdown viewers render raw HTML, so a process
name like ``<img onerror=...>`` must arrive as text.
"""

from __future__ import annotations

import re
from html import escape

from dpuprof.render import chartpool
from dpuprof.render import check_rows as C
from dpuprof.render import job as J
from dpuprof.render import tables as T
from dpuprof.render.figures import charts_for
from dpuprof.render.gpu import device_lines, gpu_view, process_lines
from dpuprof.render.output import Rendered
from dpuprof.render.steps import steps_view
from dpuprof.render.view import Report, RunView

_MD = re.compile(r"([\\`*_\[\]|#])")


def md(text) -> str:
    """One line of text, safe in a markdown table cell or paragraph."""
    text = " ".join(str(text).split())
    return _MD.sub(r"\\\1", escape(text, quote=False))


def table(header: list[str], rows: list[list[str]], right=()) -> str:
    out = ["| " + " | ".join(md(h) for h in header) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _run(v: RunView, level: str = "##") -> list[str]:
    out = []
    out.append(md(f"{v.workload_label} — host {v.host_text}, {v.cpu_count:g} CPUs, {v.duration_s:.1f} s, "
                  f"mode {v.meta.mode}"))
    if v.warnings:
        out += ["", "> **Notes**"] + [f"> - {md(w)}" for w in v.warnings]
    out += ["", f"{level} Measured, not claimed", "",
            table(T.HEADER, [r.cells() for r in T.vendor_rows(v)], right=(1, 2, 3, 4)), ""]
    if v.category_split:
        out += [f"{level} By category", "", table(T.CATEGORY_HEADER, T.category_rows(v), right=range(1, 6)), "",
                f"{level} Top subcategories", "", table(T.SUBCATEGORY_HEADER, T.subcategory_rows(v), right=(1, 2)), ""]
    procs = T.process_rows(v)
    if procs:
        out += [f"{level} Workload processes", "", table(T.PROCESS_HEADER, procs, right=(0, 2, 3)), ""]
    return out + _gpu_and_steps(v, level)


def _gpu_and_steps(v: RunView, level: str) -> list[str]:
    """The GPU beside the host (or the "no GPU recorded" line) and the per-step summary."""
    if v.recording is None:  # a merged cluster total: each node shows its own
        return []

    gpu, note = gpu_view(v.recording)
    out = [f"{level} GPU", ""] + ([md(note)] if gpu is None else
                                  [f"- {md(ln)}" for ln in device_lines(gpu) + process_lines(gpu)]) + [""]
    steps = steps_view(v.recording)
    if steps is not None:
        out += [f"{level} Per step", "", md(steps.summary_line()), ""]
    return out


def _check(chk) -> list[str]:
    """The projection check of a comparison (render/check_rows.py), or why it was not made."""
    if chk is None:
        return []
    if not chk.made:
        return ["> **Projection check**"] + [f"> - {md(ln)}" for ln in C.cannot_lines(chk)] + [""]
    return [f"## {md(C.TITLE)}", "", md(C.intro(chk)), "",
            table(C.CPU_HEADER, C.cpu_rows(chk), right=range(1, 6)), "", md(C.speedup_line(chk)), "",
            "### What B shows that the projection did not expect", ""] + \
        [f"- {md(ln)}" for ln in C.finding_lines(chk)] + [""]


def _job(jv) -> list[str]:
    """The job view's identity, spread, stragglers and projections (render/job.py)."""
    if jv is None:
        return []
    return [f"Job: {md(jv.identity)}", "", "## Spread between nodes", "",
            table(J.SPREAD_HEADER, J.spread_rows(jv), right=(1, 2, 3)), "", "## Stragglers", ""] + \
        [f"- {md(ln)}" for ln in J.straggler_lines(jv)] + \
        ["", "## Projection per node and for the job", "", table(J.PROJECTION_HEADER, J.projection_rows(jv)), ""]


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    """``stem``: the output file's name without ``.md`` (the PNGs are named after it); None when
    writing to standard output, where there is nowhere to put images."""
    specs = charts_for(report) if stem is not None else []
    pending = chartpool.start(specs, report.workers)  # drawn by workers while the text is built here
    lines = [f"# dpuprof report: {md(report.title)}", ""]
    if report.kind == "compare":
        a, b = report.runs
        if report.comparison is not None and a.category_split and b.category_split:
            lines += ["## Differences and their significance", "",
                      "Share of busy CPU samples; significant when p < 0.05/6 (two-proportion z-test, "
                      "Bonferroni over six categories).", "",
                      table(T.compare_header(a, b), T.compare_rows(report.comparison, a, b), right=range(1, 8)), ""]
        lines += _check(report.check)
        for tag, v in (("A", a), ("B", b)):
            lines += [f"## {tag}: {md(v.name)}", ""] + _run(v, "###")
    elif report.kind == "merge":
        lines += ["## Per node and total", "",
                  table(T.NODE_HEADER, T.node_rows(report.runs, report.total), right=range(2, len(T.NODE_HEADER))),
                  ""] + _job(report.total.job) + _run(report.total)
    else:
        lines += _run(report.main)
    extra = {}
    if specs:
        lines += ["## Charts", ""]
    for c, png in zip(specs, pending.pngs(progress)):
        name = f"{stem}.{c.key}.png"
        extra[name] = png
        lines += [f"![{md(c.title)}]({name})", "", f"*{md(c.caption)}*", ""]
    if not specs:
        lines += ["*Charts are written as PNG files beside the report with `-o REPORT.md`.*", ""]
    return Rendered("\n".join(lines).encode("utf-8"), extra=extra)
