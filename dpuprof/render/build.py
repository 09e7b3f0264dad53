"""Load recordings (and their projections) into a Report: one run, a comparison, or a cluster.

How several recordings are combined, unless ``--compare`` or ``--merge`` says:

- one recording: a single-run report;
- two recordings: merged when they look like two nodes of one job -- different hosts whose
  recordings overlap in time -- and compared (A = first = before, B = second = after) otherwise;
- three or more: merged (a comparison takes exactly two).
"""

from __future__ import annotations

from pathlib import Path

from dpuprof.errors import UserError


def one_job(recs) -> bool:
    """True when ``recs`` look like the nodes of one job: distinct hosts, overlapping in time."""
    hosts = [r.meta.get("host") for r in recs]
    if None in hosts or len(set(hosts)) < len(hosts):
        return False
    spans = []
    for r in recs:
        iv = r.table("intervals")
        if iv.empty:
            return False
        spans.append((float(iv["t_start"].min()), float(iv["t_end"].max())))
    return max(s for s, _ in spans) < min(e for _, e in spans)


def choose_mode(recs, mode: str | None) -> str:
    if len(recs) == 1:
        return "single"
    if mode == "compare" and len(recs) != 2:
        raise UserError(f"--compare takes exactly two recordings (got {len(recs)}); "
                        "use --merge for the nodes of one job")
    if mode:
        return mode
    if len(recs) == 2 and not one_job(recs):
        return "compare"
    return "merge"


def build_report(paths: list[Path], *, mode: str | None = None, projection: str | None = None,
                 progress=None, time_range: str | None = None):
    """Load ``paths`` and return the Report for ``mode`` ("compare", "merge" or None = automatic).

    ``time_range``: ``--time START:END|steady`` (each recording cut to its own window, see
    :mod:`dpuprof.render.timewindow`); None for the whole recordings.
    """
    from dpuprof.recording import load
    from dpuprof.render import projection_file as proj_mod
    from dpuprof.render.compare import compare_views
    from dpuprof.render.merge import merge_views
    from dpuprof.render.view import Report, build_view, display_names
    from dpuprof.render.timewindow import windowed

    if projection and len(paths) != 1:
        raise UserError("--projection applies to a single recording; for several, each is read "
                        "from its own RUN.proj.json (see dpuprof report --help)")
    recs = []
    for i, p in enumerate(paths):
        if progress:
            progress.step(f"loading {p.name} ({i + 1}/{len(paths)})")
        recs.append(windowed(load(p), time_range))
    kind = choose_mode(recs, mode)
    names = display_names([Path(p) for p in paths])
    views = []
    for rec, name in zip(recs, names):
        proj, warns = proj_mod.load(rec.path, projection)
        if time_range and proj is not None:
            # a projection's per-category totals cover the whole recording: set beside a window's
            # measured CPU they would compare different spans, so a windowed report leaves it out
            proj, warns = None, ["--time: the projection is left out (its CPU totals cover the whole "
                                 "recording); see 'dpuprof project --time' for a window's speedup"]
        view = build_view(rec, proj, warns, name=name)
        view.recording = rec
        views.append(view)
    if kind == "single":
        return Report("single", views)
    if kind == "compare":
        return Report("compare", views, comparison=compare_views(views[0], views[1]))
    return Report("merge", views, total=merge_views(views))
