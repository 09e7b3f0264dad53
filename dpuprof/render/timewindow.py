"""``dpuprof report --time START:END|steady``: a Recording cut to a time window.

The window is chosen by :mod:`dpuprof.projection.window` (the same rule ``dpuprof project --time``
uses: an interval belongs to a window when its midpoint lies inside it, so adjacent windows
``0:10`` and ``10:20`` share no interval and their totals add up to those of ``0:20``). Every
per-interval table keeps only the window's intervals; ``markers`` keep the hits inside the window;
the tables without an interval column (processes, threads, stacks) are kept whole.

Stack samples merged into buckets at the end of a long run (meta ``stack_buckets``: a row named
by its bucket's first interval holds the samples of ``intervals`` intervals) are pro-rated: a
bucket counts with the share of its intervals inside the window, rounded to whole samples, so a
window inside a bucket still has its stacks (at the bucket's resolution, not the interval's).
"""

from __future__ import annotations

import numpy as np

from dpuprof.recording.reader import Recording
from dpuprof.projection.window import choose, parse_range


def choose_window(rec: Recording, requested):
    """The :class:`dpuprof.projection.window.Window` of ``rec`` for ``requested`` ((start, end) s or
    "steady"). UserError when an explicit range holds no interval."""
    return choose(rec.table("intervals"), rec.table("cpu_category"), rec.workload_pids,
                  rec.table("markers"), requested)


def cut(rec: Recording, window) -> Recording:
    """A new Recording holding only ``window``'s intervals (``rec`` is left as it is)."""
    keep = set(window.intervals)
    iv = rec.table("intervals")
    frames = {}
    for name in rec._frames:
        df = rec.table(name)
        if name == "stack_samples" and rec.meta.get("stack_buckets"):
            df = _prorated_buckets(df, keep, rec.meta["stack_buckets"])
        elif "interval" in df.columns:
            df = df[df["interval"].isin(keep)].reset_index(drop=True)
        frames[name] = df
    inside = iv[iv["interval"].isin(keep)]
    if not inside.empty and not rec.table("markers").empty:
        m = rec.table("markers")
        frames["markers"] = m[(m["t"] >= inside["t_start"].min()) & (m["t"] < inside["t_end"].max())]
    meta = dict(rec.meta, window=window.as_dict())
    return Recording(rec.path, meta, frames)


def _prorated_buckets(ss, keep: set, buckets: dict):
    """``stack_samples`` (interval, pid, stack_id, samples) for the intervals in ``keep``; a
    bucket row (interval < buckets["before"]) holds intervals [interval, interval +
    buckets["intervals"]) and keeps the share of its samples that fell inside, rounded."""
    before, width = int(buckets["before"]), int(buckets["intervals"])
    iv = ss["interval"].to_numpy()
    share = np.where(iv < before, 0.0, ss["interval"].isin(keep).to_numpy().astype(float))
    for start in np.unique(iv[iv < before]):
        inside = sum(1 for i in range(int(start), int(start) + width) if i in keep)
        share[iv == start] = inside / width
    samples = np.rint(ss["samples"].to_numpy() * share).astype(ss["samples"].dtype)
    out = ss.assign(samples=samples)
    return out[samples > 0].reset_index(drop=True)


def windowed(rec: Recording, time_range: str | None) -> Recording:
    """``rec`` cut to ``--time time_range`` (None: the whole recording)."""
    if not time_range:
        return rec

    return cut(rec, choose_window(rec, parse_range(time_range)))
