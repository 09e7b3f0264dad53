"""The terminal summary (the default): plain aligned text, with colour only on a TTY.

Control characters in names from a recording are replaced, so a hostile process name cannot send
escape sequences to the user's terminal.
"""

from __future__ import annotations

import re
import shlex

from dpuprof.categories import CATEGORIES
from dpuprof.render import tables as T
from dpuprof.render.view import Report, RunView
from dpuprof.render.output import Rendered

_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
BAR_W = 28


def clean(text) -> str:
    return _CTRL.sub("?", str(text))


class Style:
    def __init__(self, color: bool):
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)

    def warn(self, t: str) -> str:
        return self._wrap("33", t)


def text_table(header: list[str], rows: list[list[str]], right=(), max_w: int = 48) -> list[str]:
    def cut(s: str) -> str:
        s = clean(s)
        return s if len(s) <= max_w else s[: max_w - 1] + "…"

    cells = [[cut(c) for c in header]] + [[cut(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for k, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def header(v: RunView, st: Style, title: str) -> list[str]:
    cmd = v.meta.get("command")
    cmd = v.meta.get("workload_label") or (shlex.join(map(str, cmd)) if isinstance(cmd, list) else (cmd or ""))
    host = v.meta.get("host")
    host = ", ".join(map(str, host)) if isinstance(host, list) else host
    lines = [st.bold(clean(title)),
             clean(f"  {cmd}") if cmd else "",
             clean(f"  host {host} · {v.cpu_count:g} CPUs · {v.duration_s:.1f} s · mode {v.meta.get('mode')}")]
    for w in v.warnings:
        lines.append(st.warn(clean(f"  ! {w}")))
    return [ln for ln in lines if ln]


def category_bars(v: RunView) -> list[str]:
    if not v.category_split:
        return ["  (no category split in psutil mode)"]
    dur = v.duration_s or 1.0
    busy = v.busy_s or 1.0
    out = []
    for c in CATEGORIES:
        s = float(v.cats.loc[c, "cpu_s"])
        share = s / busy
        after = v.projected_s(c)
        proj = f"  -> {after / dur:5.2f}" if after is not None else ""
        out.append(f"  {c:<13}{s / dur:6.2f} cores {100 * share:5.1f} %  {'█' * round(BAR_W * share):<{BAR_W}}{proj}")
    return out


def vendor(v: RunView, st: Style) -> list[str]:
    rows = T.vendor_rows(v)
    lines = text_table(T.HEADER[:5], [r.cells()[:5] for r in rows])
    out = ["  " + ln for ln in lines]
    notes = [f"{r.metric}: " + "; ".join(r.assumptions + ([f"vendor brief: {r.vendor}"] if r.vendor != T.DASH else []))
             for r in rows if r.assumptions or r.vendor != T.DASH]
    if notes:
        out.append(st.dim("  Assumptions:"))
        out += [st.dim(clean(f"    - {n}")) for n in notes]
    return out


def single(v: RunView, st: Style, title: str) -> list[str]:
    out = header(v, st, title) + ["", st.bold("Host CPU by category") + "  (avg cores, share of busy"
                                  + (", projected cores)" if v.projection else ")")]
    out += category_bars(v)
    out += ["", st.bold("Measured, not claimed")] + vendor(v, st)
    if len(v.subcats):
        out += ["", st.bold("Top subcategories")] + ["  " + ln for ln in
                                                       text_table(T.SUBCATEGORY_HEADER, T.subcategory_rows(v, 8),
                                                                  right=(1, 2))]
    procs = T.process_rows(v, 8)
    if procs:
        out += ["", st.bold("Workload processes")] + ["  " + ln for ln in
                                                        text_table(T.PROCESS_HEADER, procs, right=(0, 2, 3))]
    return out


def render_text(report: Report, color: bool = False) -> str:
    st = Style(color)
    if report.kind == "single":
        lines = single(report.main, st, f"dpuprof report: {report.main.name}")
    elif report.kind == "compare":
        a, b = report.runs
        lines = [st.bold(clean(f"dpuprof comparison: A = {a.name}, B = {b.name}"))]
        if report.comparison is not None and a.category_split and b.category_split:
            lines += ["", st.bold("Share of busy CPU, A -> B") + "  (two-proportion z-test, significant at "
                      "p < 0.05/6)"]
            lines += ["  " + ln for ln in text_table(T.compare_header(a, b), T.compare_rows(report.comparison, a, b),
                                                     right=range(1, 8))]
        for tag, v in (("A", a), ("B", b)):
            lines += [""] + single(v, st, f"{tag}: {v.name}")
    else:
        t = report.total
        lines = single(t, st, f"dpuprof job report: {len(report.runs)} nodes"
                       + (f", {t.job.identity}" if t.job else ""))
        lines += ["", st.bold("Per node and total")]
        lines += ["  " + ln for ln in text_table(T.NODE_HEADER, T.node_rows(report.runs, t),
                                                 right=range(2, len(T.NODE_HEADER)), max_w=24)]
        if t.job:
            lines += job_lines(t.job, st)
    return "\n".join(lines) + "\n"


def job_lines(jv, st: Style) -> list[str]:
    """The job view's spread, stragglers and projections (render/job.py)."""
    from dpuprof.render import job as J

    out = ["", st.bold("Spread between nodes")]
    out += ["  " + ln for ln in text_table(J.SPREAD_HEADER, J.spread_rows(jv), right=(1, 2, 3))]
    out += ["", st.bold("Stragglers")] + ["  " + clean(ln) for ln in J.straggler_lines(jv)]
    out += ["", st.bold("Projection per node and for the job")]
    out += ["  " + ln for ln in text_table(J.PROJECTION_HEADER, J.projection_rows(jv), max_w=90)]
    return out


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(render_text(report, color).encode("utf-8"))
