"""``--format speedscope``: a speedscope file (https://www.speedscope.app/file-format-schema.json).

Sampled profiles weighted in seconds of CPU: one for all busy CPU and one per infrastructure
category present, so speedscope's profile menu switches between "all" and "network" and so on.
A comparison has these per run; a cluster's stacks start with the node.
"""

from __future__ import annotations

import json

import pandas as pd

from dpuprof import __version__
from dpuprof.categories import INFRASTRUCTURE
from dpuprof.recording.folded import split as split_frames
from dpuprof.render.view import Report, RunView, require_stacks
from dpuprof.render.output import Rendered

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _frame_index(frames: list[dict], index: dict[str, int], name: str) -> int:
    i = index.get(name)
    if i is None:
        i = index[name] = len(frames)
        entry = {"name": name}
        if name.endswith(")") and " (" in name:  # "symbol (module)": speedscope shows file separately
            entry["file"] = name[name.rindex(" (") + 2:-1]
        frames.append(entry)
    return i


def _profile(name: str, stacks: pd.DataFrame, hz: float, frames, index) -> dict:
    agg = stacks.groupby("folded")["samples"].sum().sort_index()
    samples, weights = [], []
    for folded, n in agg.items():
        if n <= 0:
            continue
        samples.append([_frame_index(frames, index, f) for f in split_frames(str(folded))])
        weights.append(round(float(n) / hz, 9))
    return {"type": "sampled", "name": name, "unit": "seconds", "startValue": 0,
            "endValue": round(sum(weights), 9), "samples": samples, "weights": weights}


def _profiles(v: RunView, label: str, frames, index) -> list[dict]:
    hz = v.export_freq_hz
    out = [_profile(f"{label}all busy CPU", v.stacks, hz, frames, index)]
    for cat in INFRASTRUCTURE:
        part = v.stacks[v.stacks["category"] == cat]
        if not part.empty:
            out.append(_profile(f"{label}{cat}", part, hz, frames, index))
    return out


def speedscope_file(report: Report) -> dict:
    frames: list[dict] = []
    index: dict[str, int] = {}
    if report.kind == "compare":
        profiles = [p for tag, v in zip("AB", report.runs) for p in _profiles(v, f"{tag} {v.name}: ", frames, index)]
    else:
        profiles = _profiles(report.main, "", frames, index)
    return {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": profiles,
            "name": f"dpuprof: {report.title}", "activeProfileIndex": 0, "exporter": f"dpuprof {__version__}"}


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    require_stacks(report, "speedscope")
    return Rendered(json.dumps(speedscope_file(report), separators=(",", ":"), allow_nan=False).encode("utf-8"))
