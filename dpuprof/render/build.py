"""Load recordings (and their projections) into a Report: one run, a comparison, or a job view.

How several recordings are combined, unless ``--compare`` or ``--merge`` says
(:mod:`dpuprof.render.job_identity` decides what "one job" means):

- one recording: a single-run report;
- recordings that are the nodes of one job (the same job id, or the same command, overlapping in
  time, on distinct hosts): the job view;
- two recordings that are not: compared (A = first = before, B = second = after);
- three or more that are not: refused with the reason, unless ``--merge`` merges them anyway.
"""

from __future__ import annotations

from pathlib import Path

from dpuprof.errors import UserError


def check_count(count: int, mode: str | None) -> None:
    """UserError when ``--compare`` is not given exactly two recordings, or ``--merge`` fewer than two."""
    if mode == "compare" and count != 2:
        raise UserError(f"--compare takes exactly two recordings, A (before) and B (after); got {count}")
    if mode == "merge" and count < 2:
        raise UserError(f"--merge takes two or more recordings (the nodes of one job); got {count}")


def choose_mode(recs, names: list[str], mode: str | None) -> tuple[str, str | None]:
    """("single" | "compare" | "merge", why the recordings are not one job or None)."""
    from dpuprof.render.job_identity import identity, why_not_one_job

    check_count(len(recs), mode)
    if len(recs) == 1:
        return "single", None
    why = why_not_one_job([identity(r, n) for r, n in zip(recs, names)])
    if mode:
        return mode, why
    if why is None:
        return "merge", None
    if len(recs) == 2:
        return "compare", why
    raise UserError(f"not one job, so no job view: {why}; --merge merges them anyway")


def view_of(item):
    """The RunView of one recording (``item`` = (path, display name, --projection, --time)),
    holding the loaded (windowed) Recording as ``recording``. Top-level, so a worker process can
    run it (:mod:`dpuprof.render.parallel`)."""
    from dpuprof.recording import load
    from dpuprof.render import projection_file as proj_mod
    from dpuprof.render.timewindow import windowed
    from dpuprof.render.view import build_view

    path, name, projection, time_range = item
    rec = windowed(load(path), time_range)
    proj, warns = proj_mod.load(rec.path, projection)
    if time_range and proj is not None:
        # a projection's per-category totals cover the whole recording: set beside a window's
        # measured CPU they would compare different spans, so a windowed report leaves it out
        proj, warns = None, ["--time: the projection is left out (its CPU totals cover the whole "
                             "recording); see 'dpuprof project --time' for a window's speedup"]
    view = build_view(rec, proj, warns, name=name)
    view.recording = rec
    return view


def build_report(paths: list[Path], *, mode: str | None = None, projection: str | None = None,
                 progress=None, time_range: str | None = None, workers: int | None = None):
    """Load ``paths`` and return the Report for ``mode`` ("compare", "merge" or None = automatic).

    ``time_range``: ``--time START:END|steady`` (each recording cut to its own window, see
    :mod:`dpuprof.render.timewindow`); None for the whole recordings. ``workers``: processes that
    load the recordings and draw the charts (None: one per CPU, 1: this process;
    :mod:`dpuprof.render.parallel`, :mod:`dpuprof.render.chartpool`).
    """
    from dpuprof.render.compare import compare_views
    from dpuprof.render.merge import merge_views
    from dpuprof.render.parallel import run_all
    from dpuprof.render.view import Report, display_names

    check_count(len(paths), mode)  # before any recording is read
    if projection and len(paths) != 1:
        raise UserError("--projection applies to a single recording; for several, each is read "
                        "from its own RUN.proj.json (see dpuprof report --help)")
    names = display_names([Path(p) for p in paths])

    def done(i, n):
        if progress:
            progress.step(f"loaded {i}/{n} recordings")

    views = run_all(view_of, [(Path(p), n, projection, time_range) for p, n in zip(paths, names)],
                    workers, on_done=done)
    kind, why_not_one_job = choose_mode([v.recording for v in views], names, mode)
    if kind == "single":
        return Report("single", views, workers=workers)
    if kind == "compare":
        from dpuprof.render.check_facts import check_views

        return Report("compare", views, comparison=compare_views(views[0], views[1]),
                      check=check_views(views[0], views[1]), workers=workers)
    if progress:
        progress.step(f"merging {len(views)} nodes")
    return Report("merge", views, total=merge_views(views, why_not_one_job), workers=workers)
