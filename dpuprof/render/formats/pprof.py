"""``--format pprof``: a gzipped ``profile.proto`` (go tool pprof, Pyroscope, Parca, Grafana).

Sample types, in this order: ``samples/count``, ``cpu/nanoseconds`` (all busy CPU, the default
sample type) and one ``<category>/nanoseconds`` per category (network, storage, crypto, ...). A
stack's sample carries its samples, its CPU ns, and the same CPU ns again in its own category's
column (0 in the others). One sample type per category, rather than a label only, because every
pprof consumer shows sample types: ``go tool pprof -sample_index=crypto``, the SAMPLE menu of
``pprof -http``, and Pyroscope/Parca, which list each sample type as a profile type of its own.
Labels are shown by fewer tools, so each sample also carries the labels ``category``,
``subcategory`` and ``process`` (for ``-tagfocus`` / ``-tags``).

CPU ns = samples x ``period`` (1e9 / sampling frequency, ``period_type cpu/nanoseconds``), as
perf's and Go's own CPU profiles count them; the ``samples`` column is exact. Frames are the ones
the flame graphs and folded output show, the process name as the root frame; a function's name is
the frame's text (``symbol (module)``, kernel frames ``..._[k]``), its system name the bare
symbol, its file name the module. The
recorder's own process is left out (dpuprof.render.view.workload_stack_samples). A comparison
puts ``A: name`` / ``B: name`` above the process frames, like ``--format folded``.

Written with the ``protobuf`` package from the vendored profile.proto (pprof_schema).
"""

from __future__ import annotations

import gzip

import pandas as pd

from dpuprof import __version__
from dpuprof.categories import CATEGORIES
from dpuprof.errors import UserError
from dpuprof.recording.folded import split as split_frames, under
from dpuprof.render.view import Report, require_stacks
from dpuprof.render.output import Rendered

#: sample_type names, in column order
TYPES = ("samples", "cpu") + CATEGORIES


class _Strings:
    def __init__(self, table):
        self.table, self.index = table, {}
        self("")

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def _split(frame: str) -> tuple[str, str]:
    """``"symbol (module)"`` -> (symbol, module); other frames -> (frame, "")."""
    if frame.endswith(")") and " (" in frame:
        i = frame.rindex(" (")
        return frame[:i], frame[i + 2:-1]
    return frame, ""


def _stacks(report: Report) -> pd.DataFrame:
    if report.kind != "compare":
        return report.main.stacks
    return pd.concat([v.stacks.assign(folded=under(f"{tag}: {v.name}", v.stacks["folded"]))
                      for tag, v in zip("AB", report.runs)], ignore_index=True)


def build_profile(report: Report):
    """The ``perftools.profiles.Profile`` message of ``report`` (not yet serialised)."""
    try:
        from dpuprof.render.formats.pprof_schema import profile_class  # noqa: PLC0415 -- a missing protobuf is one error line
    except ImportError:
        raise UserError("--format pprof needs the protobuf package: pip install protobuf") from None
    v = report.main
    hz = v.export_freq_hz
    period = int(round(1e9 / hz))
    prof = profile_class()()
    s = _Strings(prof.string_table)
    for name in TYPES:
        prof.sample_type.add(type=s(name), unit=s("count" if name == "samples" else "nanoseconds"))
    prof.default_sample_type = s("cpu")
    prof.period_type.type, prof.period_type.unit, prof.period = s("cpu"), s("nanoseconds"), period
    start = v.meta.start_time
    if v.recording is not None and not v.recording.table("intervals").empty:
        start = float(v.recording.table("intervals")["t_start"].min())  # the window's start with --time
    if start is not None:
        prof.time_nanos = int(start * 1e9)
    prof.duration_nanos = int(v.duration_s * 1e9)
    prof.comment.append(s(f"dpuprof {__version__}: {report.title}; cpu ns = samples x {period} ns"))
    for w in v.warnings:  # the time window, the data lost (as shares, worst first), the recorder
        if w.startswith(("time window", "data lost", "the recorder")):
            prof.comment.append(s(w))
    locations: dict[str, int] = {}

    def location(frame: str) -> int:
        if frame not in locations:
            fid = len(locations) + 1
            symbol, module = _split(frame)
            # name: the frame as the flame graphs show it; system_name: the bare symbol. pprof
            # re-simplifies a name only when it equals system_name, and would then cut "(module)".
            prof.function.add(id=fid, name=s(frame), system_name=s(symbol), filename=s(module))
            prof.location.add(id=fid).line.add(function_id=fid)
            locations[frame] = fid
        return locations[frame]

    agg = _stacks(report).groupby(["folded", "category", "subcategory"], as_index=False)["samples"].sum()
    for folded, cat, sub, n in agg.sort_values("folded").itertuples(index=False):
        n = int(round(n))
        if n <= 0:
            continue
        frames = split_frames(str(folded))
        values = [n, n * period] + [n * period if c == cat else 0 for c in CATEGORIES]
        sample = prof.sample.add(location_id=[location(f) for f in reversed(frames)], value=values)
        for key, text in (("category", cat), ("subcategory", sub), ("process", frames[0])):
            sample.label.add(key=s(key), str=s(str(text)))
    return prof


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    require_stacks(report, "pprof")
    data = build_profile(report).SerializeToString()
    return Rendered(gzip.compress(data, mtime=0), binary=True)
