"""The ``dpuprof`` command line. Subcommand modules import only click (and modules ``--help`` loads
anyway) at load time, so ``--help`` stays fast; each does its heavy imports (pandas, bcc,
matplotlib) when it runs (pyproject.toml's [tool.ruff] per-file entry for dpuprof/cli/)."""

from __future__ import annotations

import os
import sys

import click

from dpuprof import __version__
from dpuprof.cli.agent import agent
from dpuprof.cli.doctor import doctor
from dpuprof.cli.project import project
from dpuprof.cli.record import record
from dpuprof.cli.report import report
from dpuprof.errors import UserError, exit_interrupted

# click >= 8.2 raises this for a bare `dpuprof`; it shows the help, not an error line.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

EPILOG = """\b
Examples:
  sudo dpuprof record -- python train.py --epochs 1
  dpuprof project --dpu bluefield
  dpuprof report -o report.html
  dpuprof report fixtures/ddp-plain/recording.rec --format json
  dpuprof doctor
  sudo dpuprof agent --rotate 10m --keep 6      # every node, for good: rotating files, /metrics
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpuprof")
def cli():
    """Measure where host CPU goes during a job, and project what a DPU would free.

    record -> dpuprof.rec -> project -> report, like perf record -> perf.data -> perf report.
    """


cli.add_command(record)
cli.add_command(project)
cli.add_command(report)
cli.add_command(doctor)
cli.add_command(agent)


def usage_line(err: click.UsageError) -> str:
    """click's message for a bad option, as dpuprof words errors: one line, with where to look."""
    msg = err.format_message().rstrip(".")
    msg = msg[:1].lower() + msg[1:]
    return f"{msg}; see '{err.ctx.command_path} --help'" if err.ctx is not None else msg


def main(argv=None) -> None:
    """Entry point: one clear line and exit 2 for bad input, never a traceback. ``dpuprof record``
    run as a command (``argv`` None) leaves through ``leave``."""
    try:
        _main(argv)
    except SystemExit as done:
        if argv is None and sys.argv[1:2] == ["record"] and (done.code is None or isinstance(done.code, int)):
            leave(done.code or 0)
        raise


def leave(code: int) -> None:
    """Exit with ``code`` now, once stdout and stderr are flushed, without the interpreter's
    teardown. Record has closed its file and detached its probes by then; freeing every symbol
    table and cached stack one object at a time was 33-56 ms of its CPU after the command ended
    (3 runs of ``record -- sleep 2``, 2026-12-07; 11-13 ms with this), most of its tail in
    benchmarks/HOT_LOADS.md. The kernel frees the memory and closes the fds at exit either way."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said on it
            pass
    os._exit(code)


def _main(argv) -> None:
    try:
        cli.main(args=argv, prog_name="dpuprof", standalone_mode=False)
    except UserError as err:
        click.echo(f"dpuprof: error: {err}", err=True)
        sys.exit(err.exit_code)
    except click.UsageError as err:  # a bad option or argument, checked by click's own types
        if isinstance(err, _NO_ARGS_IS_HELP):
            err.show()
            sys.exit(2)
        click.echo(f"dpuprof: error: {usage_line(err)}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("dpuprof: aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(2 if err.exit_code == 1 else err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except BrokenPipeError:
        sys.exit(141)
    except KeyboardInterrupt:
        exit_interrupted()
    sys.exit(0)
