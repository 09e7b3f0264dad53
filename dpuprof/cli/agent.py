"""``dpuprof agent``: record the whole host for good, in rotating files, with Prometheus /metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dpuprof.errors import UserError
from dpuprof.record.workload.child import block_signals

EPILOG = """\b
What /metrics holds (every series is labelled node=HOSTNAME):
  dpuprof_cpu_seconds_total{category,subcategory,job_id,job_kind}  host CPU by category and job
  dpuprof_socket_bytes_total / _socket_calls_total{protocol,direction,job_id,job_kind}
  dpuprof_block_io_bytes_total, dpuprof_block_ios_total{dev,op}
  dpuprof_net_bytes_total, dpuprof_net_packets_total{dev,direction}
  dpuprof_lost_total{kind}, dpuprof_recorded_seconds_total, dpuprof_rotations_total
  process_cpu_seconds_total, process_resident_memory_bytes, ...  the agent's own cost
  dpuprof_duty_weight  seconds of the run each recorded second stands for (--duty W/P: P/W, else 1)
  with --project: dpuprof_projected_freed_cores{dpu,job_id,job_kind} and
  dpuprof_projected_speedup{dpu,bound=low|expected|high,job_id,job_kind} of the last completed file
  with --push: dpuprof_pushed_profiles_total, dpuprof_push_failures_total{reason}

\b
Jobs come from each process's cgroup v2 path: a Kubernetes pod (job_kind=pod, job_id=its uid), a
Slurm job (slurm, the job id), a systemd unit (unit, e.g. sshd.service), else the cgroup path.
The agent's own process, its --push and --project work included, is job_kind=observer,
job_id=dpuprof-agent, whatever its cgroup (as dpuprof record sets its recorder apart).
No pid, command line or stack is ever a label. (The label is job_id, not job: Prometheus gives
every scraped series a job label of its own, the scrape job's name.)

\b
Exposure: by default /metrics listens on 127.0.0.1 only. --listen 0.0.0.0:PORT lets anyone who
can reach the node read which jobs (pod uids, Slurm job ids, unit names, cgroup paths) use how
much CPU, network and disk, the node's device names, and the agent's own process metrics; there
is no authentication or TLS, so widen it only behind a firewall or a NetworkPolicy.

\b
Recordings: DIR/HOST-YYYYmmddTHHMMSSZ-NNNNNN.rec, a new one every --rotate (or --rotate-size),
each starting where the previous one ended; the newest --keep are kept (the one being written
counts). Each is an ordinary recording: dpuprof report / project read it. The light setting is
the default, as record --light's: -F 19 and no per-thread waits (sched_wait), uprobes or program
per packet, block request or socket call (bytes, packets and I/Os come from /proc, TCP bytes per
process from sock_diag); the agent drains every --interval (1 s) for fresh /metrics.

\b
Cost: measured on a 2-vCPU VM beside a mixed load of about a core (iperf3, hashing threads,
short-lived processes, fio; benchmarks/AGENT_SOAK.md), the light setting cost 2.73-3.21 % of the
load's CPU (the agent's own CPU plus its BPF programs' run time) at 73.4-77.8 MB of RSS over 60
minutes. --duty 5s/15s cut the recorder's CPU from 89 to 32 ms a second (a 30-s run).

\b
Duty cycle: --duty W/P records W of every P seconds (10s/60s: a sixth) and detaches every probe
in between, so the host's events run no dpuprof program then. The recordings hold the on parts
only (their intervals leave gaps; meta duty = {on_s, period_s}): report's shares and rates are
per recorded second, as before. /metrics adds each recorded interval times P/W
(dpuprof_duty_weight), so rate() over whole periods (a range of P or more) estimates the
full-time rate; the agent's own process_* metrics are not weighted.

\b
Examples:
  sudo dpuprof agent                                    # /var/lib/dpuprof, 10-minute files, :9477
  sudo dpuprof agent -D /var/tmp/dpuprof --rotate 1m --keep 60
  sudo dpuprof agent --rotate 1h --rotate-size 256M --listen 0.0.0.0:9477
  sudo dpuprof agent --project bluefield-3,connectx-7     # projected offload per job, each rotation
  sudo dpuprof agent --push http://pyroscope:4040         # each job's flame graph, each rotation
  sudo dpuprof agent --duty 10s/60s                      # record 10 s of every minute
  curl -s 127.0.0.1:9477/metrics | grep dpuprof_cpu_seconds_total
  dpuprof report "$(ls /var/lib/dpuprof/*.rec | tail -n 2 | head -n 1)"   # the last complete file
"""


@click.command(epilog=EPILOG)
@click.option("-D", "--dir", "directory", default="/var/lib/dpuprof", show_default=True,
              type=click.Path(file_okay=False), help="Directory of the rotating recordings (created if missing).")
@click.option("--rotate", "rotate", default="10m", show_default=True, metavar="DURATION",
              help="Start a new file this often (30s, 10m, 1h; 'off' only with --rotate-size).")
@click.option("--rotate-size", "rotate_size", metavar="SIZE",
              help="Also start a new file when the current one reaches SIZE (500K, 64M, 1G).")
@click.option("--keep", default=6, show_default=True, type=click.IntRange(1, 100000),
              help="Keep the newest K files of this host, deleting older ones.")
@click.option("--listen", "listen", default="127.0.0.1:9477", show_default=True, metavar="[ADDR:]PORT",
              help="Where /metrics is served; a port alone means 127.0.0.1. See 'Exposure' below.")
@click.option("-F", "--freq", "freq_hz", default=19, show_default=True, type=click.IntRange(1, 10000),
              help="CPU sampling frequency per CPU, Hz (the light setting: 19).")
@click.option("--interval", "interval_s", default=1.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="Seconds between map drains; /metrics advances once per interval.")
@click.option("--probes", default="light", show_default=True,
              help="Comma-separated probes (as dpuprof record --probes), 'all', or 'light' (record --light's: proc_tree and cpu_sample).")
@click.option("--project", "project", metavar="DPU[,DPU...]",
              help="At each rotation, project the completed file on these DPU profiles (bluefield-3, "
                   "connectx-7, ... or a .toml) per job, as gauges (below). Costs a few CPU-seconds "
                   "and ~100 MB (pandas) per rotation, in a background thread.")
@click.option("--push", "push", metavar="URL",
              help="At each rotation, POST each job's CPU profile (pprof) of the completed file to this "
                   "Pyroscope-compatible server's /ingest (e.g. http://pyroscope:4040), as "
                   "dpuprof.cpu{job_id,job_kind,node}. A failed push is one line and a count; recording goes on.")
@click.option("--duty", "duty", metavar="W/P",
              help="Record W of every P (10s/60s), the probes detached in between; /metrics weights "
                   "what is recorded by P/W. Default: always on.")
@click.option("-d", "--duration", "duration_s", type=click.FloatRange(0.1, None), metavar="SECONDS",
              help="Stop after SECONDS (default: run until SIGTERM or SIGINT).")
def agent(directory, rotate, rotate_size, keep, listen, freq_hz, interval_s, probes, project, push, duty, duration_s):
    """Record the whole host until SIGTERM or SIGINT: CPU by category (network, storage, crypto,
    compression, compute, kernel_other) attributed to jobs by cgroup, in rotating recordings, and
    as Prometheus counters at /metrics.

    Needs what dpuprof record -a needs (root, or the capabilities 'dpuprof doctor' names, and the
    host PID namespace). Deployment examples (systemd, Kubernetes DaemonSet, Slurm): deploy/.
    """
    block_signals()  # before the /metrics thread starts, so it inherits the mask: the recorder takes them
    from dpuprof.agent.options import AgentOptions, parse_duration, parse_duty, parse_listen, parse_push_url, parse_size
    from dpuprof.agent.run import run_agent

    rotate_s = None if rotate.strip().lower() == "off" else parse_duration(rotate)
    rotate_bytes = parse_size(rotate_size) if rotate_size else None
    if rotate_s is None and rotate_bytes is None:
        raise UserError("--rotate off needs --rotate-size: the agent must start new files on some account")
    names = [p.strip() for p in probes.split(",") if p.strip()]
    if "psutil" in names:
        raise UserError("--probes psutil: the agent needs the eBPF probes (it splits CPU into categories)")
    opts = AgentOptions(directory=Path(directory), rotate_s=rotate_s, rotate_bytes=rotate_bytes, keep=keep,
                        listen=parse_listen(listen), freq_hz=freq_hz, interval_s=interval_s,
                        probes=[] if names == ["light"] else _all_or(names), duration_s=duration_s,
                        project=[p.strip() for p in (project or "").split(",") if p.strip()],
                        push=parse_push_url(push) if push is not None else None,
                        duty=parse_duty(duty) if duty else None)
    res = run_agent(opts, on_error=_error, on_ready=lambda line: click.echo(f"dpuprof agent: {line}", err=True))
    click.echo(f"dpuprof agent: recorded {res.seconds:.1f} s; {len(res.files)} file(s) kept in {directory}",
               err=True)
    sys.exit(0 if res.write_ok else 2)


def _all_or(names: list[str]) -> list[str]:
    from dpuprof.record.load.probes import PROBE_NAMES

    return list(PROBE_NAMES) if names == ["all"] else names


def _error(line: str) -> None:
    click.echo(f"dpuprof agent: error: {line}", err=True)
