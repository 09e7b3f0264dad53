"""``--format json``: the summary contract of ``dpuprof.recording.summary`` (record issue), plus a
``projection`` key when a projection exists.

Several recordings: ``{"kind": "compare"|"merge", "runs": [summary, ...]}`` plus ``comparison``
(per-category shares and the z-test) or ``total`` (the job view: the summary of the nodes' merged
tables, with ``job``: per-node rows, spread, stragglers and projections, render/job.py).
"""

from __future__ import annotations

import json

from dpuprof.render.view import Report
from dpuprof.render.output import Rendered


def data_for(report: Report) -> dict:
    """The JSON object for ``report`` (also embedded in the HTML report)."""
    from dpuprof.render.compare import comparison_json

    if report.kind == "single":
        return report.main.summary
    out = {"kind": report.kind, "runs": [v.summary for v in report.runs]}
    if report.total is not None:
        out["total"] = report.total.summary
    if report.comparison is not None:
        out["comparison"] = comparison_json(report.comparison)
    return out


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    text = json.dumps(data_for(report), indent=2, allow_nan=False)
    return Rendered((text + "\n").encode("utf-8"))
