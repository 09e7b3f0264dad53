"""One self-contained HTML file: charts as inline PNG (base64), flame graphs as inline SVG, the CSS
and the zoom script inline, no network access.

Safety: every string that comes from a recording or a projection goes through ``html.escape``; the
JSON copy of the data in ``<script type="application/json">`` has ``<``, ``>`` and ``&`` escaped as
``\\u003c`` and so on; a Content-Security-Policy allows only the report's own script (by hash),
inline styles and data: images, so even a missed escape could not run a script or load anything.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import math
import shlex
import struct
from html import escape
from string import Template

from dpuprof import __version__
from dpuprof.categories import INFRASTRUCTURE
from dpuprof.render import tables as T
from dpuprof.render.formats.json_format import data_for
from dpuprof.render.view import Report, RunView
from dpuprof.render.output import Rendered


def e(value) -> str:
    return escape(str(value), quote=True)


def _finite(obj):
    if isinstance(obj, float):
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


# ----------------------------------------------------------------------------- pieces

def table(header: list[str], rows: list[list[str]], num_cols=(), classes=None) -> str:
    head = "".join(f'<th{" class=num" if i in num_cols else ""}>{e(h)}</th>' for i, h in enumerate(header))
    body = []
    for k, row in enumerate(rows):
        cls = f' class="{e(classes[k])}"' if classes and classes[k] else ""
        cells = "".join(f'<td{" class=num" if i in num_cols else ""}>{e(c)}</td>' for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def assumptions_cell(items: list[str]) -> str:
    """The first assumption, and the rest behind a native <details> toggle (no script)."""
    if not items:
        return e(T.DASH)
    first = e(items[0])
    if len(items) == 1 and len(items[0]) < 240:
        return first
    rest = items[1:] if len(items[0]) < 240 else items
    first = first if len(items[0]) < 240 else e(items[0][:200].rsplit(" ", 1)[0] + " …")
    lis = "".join(f"<li>{e(a)}</li>" for a in rest)
    return f"{first}<details><summary>{len(rest)} more</summary><ul>{lis}</ul></details>"


def vendor_table(v: RunView) -> str:
    rows = T.vendor_rows(v)
    head = "".join(f"<th>{e(h)}</th>" for h in T.HEADER)
    body = "".join(
        "<tr>" + "".join(f'<td class="{cls}">{e(c)}</td>' for cls, c in
                         zip(("", "num", "num", "num", "num", "vendor"), r.cells()[:6]))
        + f'<td class="assume">{assumptions_cell(r.assumptions)}</td></tr>'
        for r in rows)
    return f'<table class="vendor"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def notes(items: list[str]) -> str:
    if not items:
        return ""
    lis = "".join(f"<li>{e(i)}</li>" for i in items)
    return f'<div class="notes" role="note"><b>Notes</b><ul>{lis}</ul></div>'


def _png_size(png: bytes) -> tuple[int, int]:
    if png[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", png[16:24])
    return 0, 0


def figure(title: str, caption: str, png: bytes, key: str) -> str:
    w, h = _png_size(png)
    data = base64.b64encode(png).decode("ascii")
    size = f' width="{w}" height="{h}"' if w and h else ""
    return (f'<figure id="fig-{e(key)}"><img src="data:image/png;base64,{data}" alt="{e(title)}"{size}>'
            f"<figcaption><b>{e(title)}.</b> {e(caption)}</figcaption></figure>")


def meta_line(v: RunView) -> str:
    m = v.meta
    cmd = m.get("command")
    if isinstance(cmd, list):
        cmd = shlex.join(str(c) for c in cmd)
    cmd = m.get("workload_label") or cmd
    start = m.get("start_time")
    when = ""
    if isinstance(start, (int, float)) and math.isfinite(start):
        when = _dt.datetime.fromtimestamp(start, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    host = m.get("host")
    host = ", ".join(map(str, host)) if isinstance(host, list) else host
    parts = [f"<code>{e(cmd)}</code>" if cmd else "",
             f"host {e(host)}" if host else "", f"kernel {e(m.get('kernel'))}" if m.get("kernel") else "",
             f"{v.cpu_count:g} CPUs" + (f" ({e(m.get('cpu_model'))})" if m.get("cpu_model") else ""),
             f"{v.duration_s:.1f} s", f"mode {e(m.get('mode'))}" if m.get("mode") else "",
             f"{float(m.get('sample_freq_hz') or 0):g} Hz sampling" if m.get("sample_freq_hz") else "",
             e(when) if when else "", f"file {e(v.path)}"]
    dpu = (v.projection or {}).get("dpu") or {}
    if dpu.get("name"):
        parts.append(f"projected for <b>{e(dpu.get('name'))}</b>")
    return '<p class="meta">' + " · ".join(p for p in parts if p) + "</p>"


def kpis(v: RunView) -> str:
    from dpuprof.render.projection_file import num

    items = []
    if v.category_split and v.busy_s:
        items.append((f"{100 * v.infra_s / v.busy_s:.1f} %", "infrastructure share of busy CPU"))
    cfa = (v.projection or {}).get("cores_for_ai") or {}
    before = num(cfa.get("before_pct"))
    before = before if before is not None else v.cores_for_ai_pct
    after = num(cfa.get("after_pct"))
    if before is not None:
        items.append((f"{before:.1f} %" + (f" → {after:.1f} %" if after is not None else ""),
                      "CPU cores available for AI" + (" (with DPU)" if after is not None else "")))
    sp = (v.projection or {}).get("speedup") or {}
    if sp:  # expected/high null = unbounded
        low, exp, high = num(sp.get("low")), num(sp.get("expected")), num(sp.get("high"))
        rng = f" (model bounds {low:.2f}–{'∞' if high is None else f'{high:.2f}'})" if low is not None else ""
        regime = f"; regime: {sp['regime']}" if isinstance(sp.get("regime"), str) else ""
        items.append(("unbounded" if exp is None else f"{exp:.2f}x", f"expected job speedup{rng}{regime}"))
    net = v.summary.get("net") or {}
    items.append((T.fmt_bytes(float(net.get("tx_bytes") or 0) + float(net.get("rx_bytes") or 0)), "network bytes"))
    io = v.summary.get("io") or {}
    items.append((T.fmt_bytes(float(io.get("read_bytes") or 0) + float(io.get("write_bytes") or 0)), "storage bytes"))
    return '<div class="headline">' + "".join(
        f'<div class="kpi"><b>{e(big)}</b><span>{e(small)}</span></div>' for big, small in items) + "</div>"


def breakdown(v: RunView) -> str:
    parts = ['<div class="cols"><div><h3>By category</h3>',
             table(T.CATEGORY_HEADER, T.category_rows(v), num_cols=range(1, 6)), "</div>",
             "<div><h3>Top subcategories</h3>",
             table(T.SUBCATEGORY_HEADER, T.subcategory_rows(v), num_cols=(1, 2)), "</div></div>",
             "<h3>Workload processes</h3>",
             table(T.PROCESS_HEADER, T.process_rows(v), num_cols=(0, 2, 3))]
    return "".join(parts)


def method(views: list[RunView]) -> str:
    items = ["CPU time per category comes from classified CPU stack samples (the recorder scales each "
             "process's samples to its on-CPU time where the scheduler reports it); the leaf-most frame "
             "that matches a rule decides the category (dpuprof/data/rules.toml).",
             "Ranges: 95 % Wilson intervals for shares and Poisson intervals for counts, treating "
             "samples as independent (optimistic for bursty work).",
             "Infrastructure = " + ", ".join(INFRASTRUCTURE) + "; idle is excluded from busy CPU."]
    for v in views:
        for a in T.assumptions(v):
            items.append(a if len(views) == 1 else f"{v.name}: {a}")
    if not any(v.projection for v in views):
        items.append("No projection: the 'Projected with DPU' column is empty. Run "
                     "'dpuprof project RUN.rec' to add it.")
    return "<h2>Method and assumptions</h2><ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>"


# ----------------------------------------------------------------------------- layouts

def _charts(report: Report, progress) -> str:
    from dpuprof.render.charts import to_png
    from dpuprof.render.figures import charts_for

    specs = charts_for(report)
    grids: dict[str, list[str]] = {"": []}  # unpaired charts in one grid, then each A/B pair in a row
    for i, c in enumerate(specs):
        if progress:
            progress.step(f"chart {i + 1}/{len(specs)}: {c.title}")
        grids.setdefault(c.pair, []).append(figure(c.title, c.caption, to_png(c.draw()), c.key))
    return "<h2>Charts</h2>" + "".join(f'<div class="grid{" pair" if pair else ""}">{"".join(figs)}</div>'
                                       for pair, figs in grids.items() if figs)


def _flame(v: RunView, title: str, svg_id: str) -> str:
    from dpuprof.render.flame import tax_svg

    return f'<div class="flamebox">{tax_svg(v.stacks, title, svg_id=svg_id)}</div>'


def body_single(report: Report, progress) -> str:
    v = report.main
    parts = [f"<h1>dpuprof report: {e(v.name)}</h1>", meta_line(v), notes(v.warnings), kpis(v),
             "<h2>Measured, not claimed</h2>",
             "<p>The vendor table, with numbers from this recording. Ranges are 95 % intervals.</p>",
             vendor_table(v), _charts(report, progress)]
    if v.category_split:
        if progress:
            progress.step("flame graph")
        parts += ["<h2>Where the infrastructure tax goes</h2>",
                  "<p>Stacks classified as network, storage, crypto or compression; the bottom row is the "
                  "process. Width is CPU samples.</p>", _flame(v, f"Infrastructure tax — {v.name}", "flame-tax")]
    parts += ["<h2>Breakdown</h2>", breakdown(v), method([v])]
    return "".join(parts)


def body_compare(report: Report, progress) -> str:
    from dpuprof.render.flame import diff_svg

    a, b = report.runs
    parts = [f"<h1>dpuprof comparison: A = {e(a.name)}, B = {e(b.name)}</h1>",
             "<h3>A</h3>", meta_line(a), "<h3>B</h3>", meta_line(b),
             notes([f"A: {w}" for w in a.warnings] + [f"B: {w}" for w in b.warnings])]
    if report.comparison is not None and a.category_split and b.category_split:
        cmp = report.comparison
        parts += ["<h2>Differences and their significance</h2>",
                  "<p>Share of busy CPU samples per category. A change is significant when a two-sided "
                  "two-proportion z-test gives p &lt; 0.05/6 (Bonferroni over six categories); "
                  f"A has {a.busy_samples:,.0f} busy samples, B {b.busy_samples:,.0f}.</p>",
                  table(T.compare_header(a, b), T.compare_rows(cmp, a, b), num_cols=range(1, 8),
                        classes=["sig" if s else "" for s in cmp["significant"]])]
    parts += ["<h2>Measured, not claimed</h2>",
              f"<h3>A: {e(a.name)}</h3>{vendor_table(a)}",
              f"<h3>B: {e(b.name)}</h3>{vendor_table(b)}",
              _charts(report, progress)]
    if a.category_split and b.category_split:
        if progress:
            progress.step("flame graphs")
        parts += ["<h2>Infrastructure tax: what changed</h2>",
                  "<p>Differential flame graph: frames sized by B; red where B spends more of its "
                  "infrastructure samples than A, blue where less (A scaled to B's total).</p>",
                  '<div class="flamebox">' + diff_svg(a.stacks, b.stacks, f"B vs A — {b.name} vs {a.name}",
                                                      INFRASTRUCTURE) + "</div>",
                  '<div class="cols">', f"<div>{_flame(a, f'A: {a.name}', 'flame-a')}</div>",
                  f"<div>{_flame(b, f'B: {b.name}', 'flame-b')}</div></div>"]
    parts += [f"<h2>Breakdown — A: {e(a.name)}</h2>", breakdown(a),
              f"<h2>Breakdown — B: {e(b.name)}</h2>", breakdown(b), method([a, b])]
    return "".join(parts)


def _job(jv) -> str:
    """The job view's identity, spread, stragglers and projections (render/job.py)."""
    from dpuprof.render import job as J

    if jv is None:
        return ""
    lines = J.straggler_lines(jv)
    return "".join([f"<p>Job: {e(jv.identity)}</p>", "<h2>Spread between nodes</h2>",
                    table(J.SPREAD_HEADER, J.spread_rows(jv), num_cols=(1, 2, 3)), "<h2>Stragglers</h2><ul>",
                    "".join(f"<li>{e(ln)}</li>" for ln in lines), "</ul>",
                    "<h2>Projection per node and for the job</h2>",
                    table(J.PROJECTION_HEADER, J.projection_rows(jv),
                          classes=[""] * len(jv.projections) + ["sig"])])


def body_merge(report: Report, progress) -> str:
    t = report.total
    parts = [f"<h1>dpuprof job report: {len(report.runs)} nodes</h1>", meta_line(t), notes(t.warnings),
             kpis(t), "<h2>Per node and total</h2>",
             table(T.NODE_HEADER, T.node_rows(report.runs, t), num_cols=range(2, len(T.NODE_HEADER)),
                   classes=[""] * len(report.runs) + ["sig"]), _job(t.job),
             "<h2>Measured, not claimed (job total)</h2>", vendor_table(t), _charts(report, progress)]
    if t.category_split:
        if progress:
            progress.step("flame graph")
        parts += ["<h2>Where the infrastructure tax goes</h2>",
                  "<p>The bottom rows are the node, then the process.</p>",
                  _flame(t, "Infrastructure tax — all nodes", "flame-tax")]
    parts += ["<h2>Breakdown (job total)</h2>", breakdown(t), method(report.runs)]
    return "".join(parts)


def render_html(report: Report, progress=None) -> str:
    from dpuprof.render import templates

    body = {"single": body_single, "compare": body_compare, "merge": body_merge}[report.kind](report, progress)
    script = templates.read("report.js")
    data = data_for(report)
    if report.kind == "single":  # one shape for scripts reading the page: kind + runs
        data = {"kind": "single", "runs": [data]}
    page = Template(templates.read("report.html")).substitute(
        csp=csp("\n" + script + "\n"),  # the script element's exact text, newlines included
        version=e(__version__),
        title=e(f"dpuprof — {report.title}"),
        style=templates.read("report.css"),
        body=body,
        footer=e(f"Generated by dpuprof {__version__} on "
                 f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. "
                 "Self-contained: no network access needed."),
        data=script_json(data),
        script=script,
    )
    return page


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(render_html(report, progress).encode("utf-8"))
