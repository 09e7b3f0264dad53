"""One self-contained HTML file: charts as inline PNG (base64), flame graphs as inline SVG, the CSS
and the zoom script inline, no network access.

The page is Jinja2 templates (reports/templates/: ``single.html``, ``compare.html``, ``merge.html``
extending ``report.html``, one ``sections/*.html`` include per section); this module only builds
their context: plain strings and rows from :mod:`dpuprof.render.tables`.

Safety: the templates are rendered with autoescape, so every string that comes from a recording or
a projection is escaped; only the CSS, the script, the JSON block and the flame-graph SVG (escaped
by dpuprof.render.flame) are handed over as ``Markup``. The JSON copy of the data in ``<script type="application/json">`` has ``<``, ``>`` and ``&`` escaped as
``\\u003c`` and so on; a Content-Security-Policy allows only the report's own script (by hash),
inline styles and data: images, so even a missed escape could not run a script or load anything.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import math
import struct
from functools import lru_cache

import jinja2
from markupsafe import Markup

from dpuprof import __version__
from dpuprof.categories import INFRASTRUCTURE
from dpuprof.render import chartpool, offload_modes, templates
from dpuprof.render import job as J
from dpuprof.render import tables as T
from dpuprof.render.figures import charts_for
from dpuprof.render.flame import diff_svg, tax_svg
from dpuprof.render.formats import html_sections as S
from dpuprof.render.formats.html_check import check_context
from dpuprof.render.formats.json_format import data_for
from dpuprof.render.output import Rendered
from dpuprof.render.view import Report, RunView


def _finite(obj):
    """``obj`` with NaN and infinities as None, dict keys as str and tuples as lists."""
    t = type(obj)  # the exact common types first (the per-step rows make tens of thousands of values)
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is dict:
        return {str(k): v if type(v) is float and math.isfinite(v) else _finite(v) for k, v in obj.items()}
    if t is list:
        return [_finite(v) for v in obj]
    if isinstance(obj, float):  # subclasses (numpy.float64) and the rest, as before
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def script_json(obj) -> str:
    """JSON safe to place inside a <script> element: no '<', '>' or '&' survive literally."""
    text = json.dumps(_finite(obj), allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


# ----------------------------------------------------------------------------- context

@lru_cache(maxsize=1)
def environment():
    """The Jinja2 environment over the template folder; autoescape on for every template."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates.template_dir())),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def assumptions_cell(items: list[str]) -> dict:
    """The first assumption shown, the rest behind a native <details> toggle (no script); a first
    one over 240 characters is cut to ~200 and shown in full in the toggle."""
    if not items:
        return {"first": T.DASH, "rest": []}
    if len(items) == 1 and len(items[0]) < 240:
        return {"first": items[0], "rest": []}
    if len(items[0]) < 240:
        return {"first": items[0], "rest": items[1:]}
    return {"first": items[0][:200].rsplit(" ", 1)[0] + " …", "rest": items}


def vendor_table(v: RunView) -> dict:
    classes = ("", "num", "num", "num", "num", "vendor")
    return {"header": T.HEADER,
            "rows": [{"cells": list(zip(classes, r.cells()[:6])), "assumptions": assumptions_cell(r.assumptions)}
                     for r in T.vendor_rows(v)]}


def _png_size(png: bytes) -> tuple[int, int]:
    if png[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", png[16:24])
    return 0, 0


def figure(title: str, caption: str, png: bytes, key: str) -> dict:
    w, h = _png_size(png)
    return {"title": title, "caption": caption, "key": key, "width": w, "height": h,
            "data": base64.b64encode(png).decode("ascii")}


def meta_items(v: RunView) -> list[dict]:
    """The run's description line as items ``{before, text, wrap}`` (wrap: "code", "b" or "")."""
    m = v.meta
    when = ""
    if m.start_time is not None:  # the reader refuses NaN and infinity
        when = _dt.datetime.fromtimestamp(m.start_time, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    dpu = v.projection.dpu.name if v.projection is not None else None
    items = [("", v.workload_label, "code"), ("host ", v.host_text, ""), ("kernel ", m.kernel, ""),
             ("", f"{v.cpu_count:g} CPUs" + (f" ({m.cpu_model})" if m.cpu_model else ""), ""),
             ("", f"{v.duration_s:.1f} s", ""), ("mode ", m.mode, ""),
             ("", f"{m.sample_freq_hz:g} Hz sampling" if m.sample_freq_hz else "", ""),
             ("", when, ""), ("file ", str(v.path), ""), ("projected for ", dpu, "b")]
    return [{"before": before, "text": str(text), "wrap": wrap} for before, text, wrap in items if text]


def kpis(v: RunView) -> list[tuple[str, str]]:
    """The headline numbers: (big, small) pairs."""
    items = []
    if v.category_split and v.busy_s:
        items.append((f"{100 * v.infra_s / v.busy_s:.1f} %", "infrastructure share of busy CPU"))
    cfa = v.projection.cores_for_ai if v.projection is not None else None
    before = cfa.before_pct if cfa is not None and cfa.before_pct is not None else v.cores_for_ai_pct
    after = cfa.after_pct if cfa is not None else None
    if before is not None:
        items.append((f"{before:.1f} %" + (f" → {after:.1f} %" if after is not None else ""),
                      "CPU cores available for AI" + (" (with DPU)" if after is not None else "")))
    if v.projection is not None:  # expected/high null = unbounded
        sp = v.projection.speedup
        low, exp, high = sp.low, sp.expected, sp.high
        rng = f" (model bounds {low:.2f}–{'∞' if high is None else f'{high:.2f}'})" if low is not None else ""
        regime = f"; regime: {sp.regime}" if sp.regime is not None else ""
        beside = offload_modes.headline(sp, v.projection.mode_override, ".2f", "x")
        items.append(("unbounded" if exp is None else f"{exp:.2f}x", f"expected job speedup{rng}{regime}"
                      + (f"; {beside}" if beside else "")))
    items.append((T.fmt_bytes(float(v.summary.net_bytes)), "network bytes"))
    items.append((T.fmt_bytes(float(v.summary.disk_bytes)), "storage bytes"))
    return items


def breakdown(v: RunView) -> dict:
    return {"category_header": T.CATEGORY_HEADER, "categories": T.category_rows(v),
            "subcategory_header": T.SUBCATEGORY_HEADER, "subcategories": T.subcategory_rows(v),
            "process_header": T.PROCESS_HEADER, "processes": T.process_rows(v)}


def method(views: list[RunView]) -> list[str]:
    items = ["CPU time per category comes from classified CPU stack samples (the recorder scales each "
             "process's samples to its on-CPU time where the scheduler reports it); the leaf-most frame "
             "that matches a rule decides the category (dpuprof/data/rules.toml).",
             "Ranges: 95 % Wilson intervals for shares and Poisson intervals for counts, treating "
             "samples as independent (optimistic for bursty work).",
             "Infrastructure = " + ", ".join(INFRASTRUCTURE) + "; idle is excluded from busy CPU."]
    for v in views:
        for a in T.assumptions(v):
            items.append(a if len(views) == 1 else f"{v.name}: {a}")
    if all(v.projection is None for v in views):
        items.append("No projection: the 'Projected with DPU' column is empty. Run "
                     "'dpuprof project RUN.rec' to add it.")
    return items


def start_charts(report: Report):
    """Start drawing the report's charts (in worker processes: :mod:`dpuprof.render.chartpool`);
    ``charts`` collects them."""
    return chartpool.start(charts_for(report), report.workers)


def charts(report: Report, progress, pending=None) -> list[dict]:
    """The chart grids: ``{pair, figures}``, unpaired charts first, then each A/B pair.
    ``pending``: what ``start_charts(report)`` returned (None: start them now)."""
    pending = pending if pending is not None else start_charts(report)
    grids: dict[str, list[dict]] = {"": []}
    for c, png in zip(pending.specs, pending.pngs(progress)):
        grids.setdefault(c.pair, []).append(figure(c.title, c.caption, png, c.key))
    return [{"pair": pair, "figures": figs} for pair, figs in grids.items() if figs]


def run_context(v: RunView, flame_title: str | None = None, svg_id: str = "flame-tax",
                gpu_heading: str = "GPU") -> dict:
    """What the sections need of one run; ``flame_svg`` is None without a category split; window,
    gpu and steps are None for a merged total (each node has its own)."""
    svg = Markup(tax_svg(v.stacks, flame_title, svg_id=svg_id)) if flame_title and v.category_split else None
    return {"name": v.name, "meta": meta_items(v), "warnings": v.warnings, "kpis": kpis(v),
            "vendor": vendor_table(v), "breakdown": breakdown(v), "flame_svg": svg,
            "window": S.window_text(v) if v.recording is not None else None,
            "gpu": S.gpu_context(v, figure, gpu_heading), "steps": S.steps_context(v),
            "causes": S.causes_context(v)}


def _compare_context(report: Report) -> dict:
    a, b = report.runs
    check = check_context(report.check)
    if check and check.get("svg"):
        check["svg"] = Markup(check["svg"])  # built from numbers and escaped labels (html_check.py)
    out = {"check": check, "warnings": [f"A: {w}" for w in a.warnings] + [f"B: {w}" for w in b.warnings],
           "busy_a": f"{a.busy_samples:,.0f}", "busy_b": f"{b.busy_samples:,.0f}", "table": None, "diff_svg": None}
    if report.comparison is not None and a.category_split and b.category_split:
        cmp = report.comparison
        out["table"] = {"header": T.compare_header(a, b), "rows": T.compare_rows(cmp, a, b), "num_cols": range(1, 8),
                        "classes": ["sig" if s else "" for s in cmp["significant"]]}
    if a.category_split and b.category_split:
        out["diff_svg"] = Markup(diff_svg(a.stacks, b.stacks, f"B vs A — {b.name} vs {a.name}", INFRASTRUCTURE))
    return out


def _job_context(jv) -> dict | None:
    """The job view's identity, spread, stragglers and projections (render/job.py); None when the
    merged recordings are not one job (--merge)."""
    if jv is None:
        return None
    return {"identity": jv.identity, "stragglers": J.straggler_lines(jv),
            "spread": {"header": J.SPREAD_HEADER, "rows": J.spread_rows(jv), "num_cols": (1, 2, 3)},
            "projections": {"header": J.PROJECTION_HEADER, "rows": J.projection_rows(jv),
                            "classes": [""] * len(jv.projections) + ["sig"]}}


def context(report: Report, progress=None, pending=None) -> dict:
    """The template context of ``report`` (the page's own parts: see ``render_html``). With
    ``pending`` (``start_charts(report)``), ``charts`` is left for the caller to collect."""
    collect = pending is None
    pending = start_charts(report) if collect else pending  # drawn by workers while the rest is built
    if report.kind == "single":
        v = report.main
        runs = [run_context(v, f"Infrastructure tax — {v.name}")]
        ctx = {"runs": runs, "method": method([v])}
    elif report.kind == "compare":
        a, b = report.runs
        ctx = {"runs": [run_context(a, f"A: {a.name}", "flame-a", "GPU — A"),
                        run_context(b, f"B: {b.name}", "flame-b", "GPU — B")],
               "compare": _compare_context(report), "method": method([a, b])}
    else:
        t = report.total
        ctx = {"runs": report.runs, "total": run_context(t, "Infrastructure tax — all nodes"),
               "node_sections": [{"name": n.name, "window": S.window_text(n) if n.recording is not None else None,
                                  "gpu": S.gpu_context(n, figure, f"GPU — {n.name}")} for n in report.runs],
               "nodes": {"header": T.NODE_HEADER, "rows": T.node_rows(report.runs, t),
                         "num_cols": range(2, len(T.NODE_HEADER)), "classes": [""] * len(report.runs) + ["sig"]},
               "job": _job_context(t.job), "method": method(report.runs)}
    if collect:
        ctx["charts"] = charts(report, progress, pending)
    return ctx


def render_html(report: Report, progress=None) -> str:
    pending = start_charts(report)  # drawn by workers while everything else is built here
    ctx = context(report, progress, pending)
    if progress and report.kind != "compare":
        progress.step("flame graph")
    script = templates.read("report.js")
    data = data_for(report)
    if report.kind == "single":  # one shape for scripts reading the page: kind + runs
        data = {"kind": "single", "runs": [data]}
    data_json = script_json(data)
    template = environment().get_template(f"{report.kind}.html")
    ctx["charts"] = charts(report, progress, pending)
    return template.render(
        **ctx,
        csp=Markup(csp("\n" + script + "\n")),  # our own text, quotes kept; the script element's exact text, newlines included
        version=__version__,
        title=f"dpuprof — {report.title}",
        style=Markup(templates.read("report.css")),
        footer=(f"Generated by dpuprof {__version__} on "
                f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. "
                "Self-contained: no network access needed."),
        data=Markup(data_json),
        script=Markup(script),
    )


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(render_html(report, progress).encode("utf-8"))
