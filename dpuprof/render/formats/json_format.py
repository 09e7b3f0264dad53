"""``--format json``: the summary contract of ``dpuprof.recording.summary`` (record issue), plus a
``projection`` key when a projection exists.

Beside the summary, per run (dpuprof/render/gpu.py, steps.py): ``gpu`` (devices, per-process
shares, the per-interval timeline; null without GPU samples, then ``gpu_note`` says why), ``steps``
(summary and per-step table; null without step markers) and ``kernel_by_cause`` (kernel work by the
user-space work that caused it, dpuprof/render/causes.py; null without causes).

Several recordings: ``{"kind": "compare"|"merge", "runs": [summary, ...]}`` plus ``comparison``
(per-category shares and the z-test) and ``projection_check`` (A's projection held against B, with
its units: dpuprof/render/projection_check.py) or ``total`` (the job view: the summary of the nodes' merged
tables, with ``job``: per-node rows, spread, stragglers and projections, render/job.py).
"""

from __future__ import annotations

import json

from dpuprof.render.causes import as_records, cause_frame
from dpuprof.render.compare import comparison_json
from dpuprof.render.gpu import gpu_view
from dpuprof.render.output import Rendered
from dpuprof.render.steps import steps_view
from dpuprof.render.view import Report


def summary_data(v) -> dict:
    """A view's summary with its projection (the Projection as JSON), before the job view's
    ``job`` key where there is one: the order the contract has always printed."""
    contract = v.summary.contract
    if v.projection is None:
        return contract
    out = {k: x for k, x in contract.items() if k != "job"}
    out["projection"] = v.projection.as_json()
    if "job" in contract:
        out["job"] = contract["job"]
    return out


def run_data(v) -> dict:
    """A run's summary plus its GPU and per-step views (where it has its recording)."""
    if v.recording is None:  # a merged cluster total: each node carries its own
        return summary_data(v)

    gpu, note = gpu_view(v.recording)
    steps = steps_view(v.recording)
    extra = {"gpu": None if gpu is None else gpu.as_dict(), "steps": None if steps is None else steps.as_dict(),
             "kernel_by_cause": as_records(cause_frame(v.recording))}
    if note:
        extra["gpu_note"] = note
    return dict(summary_data(v), **extra)


def data_for(report: Report) -> dict:
    """The JSON object for ``report`` (also embedded in the HTML report)."""
    if report.kind == "single":
        return run_data(report.main)
    out = {"kind": report.kind, "runs": [run_data(v) for v in report.runs]}
    if report.total is not None:
        out["total"] = summary_data(report.total)
    if report.comparison is not None:
        out["comparison"] = comparison_json(report.comparison)
    if report.check is not None:
        out["projection_check"] = report.check.as_json()
    return out


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    text = json.dumps(data_for(report), indent=2, allow_nan=False)
    return Rendered((text + "\n").encode("utf-8"))
