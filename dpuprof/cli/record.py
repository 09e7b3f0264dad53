"""``dpuprof record``: run a command and record where host CPU goes."""

from __future__ import annotations

import sys

import click

from dpuprof.record.child import KILL_AFTER_S, TERM_AFTER_S, block_signals

EPILOG = """\b
Examples:
  sudo dpuprof record -- python train.py --epochs 1
  sudo dpuprof record -o run1.rec -F 199 -- torchrun --nproc-per-node 2 train.py
  dpuprof record --probes psutil -- python train.py     # no root: CPU splits only
  dpuprof report --format json                          # summary of the newest recording
"""


@click.command(epilog=EPILOG, context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", default="dpuprof.rec", show_default=True, type=click.Path(dir_okay=False),
              help="Recording file; an existing one is renamed to *.old (like perf.data).")
@click.option("-F", "--freq", "freq_hz", default=99, show_default=True, type=click.IntRange(1, 10000),
              help="CPU sampling frequency per CPU, Hz.")
@click.option("--interval", "interval_s", default=1.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="Seconds between map drains; each interval is committed to the file. User-space "
                   "frames are resolved at each drain, so a process that lives shorter than this "
                   "is classified by its kernel frames only: lower it for short-lived tools.")
@click.option("--probes", default="all", show_default=True,
              help="Comma-separated probes (proc_tree, cpu_sample, softirq, block_io, net_dev, sock_io), "
                   "'all', or 'psutil' for a light mode without root or eBPF.")
@click.option("-q", "--quiet", is_flag=True, help="No live status line.")
@click.option("--as-root", is_flag=True, help="Under sudo, run the command as root instead of the invoking user.")
@click.option("--term-after", "term_after_s", default=TERM_AFTER_S, show_default=True, type=click.FloatRange(0, 3600),
              metavar="SECONDS", help="After Ctrl-C (or SIGINT/SIGTERM to dpuprof), send COMMAND SIGTERM if it "
              "is still running this long after.")
@click.option("--kill-after", "kill_after_s", default=KILL_AFTER_S, show_default=True, type=click.FloatRange(0, 3600),
              metavar="SECONDS", help="Then send SIGKILL if it is still running this long after the SIGTERM.")
@click.option("--no-python-frames", "no_python_frames", is_flag=True,
              help="Do not set PYTHONPERFSUPPORT=1 for COMMAND (CPython >= 3.12's perf trampoline, which "
                   "gives .py frames; the interpreter then writes /tmp/perf-PID.map, left in place).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(output, freq_hz, interval_s, probes, quiet, as_root, term_after_s, kill_after_s, no_python_frames,
           command):
    """Run COMMAND and record host CPU by category (network, storage, crypto, compression, compute,
    kernel_other), bytes moved and IO counts.

    Follows COMMAND's whole process tree. Exits with COMMAND's exit status (128+N if it was killed by
    signal N). Ctrl-C is passed to COMMAND; the recording is kept up to the last second.

    \b
    Stopping: Ctrl-C reaches COMMAND from the terminal; SIGINT or SIGTERM sent to dpuprof alone
    (kill, Slurm) is forwarded. If COMMAND is still running --term-after seconds later it gets
    SIGTERM, and --kill-after seconds after that SIGKILL; a second Ctrl-C takes the next step at once.
    A stop signal that arrives before COMMAND starts (while the probes load) stops dpuprof without
    starting COMMAND: exit 128+N, no recording written.

    \b
    Disk full (or another write error): one error line, the recording keeps every interval written
    so far, and COMMAND runs on to its end; dpuprof exits with its status, or 2 if that was 0.
    """
    from pathlib import Path

    block_signals()  # from here on a stop signal is taken by the recorder, never lost half-way
    from dpuprof.record.recorder import Options
    from dpuprof.record.recorder import record as run_record

    names = [p.strip() for p in probes.split(",") if p.strip()]
    psutil_only = names == ["psutil"]
    if "psutil" in names and not psutil_only:
        raise click.BadParameter("'psutil' cannot be combined with eBPF probes", param_hint="--probes")
    opts = Options(command=list(command), output=Path(output), freq_hz=freq_hz, interval_s=interval_s,
                   probes=[] if names == ["all"] or psutil_only else names, psutil_only=psutil_only,
                   quiet=quiet, as_root=as_root, term_after_s=term_after_s, kill_after_s=kill_after_s,
                   python_frames=not no_python_frames)
    sys.exit(run_record(opts))
