"""``--format perfetto``: Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).

One counter track ("ph": "C") per category in cores, and counters for network and disk throughput
(MB/s) and IOPS, all over the recording's time. Each run (or node) is a process in the trace.
Timestamps are microseconds since the run's start; every counter drops to 0 where the run ends.
"""

from __future__ import annotations

import json

from dpuprof.render.model import Report, RunView
from dpuprof.render.output import Rendered

IO_TRACKS = {"net_tx": ("net tx MB/s", 1e-6), "net_rx": ("net rx MB/s", 1e-6),
             "disk_read": ("disk read MB/s", 1e-6), "disk_write": ("disk write MB/s", 1e-6),
             "read_iops": ("read IOPS", 1.0), "write_iops": ("write IOPS", 1.0)}


def _counters(df, pid: int, names: dict, end_s: float) -> list[dict]:
    events = []
    for col, (name, scale) in names.items():
        if col not in df.columns:
            continue
        for t, value in df[col].items():
            events.append({"name": name, "ph": "C", "ts": round(float(t) * 1e6, 3), "pid": pid, "tid": 0,
                           "args": {"value": round(float(value) * scale, 6)}})
        events.append({"name": name, "ph": "C", "ts": round(end_s * 1e6, 3), "pid": pid, "tid": 0,
                       "args": {"value": 0}})
    return events


def run_events(v: RunView, pid: int) -> list[dict]:
    events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"dpuprof: {v.name}"}},
              {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}]
    end_s = max(v.duration_s, float(v.timeline.index.max()) if len(v.timeline) else 0.0)
    unit = "cores" if v.category_split else "cpu s/s"
    events += _counters(v.timeline, pid, {c: (f"cpu {c} ({unit})", 1.0) for c in v.timeline.columns}, end_s)
    events += _counters(v.io, pid, IO_TRACKS, end_s)
    return events


def trace(report: Report) -> dict:
    views = report.runs if report.kind != "single" else [report.main]
    events = []
    for pid, v in enumerate(views, start=1):
        events += run_events(v, pid)
    if report.total is not None:
        events += run_events(report.total, len(views) + 1)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": {"source": "dpuprof", "report": report.title}}


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(json.dumps(trace(report), separators=(",", ":"), allow_nan=False).encode("utf-8"))
