"""A run's facts for the projection check (:mod:`dpuprof.render.projection_check`), read from its
loaded Recording, and the check of a comparison's two views.

The steady window is the one ``dpuprof project`` and ``--time steady`` use
(:func:`dpuprof.projection.window.choose`); a window that falls back to the whole recording
(too short, or no workload CPU, to tell start-up apart) counts as none. Steps are the step markers
of one rank (:func:`dpuprof.render.steps.step_marks`) that lie inside the window; CPU is the busy
CPU of the workload's processes (the job's process tree: other work on the host is not the job's,
and on a shared machine it would swamp the difference), apportioned by time overlap
(:func:`dpuprof.render.steps.apportion`) to the span the steady steps cover, else to the steady
window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpuprof.categories import NOT_WORK
from dpuprof.projection.window import choose
from dpuprof.render.projection_check import ProjectionCheck, RunFacts, check
from dpuprof.render.steps import apportion, step_marks
from dpuprof.render.view import RunView

#: how the window module says it fell back to the whole recording
_NO_WINDOW = "the whole recording"


def facts_of(v: RunView) -> RunFacts:
    """The RunFacts of a view that holds its Recording (``v.recording``)."""
    rec = v.recording
    iv, cpu, markers = rec.table("intervals"), rec.table("cpu_category"), rec.table("markers")
    command = tuple(map(str, v.meta.command)) if v.meta.command is not None else None
    win = choose(iv, cpu, set(rec.workload_pids), markers, "steady")
    if iv.empty or not win.intervals or win.how.startswith(_NO_WINDOW):
        return RunFacts(v.name, command, v.category_split, None, None, win.how, 0.0)
    t0 = float(iv["t_start"].min())
    lo, hi = t0 + win.start, t0 + win.end
    marks = step_marks(markers)
    kind, walls, span = None, (), (lo, hi)
    if marks is not None:
        kind, _pid, _ranks, t = marks
        edges = t[(t >= lo - 1e-6) & (t <= hi + 1e-6)]
        if len(edges) >= 2:
            walls, span = tuple(float(x) for x in np.diff(edges)), (float(edges[0]), float(edges[-1]))
    busy = cpu[~cpu["category"].isin(NOT_WORK) & cpu["pid"].isin(set(rec.workload_pids))]
    return RunFacts(v.name, command, v.category_split, kind, win.length_s, win.how, span[1] - span[0],
                    walls, _over(iv, busy, "category", span), _over(iv, busy, "subcategory", span))


def _over(iv: pd.DataFrame, busy: pd.DataFrame, key: str, span: tuple[float, float]) -> dict[str, float]:
    """CPU seconds per ``key`` value inside ``span`` (unix s), apportioned by overlap."""
    if busy.empty:
        return {}
    per = busy.pivot_table(index="interval", columns=key, values="cpu_s", aggfunc="sum").fillna(0.0)
    row = apportion(iv[["interval", "t_start", "t_end"]], per, np.array(span, dtype=float)).iloc[0]
    return {str(k): float(x) for k, x in row.items()}


def check_views(a: RunView, b: RunView) -> ProjectionCheck:
    """The check of A's projection (``a.projection``) against B."""
    return check(facts_of(a), facts_of(b), a.projection)
