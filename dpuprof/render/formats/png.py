"""``--format png``: the report's charts on one page (two per row), as a single PNG image."""

from __future__ import annotations

from dpuprof.render.figures import charts_for
from dpuprof.render.output import Rendered
from dpuprof.render.view import Report


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    from dpuprof.render.charts import dashboard, to_png

    specs = charts_for(report)
    if progress:
        progress.step(f"drawing {len(specs)} charts")
    fig = dashboard([c.draw for c in specs], f"dpuprof report: {report.title}")
    return Rendered(to_png(fig, dpi=80), binary=True)
