"""``dpuprof report``: charts, tables and exports from one or more recordings.

What this module imports at load is light (click, the renderer registry, the report's entry
points, which import pandas and matplotlib themselves when a report is made), so ``dpuprof --help``
stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dpuprof.cli.common import resolve_recording
from dpuprof.errors import UserError
from dpuprof.render import chartpool, registry
from dpuprof.render.build import build_report, check_count
from dpuprof.render.output import check_target, emit
from dpuprof.render.progress import Progress

EPILOG = """\b
Examples:
  dpuprof report                                   # newest *.rec here (+ its RUN.proj.json)
  dpuprof report run.rec -o report.html            # one self-contained HTML file
  dpuprof report run.rec -o report.md              # markdown + PNG files beside it
  dpuprof report before.rec after.rec -o diff.html # compare two runs (A = before, B = after)
  dpuprof report node-*.rec -o job.html           # the job view: per node, spread, stragglers
  dpuprof report a.rec b.rec c.rec --merge         # merge recordings that are not one job anyway
  dpuprof report run.rec --format speedscope -o run.speedscope.json
  dpuprof report run.rec --format folded | flamegraph.pl > run.svg
  dpuprof report run.rec --format json
  dpuprof report run.rec --time steady             # after warm-up only (step markers or the data)
  dpuprof report run.rec --time 30:90 -o mid.html  # seconds 30 to 90 of the run
  dpuprof report run.rec -o run.pb.gz              # pprof (go tool pprof, Pyroscope, Parca)

\b
The format comes from --format, else from the output's extension:
  .html .md .png .json .speedscope.json .trace.json/.perfetto.json .folded .pb.gz .txt
With no -o the terminal summary goes to standard output.

\b
The projection of DIR/RUN.rec is read from ./RUN.proj.json (where dpuprof project writes it)
when its checksum matches the recording, else from DIR/RUN.proj.json; --projection names it.

\b
Several recordings make a job view when they are the nodes of one job: the same job id
(record --job-id, $SLURM_JOB_ID or $TORCHELASTIC_RUN_ID), or without job ids the same command;
overlapping in time; each from another host. Two recordings that are not one job are compared
(A = first, B = second); three or more are refused with the reason, unless --merge is given.
--compare takes exactly two recordings, --merge two or more.
"""


@click.command(epilog=EPILOG)
@click.argument("recordings", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="FILE", help="Write here ('-' = standard output).")
@click.option("--format", "fmt", type=click.Choice(registry.names()), default=None,
              help="Output format (default: from the -o extension, else terminal).")
@click.option("--compare", "mode", flag_value="compare", default=None,
              help="Compare two recordings (A = first, B = second).")
@click.option("--merge", "mode", flag_value="merge",
              help="Merge the recordings into a job view even when they do not look like one job.")
@click.option("--projection", type=click.Path(dir_okay=False), metavar="FILE",
              help="Projection to draw (default: ./RUN.proj.json made from this RUN.rec, else "
                   "RUN.proj.json beside RUN.rec, if present).")
@click.option("--time", "time_range", default=None, metavar="START:END|steady",
              help="Report on a window only: seconds from the start, or 'steady' (after warm-up, "
                   "from step markers or the data). Default: the whole recording.")
@click.option("-j", "--jobs", "workers", type=click.IntRange(1, 256), default=None, metavar="N",
              help="Processes that load the recordings and draw the charts (default: one per CPU; "
                   "1 = no extra processes).")
@click.option("-q", "--quiet", is_flag=True, help="No progress line on stderr.")
def report(recordings, output, fmt, mode, projection, time_range, workers, quiet):
    """Report on RECORDINGS (default: the newest *.rec in this directory)."""
    try:
        name = registry.choose(fmt, output)
    except ValueError as err:
        raise UserError(str(err)) from None
    if time_range is not None:
        # here, not at the top: its module imports pandas (0.40-0.58 s after dpuprof.cli is loaded,
        # time.perf_counter around the import, 2-CPU VM), which --help and a bad option never need
        from dpuprof.projection.window import parse_range

        parse_range(time_range)  # a bad range fails here, before any recording is read
    if name in registry.NEEDS_FILE and output in (None, "-"):
        raise UserError(f"--format {name} needs an output file: -o FILE.{name}")
    paths = [Path(p) for p in recordings] or [resolve_recording(None)]
    check_count(len(paths), mode)  # --compare takes two, --merge two or more: before any work
    if output not in (None, "-"):
        check_target(Path(output), inputs=paths)  # fail before the work, not after
    if name == "html" or (name == "markdown" and output not in (None, "-")):
        chartpool.prestart(workers)  # a worker imports matplotlib while the recordings load
    progress = Progress(enabled=False if quiet else None)
    try:
        rep = build_report(paths, mode=mode, projection=projection, progress=progress,
                           time_range=time_range, workers=workers)
        progress.step(f"rendering {name}")
        stem = registry.stem(Path(output).name) if output not in (None, "-") else None
        rendered = registry.get(name)(rep, stem=stem, progress=progress,
                                      color=output in (None, "-") and sys.stdout.isatty())
        written = emit(rendered, output, inputs=paths)
    finally:
        progress.done()
        if name in ("html", "markdown"):
            chartpool.release()
    if written and not quiet and output not in (None, "-"):
        click.echo(f"dpuprof: wrote {', '.join(str(p) for p in written[-1:])}"
                   + (f" (+{len(written) - 1} files beside it)" if len(written) > 1 else ""), err=True)
