"""One builder for the synthetic recordings of unit tests, written with the real RecordingWriter.

A synthetic recording is a test input for a pure function or a CLI path (bad input, hostile
strings, a cut-short file); realism comes from the fixtures. Each call names only what its test is
about; everything else has one default here::

    path = make_recording(tmp_path, intervals=3, cpu=[(42, "network", "network.tcpip", 10, 0.1)],
                          stacks=[(1, "a;b_[k]", "network", "network.tcpip")])

Rows are the writer's own tuples (dpuprof/recording/schema.py and RecordingWriter.write_interval):
``cpu`` are cpu_category rows (pid, category, subcategory, samples, cpu_s); ``tables`` any other
tables by name; ``processes`` (pid, ppid, comm, cmdline, in_workload, first_seen, last_seen);
``stacks`` (stack_id, folded, category, subcategory[, cause]). Interval i spans
[t0 + i * interval_s, t0 + (i + 1) * interval_s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from dpuprof.recording.writer import RecordingWriter

META = {"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2}


def _per_interval(value, i: int):
    """``value`` itself, or ``value(i)`` when it is a function of the interval index."""
    return value(i) if callable(value) else value


def open_recording(where: Path, *, name: str = "synthetic.rec", meta: dict | None = None,
                   intervals: int = 1, t0: float = 100.0, interval_s: float = 1.0,
                   cpu: list | Callable | None = None, tables: dict | Callable | None = None,
                   processes: list | Callable = (), stacks: list = ()) -> tuple[Path, RecordingWriter]:
    """Write ``intervals`` intervals and return (path, the still-open writer).

    ``where``: a directory (the file is ``where/name``) or the file's path. ``meta``: the whole
    metadata (default META). ``cpu``, ``tables`` and ``processes`` are written in every interval;
    each may instead be a function of the interval index (called once per interval, in order).
    ``stacks`` go with the first interval."""
    where = Path(where)
    path = where / name if where.is_dir() else where
    w = RecordingWriter(path, dict(META if meta is None else meta))
    for i in range(intervals):
        rows = {} if cpu is None else {"cpu_category": _per_interval(cpu, i)}
        rows.update(_per_interval(tables, i) or {})
        w.write_interval(i, t0 + i * interval_s, t0 + (i + 1) * interval_s, rows,
                         processes=_per_interval(processes, i), stacks=stacks if i == 0 else ())
    return path, w


def make_recording(where: Path, *, close: bool = True, final: dict | None = None, **spec) -> Path:
    """Write a synthetic recording (``spec``: open_recording's arguments) and return its path.

    ``close``: write the final metadata (``final``: the writer's close() keywords, e.g. end_time,
    exit_code) and close; False leaves it as a recorder killed mid-run leaves it (not complete)."""
    path, w = open_recording(where, **spec)
    if close:
        w.close(**(final or {}))
    return path
