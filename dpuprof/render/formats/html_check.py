"""The HTML panel of the projection check (reports/templates/sections/check.html): the check's
rows (render/check_rows.py) and a chart of projected against achieved speedup, drawn as inline SVG
(no script, no image file: the page stays one self-contained file under its CSP).

The chart has one row per estimate on a shared speedup axis: the projection (a dot at expected,
whiskers from low to high; an unbounded high runs to the axis end with an arrow) and the
measurement (a dot, whiskers over its bootstrap 95 % interval), with a dashed line at 1.0x.
"""

from __future__ import annotations

from html import escape

from dpuprof.render import check_rows as C
from dpuprof.render.projection_check import ProjectionCheck

W, ROW_H, LEFT, RIGHT, TOP = 560, 34, 150, 20, 14


def speedup_svg(chk: ProjectionCheck) -> str | None:
    """The chart as an ``<svg>`` string, or None without a measured speedup."""
    sp = chk.speedup
    if sp is None:
        return None
    finite = [v for v in (sp.low, sp.expected, sp.high, sp.ci_low, sp.ci_high, sp.measured, 1.0) if v is not None]
    lo, hi = min(finite), max(finite)
    pad = 0.08 * (hi - lo or 1.0)
    lo, hi = max(0.0, lo - pad), hi + pad

    def x(v: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * (v - lo) / (hi - lo)

    rows = [("projected (low–high)", sp.low if sp.low is not None else lo, sp.expected, sp.high, "#8a8a8a"),
            ("measured (95 % interval)", sp.ci_low, sp.measured, sp.ci_high, "#c0392b" if not sp.inside else "#2e7d32")]
    height = TOP + ROW_H * len(rows) + 28
    out = [f'<svg class="check-chart" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
           f'viewBox="0 0 {W} {height}" role="img" aria-label="projected against measured speedup">']
    base = TOP + ROW_H * len(rows)
    out.append(f'<line x1="{x(1.0):.1f}" y1="{TOP - 6}" x2="{x(1.0):.1f}" y2="{base}" stroke="#999" '
               'stroke-dasharray="3,3"/>')
    for i, (label, a, mid, b, colour) in enumerate(rows):
        y = TOP + ROW_H * i + ROW_H / 2
        end = x(b) if b is not None else W - RIGHT
        out.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="12">'
                   f'{escape(label)}</text>')
        out.append(f'<line x1="{x(a):.1f}" y1="{y:.1f}" x2="{end:.1f}" y2="{y:.1f}" stroke="{colour}" '
                   'stroke-width="2"/>')
        for edge in (x(a), end) if b is not None else (x(a),):
            out.append(f'<line x1="{edge:.1f}" y1="{y - 7:.1f}" x2="{edge:.1f}" y2="{y + 7:.1f}" '
                       f'stroke="{colour}" stroke-width="2"/>')
        if b is None:
            out.append(f'<text x="{end - 4:.1f}" y="{y - 5:.1f}" text-anchor="end" font-size="11">unbounded →</text>')
        if mid is not None:
            out.append(f'<circle cx="{x(mid):.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>')
            out.append(f'<text x="{x(mid):.1f}" y="{y - 9:.1f}" text-anchor="middle" font-size="11">{mid:.2f}x</text>')
    for t in _ticks(lo, hi):
        out.append(f'<text x="{x(t):.1f}" y="{base + 16}" text-anchor="middle" font-size="11">{t:g}x</text>')
    out.append("</svg>")
    return "".join(out)


def _ticks(lo: float, hi: float) -> list[float]:
    step = next(s for s in (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 1e9) if (hi - lo) / s <= 8)
    first = step * int(lo / step + 0.999999)
    return [round(first + k * step, 6) for k in range(int((hi - first) / step) + 1)]


def check_context(chk: ProjectionCheck | None) -> dict | None:
    """The panel's template context: ``cannot`` lines, or title, intro, the CPU table, the
    speedup line and chart, and the findings; None outside a comparison."""
    if chk is None:
        return None
    if not chk.made:
        return {"cannot": C.cannot_lines(chk)}
    return {"cannot": [], "title": C.TITLE, "intro": C.intro(chk), "speedup": C.speedup_line(chk),
            "svg": speedup_svg(chk), "findings": C.finding_lines(chk),
            "table": {"header": C.CPU_HEADER, "rows": C.cpu_rows(chk), "num_cols": range(1, 6)},
            "inside": chk.speedup is not None and chk.speedup.inside}
