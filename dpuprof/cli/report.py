"""``dpuprof report``: summary of a recording (extended by the renderers)."""

from __future__ import annotations

import click

from dpuprof.cli.common import echo_json, resolve_recording

EPILOG = """\b
Examples:
  dpuprof report
  dpuprof report run.rec --format json
"""


@click.command(epilog=EPILOG)
@click.argument("recordings", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["terminal", "json"]), default=None)
def report(recordings, fmt):
    """Summarise RECORDINGS (default: the newest *.rec here)."""
    from dpuprof.recording import load
    from dpuprof.recording.summary import summarize

    rec = load(resolve_recording(recordings[0] if recordings else None))
    summary = summarize(rec)
    if fmt == "json":
        echo_json(summary)
    else:
        click.echo(summary)
