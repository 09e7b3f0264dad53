"""The terminal summary (the default): tables laid out by rich, with colour only on a TTY.

Control characters in names from a recording are replaced (dpuprof.render.console.clean), so a
hostile process name cannot send escape sequences to the user's terminal.
"""

from __future__ import annotations

from dpuprof.categories import CATEGORIES
from dpuprof.render import check_rows as C
from dpuprof.render import job as J
from dpuprof.render import tables as T
from dpuprof.render.causes import HEADER, cause_frame, cause_rows
from dpuprof.render.console import clean, styled, table, to_text
from dpuprof.render.gpu import device_lines, gpu_view, process_lines
from dpuprof.render.output import Rendered
from dpuprof.render.steps import steps_view
from dpuprof.render.view import Report, RunView

BAR_W = 28


class Style:
    """Heading, note and warning lines as rich Text (styled only when the output is coloured)."""

    def bold(self, t: str):
        return styled(t, "bold")

    def dim(self, t: str):
        return styled(t, "dim")

    def warn(self, t: str):
        return styled(t, "yellow")


def text_table(header: list[str], rows: list[list[str]], right=(), max_w: int = 48):
    """A rich table of text cells (see dpuprof.render.console.table), indented two spaces."""
    return table(header, rows, right=right, max_w=max_w)


def header(v: RunView, st: Style, title: str) -> list:
    cmd = v.workload_label
    lines = [st.bold(clean(title)),
             clean(f"  {cmd}") if cmd else "",
             clean(f"  host {v.host_text} · {v.cpu_count:g} CPUs · {v.duration_s:.1f} s · mode {v.meta.mode}")]
    for w in v.warnings:
        lines.append(st.warn(clean(f"  ! {w}")))
    return [ln for ln in lines if ln]


def category_bars(v: RunView) -> list:
    """Per category: average cores, share of busy CPU, a bar of that share, projected cores."""
    if not v.category_split:
        return ["  (no category split in psutil mode)"]
    dur = v.duration_s or 1.0
    busy = v.busy_s or 1.0
    rows = []
    for c in CATEGORIES:
        s = float(v.cats.loc[c, "cpu_s"])
        share = s / busy
        after = v.projected_s(c)
        rows.append([c, f"{s / dur:.2f} cores", f"{100 * share:.1f} %", "█" * round(BAR_W * share),
                     f"-> {after / dur:.2f}" if after is not None else ""])
    return [table([], rows, right=(1, 2, 4), min_widths={3: BAR_W})]


def vendor(v: RunView, st: Style) -> list:
    rows = T.vendor_rows(v)
    out = [text_table(T.HEADER[:5], [r.cells()[:5] for r in rows])]
    notes = [f"{r.metric}: " + "; ".join(r.assumptions + ([f"vendor brief: {r.vendor}"] if r.vendor != T.DASH else []))
             for r in rows if r.assumptions or r.vendor != T.DASH]
    if notes:
        out.append(st.dim("  Assumptions:"))
        out += [st.dim(clean(f"    - {n}")) for n in notes]
    return out


def single(v: RunView, st: Style, title: str) -> list:
    out = header(v, st, title) + ["", st.bold("Host CPU by category") + "  (avg cores, share of busy"
                                  + (", projected cores)" if v.projection else ")")]
    out += category_bars(v)
    out += ["", st.bold("Measured, not claimed")] + vendor(v, st)
    if len(v.subcats):
        out += ["", st.bold("Top subcategories"),
                text_table(T.SUBCATEGORY_HEADER, T.subcategory_rows(v, 8), right=(1, 2))]
    procs = T.process_rows(v, 8)
    if procs:
        out += ["", st.bold("Workload processes"), text_table(T.PROCESS_HEADER, procs, right=(0, 2, 3))]
    return out + gpu_and_steps(v, st)


def gpu_and_steps(v: RunView, st: Style) -> list[str]:
    """The GPU beside the host (or the one "no GPU recorded" line) and the per-step summary."""
    if v.recording is None:  # a merged cluster total
        return []

    gpu, note = gpu_view(v.recording)
    out = ["", st.bold("GPU")] + ([f"  {clean(note)}"] if gpu is None else
                                  [f"  {clean(ln)}" for ln in device_lines(gpu) + process_lines(gpu)])
    steps = steps_view(v.recording)
    if steps is not None:
        out += ["", st.bold("Per step"), f"  {clean(steps.summary_line())}"]

    causes = cause_rows(cause_frame(v.recording))
    if causes:
        out += ["", st.bold("Kernel work by its user-space cause"), text_table(HEADER, causes, right=(2, 3))]
    return out


def render_text(report: Report, color: bool = False) -> str:
    st = Style()
    if report.kind == "single":
        lines = single(report.main, st, f"dpuprof report: {report.main.name}")
    elif report.kind == "compare":
        a, b = report.runs
        lines = [st.bold(clean(f"dpuprof comparison: A = {a.name}, B = {b.name}"))]
        if report.comparison is not None and a.category_split and b.category_split:
            lines += ["", st.bold("Share of busy CPU, A -> B") + "  (two-proportion z-test, significant at "
                      "p < 0.05/6)"]
            lines.append(text_table(T.compare_header(a, b), T.compare_rows(report.comparison, a, b),
                                    right=range(1, 8)))
        lines += check_lines(report.check, st)
        for tag, v in (("A", a), ("B", b)):
            lines += [""] + single(v, st, f"{tag}: {v.name}")
    else:
        t = report.total
        lines = single(t, st, f"dpuprof job report: {len(report.runs)} nodes"
                       + (f", {t.job.identity}" if t.job else ""))
        lines += ["", st.bold("Per node and total")]
        lines.append(text_table(T.NODE_HEADER, T.node_rows(report.runs, t),
                                right=range(2, len(T.NODE_HEADER)), max_w=24))
        if t.job:
            lines += job_lines(t.job, st)
    return to_text(lines, color)


def check_lines(chk, st: Style) -> list:
    """The projection check of a comparison (render/check_rows.py), or why it was not made."""
    if chk is None:
        return []
    if not chk.made:
        return [""] + [st.warn(clean(f"  ! {ln}")) for ln in C.cannot_lines(chk)]
    out = ["", st.bold(C.TITLE), st.dim(clean(f"  {C.intro(chk)}")),
           text_table(C.CPU_HEADER, C.cpu_rows(chk), right=range(1, 6)),
           clean(f"  {C.speedup_line(chk)}"), "", st.bold("What B shows that the projection did not expect")]
    return out + [clean(f"  - {ln}") for ln in C.finding_lines(chk)]


def job_lines(jv, st: Style) -> list[str]:
    """The job view's spread, stragglers and projections (render/job.py)."""
    out = ["", st.bold("Spread between nodes"), text_table(J.SPREAD_HEADER, J.spread_rows(jv), right=(1, 2, 3))]
    out += ["", st.bold("Stragglers")] + ["  " + clean(ln) for ln in J.straggler_lines(jv)]
    out += ["", st.bold("Projection per node and for the job"),
            text_table(J.PROJECTION_HEADER, J.projection_rows(jv), max_w=90)]
    return out


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(render_text(report, color).encode("utf-8"))
