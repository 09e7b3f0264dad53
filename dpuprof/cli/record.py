"""``dpuprof record``: run a command and record where host CPU goes."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from dpuprof.agent.options import parse_duty  # the agent's --duty reads W/P the same way
from dpuprof.errors import UserError
from dpuprof.record.workload.child import KILL_AFTER_S, TERM_AFTER_S, block_signals

# Seconds between drains. The recorder's own CPU is mostly per drain (the sampled stacks, the
# writer's commit, sock_diag, /proc), little per event: 2-s drains took 25-30 % less of it than 1-s
# ones (after the command's exec, 15-s runs, two pairs each: 0.128 -> 0.096 s on an iperf3
# flood, 0.296 -> 0.216 s beside 4 x 128 threads, 2026-12-07), for half the time resolution.
DEFAULT_INTERVAL_S = 2.0

#: What recording costs, as bcc's man pages state it: measured numbers, their date and their file
#: (tests/test_record_cli.py checks each number against benchmarks/HOT_LOADS.md).
OVERHEAD = """\
OVERHEAD: measured on 2026-12-08 (benchmarks/HOT_LOADS.md: a 2-core AMD EPYC VM, Linux 6.18,
30-s runs, medians of 3 rounds, side by side with perf record -a -g -F 99). The default probes at
-F 99, BPF programs and recorder together: 0.83 % of the workload's CPU under an iperf3 loopback
flood (perf: 0.20 %), 0.88 % beside 4 x 128 threads that hash and sleep (perf: 0.15 %), 0.73 % of
the machine's busy CPU under fio 4 KiB random reads at 251,421 IOPS (perf: 0.14 %); in 15-s runs,
where each recording's fixed costs weigh twice as much, 1.08 %, 1.06 % and 0.90 %. The largest
part is the recorder's own reading of the maps and counters at each drain (every 2 s): 0.180,
0.350 and 0.210 s of CPU in 30 s (every thread's counters come from one read of a task iterator).
The sampler's program costs 6438 ns a sample beside 2 x 8 threads (CPUs mostly idle: an idle
CPU's stacks are not walked) to 13426 ns under fio (its stack walks). sched_waking, run at every
wake-up on the host to measure main threads' waits, is attached two seconds in eight (--wait-duty
2s/8s): 0.32 % of a core on iperf3 (400 ns x 7,865/s averaged over the run) and 0.36 % under fio
(76 ns x 47,439/s); --wait-duty always runs it throughout (benchmarks/WAIT_DUTY.md). --light (no
sched_wait or uprobes, -F 19, 5-s drains): 0.26 %, 0.28 % and 0.21 %. Bytes, packets and I/Os
come from the kernel's counters (/proc; sock_diag for TCP bytes per process), with no program per
packet, request or socket call: 1.0021 of iperf3's bytes and all of fio's I/Os counted. The
kernel's BPF run-time statistics, which add about 100 ns to every program run, are on for one
interval in 10 only (these runs had them on throughout). --probes all adds the per-event programs
(net_dev, block_io, softirq, sock_io). The recording grows 0.183 (iperf3) to 0.450 (512 threads)
MB a minute; fewer --probes load fewer programs.
"""

EPILOG = OVERHEAD + """
\b
Job identity: the recording stores --job-id, else $SLURM_JOB_ID, else $TORCHELASTIC_RUN_ID (as
seen by dpuprof itself: torchrun sets it only for its workers, so give --job-id when dpuprof wraps
torchrun), with the ranks ($SLURM_PROCID, $SLURM_NODEID, $RANK, $NODE_RANK) and the host.

\b
Compiled probes: the first start on a kernel compiles the probes with bcc (2-3 s) and keeps the
result in ~/.cache/dpuprof/probes of the user running dpuprof (root's under sudo); later starts
load it. DPUPROF_PROBE_CACHE=DIR keeps it in DIR instead, DPUPROF_PROBE_CACHE=off keeps nothing.

\b
Output names (-o): %h hostname, %p dpuprof's pid, %n the first free counter (1, 2, ...),
%q{VAR} environment variable VAR (an error when unset), %% a literal %.

\b
Examples:
  sudo dpuprof record -- python train.py --epochs 1
  sudo dpuprof record -o run1.rec -F 199 -- torchrun --nproc-per-node 2 train.py
  sudo dpuprof record -p 4242 -d 60 -o attach.rec        # a running job, its whole tree, 60 s
  sudo dpuprof record -p $(pgrep -d, -f train.py)        # several processes, until Ctrl-C
  sudo dpuprof record -a -d 10 -o host-%h.rec            # every process on the host, 10 s
  sudo dpuprof record -a -- python train.py              # host-wide, train.py as the workload
  sudo dpuprof record --cgroup /system.slice/job.scope -d 30
  srun dpuprof record -o run-%h-%q{SLURM_PROCID}.rec -- python train.py
  dpuprof record -o run-%h.rec --job-id run42 -- torchrun --nnodes 2 --nproc-per-node 4 \\
      --rdzv-backend c10d --rdzv-endpoint node0:29500 --rdzv-id run42 train.py   # on each node
  dpuprof report run-*.rec -o job.html                  # the job view: per node, spread, stragglers
  dpuprof record --probes psutil -- python train.py     # no root: CPU splits only
  dpuprof report --format json                          # summary of the newest recording
"""


# COMMAND's own options are its own: option parsing stops at the first argument that is not
# one of dpuprof's options (or at --), so `record python train.py --epochs 1` passes --epochs on;
# a mistyped option before COMMAND is a usage error with click's did-you-mean, not the command.
@click.command(epilog=EPILOG, context_settings={"allow_interspersed_args": False})
@click.option("-o", "--output", default="dpuprof.rec", show_default=True, type=click.Path(dir_okay=False),
              help="Recording file, a template (%h %p %n %q{VAR} %%: see below); an existing file is "
                   "renamed to *.old (like perf.data) once COMMAND has started, never by a run that "
                   "fails to start.")
@click.option("-p", "--pid", "pids", metavar="PID[,PID...]",
              help="Attach to running processes and follow their whole trees (children born later "
                   "too). Never stops or signals them; stops on Ctrl-C, SIGTERM, --duration, or when "
                   "every attached tree has exited.")
@click.option("-a", "--system-wide", is_flag=True,
              help="The whole host: without a command every process is the workload (until Ctrl-C or "
                   "--duration); with a command, the host while it runs, its tree as the workload.")
@click.option("--cgroup", metavar="PATH",
              help="A cgroup v2 subtree is the workload (a Kubernetes pod, a systemd or Slurm scope), "
                   "relative to /sys/fs/cgroup or a full path.")
@click.option("-d", "--duration", "duration_s", type=click.FloatRange(0.1, 30 * 86400), metavar="SECONDS",
              help="Record for this long, then stop. A launched command keeps running after the "
                   "window closes: dpuprof waits for it and exits with its status.")
@click.option("-F", "--freq", "freq_hz", default=99, show_default=True, type=click.IntRange(1, 10000),
              help="CPU sampling frequency per CPU, Hz.")
@click.option("--interval", "interval_s", default=DEFAULT_INTERVAL_S, show_default=True, type=click.FloatRange(0.1, 60),
              help="Seconds between map drains; each interval is committed to the file. User-space "
                   "frames of processes that exit before a drain are resolved from the maps read "
                   "just after their exec. Most of the recorder's own CPU is spent per drain: "
                   "--interval 1 costs about a third more of it.")
@click.option("--probes", default="default", show_default=True,
              help="Comma-separated probes (proc_tree, cpu_sample, softirq, block_io, net_dev, sock_io, "
                   "sock_close, sched_wait, uprobes, thread_stats), 'default' (all but the per-packet, per-request, per-softirq and "
                   "per-socket-call programs net_dev, block_io, softirq and sock_io: bytes, packets and "
                   "I/Os are then read from the kernel's counters, /proc and sock_diag; 'default,sock_io' "
                   "adds one), 'all', or 'psutil' for a light mode without root or eBPF.")
@click.option("--light", is_flag=True,
              help="The setting for long or always-on runs: -F 19, --interval 5 and the default probes "
                   "but the per-thread waits (sched_wait) and uprobes, so no critical-path inputs (the "
                   "projection's speedup falls back to CPU seconds). An explicit -F, --interval or "
                   "--probes wins.")
@click.option("--wait-duty", "wait_duty", default="2s/8s", show_default=True, metavar="W/P",
              help="Measure the main threads' waits (sched_wait's wake-up program, run at every "
                   "wake-up on the host) in the first W of every P seconds only, rounded to whole "
                   "--interval drains, for W/P of its cost; the projection scales the waits seen "
                   "by the window's seconds over those measured. 'always' keeps it attached: every "
                   "wait, exactly.")
@click.option("--rules", "rules", default=None, metavar="FILE",
              help="Classification rules (the format of dpuprof/data/rules.toml, docs/taxonomy.md) "
                   "tried before the built-in ones, so they extend or override them. The recording "
                   "stores the sha256 of the rules used.")
@click.option("--job-id", "job_id", metavar="ID",
              help="Name the job this recording belongs to (default: $SLURM_JOB_ID, else "
                   "$TORCHELASTIC_RUN_ID): dpuprof report merges the nodes of one job only.")
@click.option("-q", "--quiet", is_flag=True, help="No live status line.")
@click.option("--as-root", is_flag=True, help="Under sudo, run the command as root instead of the invoking user.")
@click.option("--term-after", "term_after_s", default=TERM_AFTER_S, show_default=True, type=click.FloatRange(0, 3600),
              metavar="SECONDS", help="After Ctrl-C (or SIGINT/SIGTERM to dpuprof), send COMMAND SIGTERM if it "
              "is still running this long after.")
@click.option("--kill-after", "kill_after_s", default=KILL_AFTER_S, show_default=True, type=click.FloatRange(0, 3600),
              metavar="SECONDS", help="Then send SIGKILL if it is still running this long after the SIGTERM.")
@click.option("--codec-uprobes", "codec_uprobes", is_flag=True,
              help="Also count bytes per cipher and codec call (OpenSSL EVP_*Update, zlib inflate/deflate) "
                   "with uprobes, for measured host rates and compress/decompress direction. Each call is a "
                   "trap (6-8 us): for jobs that make at most thousands a second.")
@click.option("--no-python-frames", "no_python_frames", is_flag=True,
              help="Do not set PYTHONPERFSUPPORT=1 for COMMAND (CPython >= 3.12's perf trampoline, which "
                   "gives .py frames; the interpreter then writes /tmp/perf-PID.map, which dpuprof removes once "
                   "that process has exited and the recording has ended, unless PYTHONPERFSUPPORT was already set).")
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@click.pass_context
def record(ctx, output, pids, system_wide, cgroup, duration_s, freq_hz, interval_s, probes, light, wait_duty, rules,
           job_id, quiet, as_root, term_after_s, kill_after_s, codec_uprobes, no_python_frames, command):
    """Run COMMAND (or attach with -p, --cgroup, -a) and record host CPU by category (network,
    storage, crypto, compression, compute, kernel_other), bytes moved and IO counts.

    Follows COMMAND's whole process tree. Exits with COMMAND's exit status (128+N if it was killed by
    signal N). Ctrl-C is passed to COMMAND; the recording is kept up to the last second.

    \b
    Stopping: Ctrl-C reaches COMMAND from the terminal; SIGINT or SIGTERM sent to dpuprof alone
    (kill, Slurm) is forwarded. If COMMAND is still running --term-after seconds later it gets
    SIGTERM, and --kill-after seconds after that SIGKILL; a second Ctrl-C takes the next step at once.
    A stop signal that arrives before COMMAND starts (while the probes load) stops dpuprof without
    starting COMMAND: exit 128+N, no recording written, an existing one left as it was. With -p, --cgroup or -a alone, Ctrl-C and
    SIGTERM stop the recording only (nothing is forwarded) and dpuprof exits 0.

    \b
    --duration with COMMAND: the recording closes after SECONDS and COMMAND keeps running; dpuprof
    says so on stderr, waits for it, and exits with its status.

    \b
    Disk full (or another write error): one error line, the recording keeps every interval written
    so far, and COMMAND runs on to its end; dpuprof exits with its status, or 2 if that was 0.
    """
    block_signals()  # from here on a stop signal is taken by the recorder, never lost half-way
    from dpuprof.record.recorder import Options, Recorder
    from dpuprof.record.status import StatusLine
    from dpuprof.record.workload.outname import expand
    from dpuprof.record.workload.targets import make_target

    target = make_target(command, pids, system_wide, cgroup, duration_s)
    output = expand(output)

    if rules is not None:
        from dpuprof.record.stacks.classify import Classifier

        Classifier(extra=rules)  # a bad file: one line and exit 2 now, not after the probes load
    if light:
        from dpuprof.record.load.probes import LIGHT_FREQ_HZ, LIGHT_INTERVAL_S, LIGHT_PROBES

        default = click.core.ParameterSource.DEFAULT
        freq_hz = LIGHT_FREQ_HZ if ctx.get_parameter_source("freq_hz") == default else freq_hz
        probes = ",".join(LIGHT_PROBES) if ctx.get_parameter_source("probes") == default else probes
        interval_s = LIGHT_INTERVAL_S if ctx.get_parameter_source("interval_s") == default else interval_s
    names = [p.strip() for p in probes.split(",") if p.strip()]
    psutil_only = names == ["psutil"]
    if "psutil" in names and not psutil_only:
        raise click.BadParameter("'psutil' cannot be combined with eBPF probes", param_hint="--probes")
    opts = Options(command=list(command), target=target, output=Path(output), freq_hz=freq_hz, interval_s=interval_s,
                   probes=[] if names == ["default"] or psutil_only else names, psutil_only=psutil_only,
                   quiet=quiet, as_root=as_root, term_after_s=term_after_s, kill_after_s=kill_after_s,
                   rules=Path(rules) if rules is not None else None, python_frames=not no_python_frames,
                   codec_uprobes=codec_uprobes, job_id=job_id, wait_duty=_wait_duty(
                       wait_duty, interval_s, ctx.get_parameter_source("wait_duty") != click.core.ParameterSource.DEFAULT))
    recorder = Recorder(opts, status=StatusLine(quiet=quiet), on_error=_error, on_warning=_warning)
    sys.exit(_speak(recorder, recorder.run(), quiet))


def _wait_duty(text: str, interval_s: float, given: bool = True) -> tuple[int, int] | None:
    """--wait-duty as (on, period) in drains, None for 'always'. The default (``given`` False)
    keeps at least one drain off at any --interval (--interval 5: one drain in two; the default
    interval, 2 s: one in four)."""
    if text.strip().lower() == "always":
        return None
    on_s, period_s = parse_duty(text, "--wait-duty")
    on, period = max(1, round(on_s / interval_s)), round(period_s / interval_s)
    if not given:
        period = max(period, on + 1)
    if on >= period:
        raise UserError(f"--wait-duty: {text} leaves no drain of {interval_s:g} s off; give a longer period")
    return on, period


def _error(line: str) -> None:
    click.echo(f"dpuprof: error: {line}", err=True)


def _warning(line: str) -> None:
    """A probe that stopped early: said even with -q (it changes what the recording holds)."""
    click.echo(f"dpuprof: warning: {line}", err=True)


def _speak(recorder, res, quiet: bool) -> int:
    """Say how the recording ended (stderr) and return dpuprof's exit status: the command's
    (128+N if signal N killed it), 0 without a command, 128+N when signal N stopped dpuprof before
    the command started, and 2 after a write error if the command's status was 0."""
    from dpuprof.record.workload.targets import STOP_TEXT

    if res.stopped_by is not None:
        click.echo(f"dpuprof: stopped by {signal.Signals(res.stopped_by).name} before the command started; "
                   + (f"{res.output} is empty" if res.file_written else "nothing recorded"), err=True)
        return 128 + res.stopped_by
    rc = res.command_rc
    if not quiet and res.write_ok:
        click.echo(f"dpuprof: recorded {res.seconds:.1f} s, {res.samples} samples -> {res.output}; "
                   + STOP_TEXT[res.stop_reason].format(rc=rc), err=True)
    if res.still_running:
        click.echo(f"dpuprof: the command (pid {recorder.child.pid}) keeps running after the --duration "
                   "window; dpuprof waits for it and exits with its status (Ctrl-C is passed to it)", err=True)
        rc = recorder.wait_for_command()
    rc = rc or 0
    return rc if res.write_ok or rc else 2
