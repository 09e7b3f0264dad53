"""Prometheus metrics from committed intervals, through the maintained ``prometheus-client``.

``IntervalMetrics.add(t0, t1, tables, processes)`` takes what the recorder has just committed
(RecordingWriter.write_interval's tables and process rows; ``RotatingWriter.on_interval``) and
adds it to counters. Every counter is a ``_total`` in base units (seconds, bytes), and every label
has a bounded set of values: categories and subcategories come from dpuprof/data/rules.toml, jobs
from jobs.py (capped by ``JobLabels.max_jobs``), devices and loss kinds from the host. No pid,
stack or command line is ever a label.

Metrics (each also labelled ``node``):

- ``dpuprof_cpu_seconds_total{category, subcategory, job_id, job_kind}``: host CPU by category and
  job (the exact-CPU split of cpu_category; ``idle`` included, so all categories add up to CPUs x
  seconds). The agent's own process, its --push and --project work included, is
  ``job_kind="observer", job_id="dpuprof-agent"`` (jobs.OBSERVER_JOB), never the job its cgroup names.
- ``dpuprof_socket_bytes_total{protocol, direction, job_id, job_kind}`` and ``_socket_calls_total``.
- ``dpuprof_block_io_bytes_total{dev, op}``, ``dpuprof_block_ios_total{dev, op}``.
- ``dpuprof_net_bytes_total{dev, direction}``, ``dpuprof_net_packets_total{dev, direction}``.
- ``dpuprof_lost_total{kind}``: data the probes or the recorder lost (recording's ``lost`` table).
- ``dpuprof_recorded_seconds_total``: wall time covered by committed intervals (rates divide by
  it to check coverage; with --duty, times the weight); ``dpuprof_rotations_total``: recording
  files completed.
- ``process_cpu_seconds_total`` and the other ``process_*`` metrics of the agent itself
  (prometheus-client's ProcessCollector): the recorder's own CPU and memory.
- ``dpuprof_duty_weight``: how many seconds of the run each recorded second stands for (below).

Duty cycle (``agent --duty W/P``): the probes record W seconds of every P and are detached in
between, so the committed intervals cover W/P of the time. Each interval's values are added to
the ``dpuprof_*_total`` counters (``dpuprof_rotations_total`` aside) times the weight P/W, the
gauge ``dpuprof_duty_weight`` (1 without --duty): ``rate()`` over a range of whole periods then
estimates the full-time rate, unbiased, and ``dpuprof_recorded_seconds_total`` advances at about
1 s per second as without a duty cycle. Over a range shorter than a period, rates jump: the
counters move in on parts only, P/W times faster. The recordings themselves store the
unweighted values (recording meta ``duty``; record/duty.py).
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, disable_created_metrics

from dpuprof.agent.jobs import JobLabels

# Not "job": Prometheus sets a target label of that name at every scrape, and a scraped "job" label
# would be renamed exported_job (unless honor_labels), so the job id has a name of its own.
_JOB = ("job_id", "job_kind")


class IntervalMetrics:
    """The agent's counters in their own registry (``registry``), for ``node``; each interval's
    values count ``weight`` times (P/W with --duty W/P, see the module docstring)."""

    def __init__(self, node: str, jobs: JobLabels | None = None, registry: CollectorRegistry | None = None,
                 weight: float = 1.0):
        disable_created_metrics()  # no *_created series: they double /metrics and no query here needs them
        self.node, self.weight = node, float(weight)
        # this process records the host: its own CPU is the observer's, not its cgroup's job's
        self.jobs = jobs or JobLabels(own_pid=os.getpid())
        self.registry = registry or CollectorRegistry()
        self.series: dict = {}  # Job -> {(counter, label values)} of its series
        ProcessCollector(registry=self.registry)
        r, n = self.registry, ("node",)

        def counter(name, doc, labels):
            return Counter(name, doc, labels + n, registry=r)

        self.cpu = counter("dpuprof_cpu_seconds", "Host CPU seconds by category, subcategory and job",
                           ("category", "subcategory") + _JOB)
        self.sock_bytes = counter("dpuprof_socket_bytes", "Socket payload bytes by job",
                                  ("protocol", "direction") + _JOB)
        self.sock_calls = counter("dpuprof_socket_calls", "Socket send/receive calls by job",
                                  ("protocol", "direction") + _JOB)
        self.block_bytes = counter("dpuprof_block_io_bytes", "Block IO bytes completed", ("dev", "op"))
        self.block_ios = counter("dpuprof_block_ios", "Block IOs completed", ("dev", "op"))
        self.net_bytes = counter("dpuprof_net_bytes", "Network device bytes", ("dev", "direction"))
        self.net_packets = counter("dpuprof_net_packets", "Network device packets", ("dev", "direction"))
        self.lost = counter("dpuprof_lost", "Data lost by the probes or the recorder, by kind", ("kind",))
        self.recorded = counter("dpuprof_recorded_seconds", "Wall seconds covered by committed intervals", ())
        self.rotations = counter("dpuprof_rotations", "Recording files completed", ())
        self.recorded.labels(node=node)  # present from the first scrape, at 0
        self.rotations.labels(node=node)
        Gauge("dpuprof_duty_weight", "Seconds of the run each recorded second stands for (--duty W/P: P/W)",
              n, registry=r).labels(node).set(self.weight)

    def add(self, t0: float, t1: float, tables: dict, processes=()) -> None:
        """Add one committed interval [t0, t1) (unix s), each value times ``weight``: ``tables`` as
        RecordingWriter.write_interval takes them (seconds, bytes, counts), ``processes`` its
        process rows (pid first, cgroup ninth when present)."""
        for row in processes:
            self.jobs.note(row[0], row[8] if len(row) > 8 else None)
        node, w = self.node, self.weight
        for pid, cat, sub, _samples, cpu_s in tables.get("cpu_category") or ():
            if cpu_s > 0:
                self._job_series(self.cpu, pid, cat, sub).inc(cpu_s * w)
        for pid, proto, direction, nbytes, calls in tables.get("sock_io") or ():
            self._job_series(self.sock_bytes, pid, proto, direction).inc(nbytes * w)
            if calls:  # 0 where sock_diag's counters gave the bytes: calls not counted
                self._job_series(self.sock_calls, pid, proto, direction).inc(calls * w)
        for dev, op, nbytes, ios in tables.get("block_io") or ():
            self.block_bytes.labels(dev, op, node).inc(nbytes * w)
            self.block_ios.labels(dev, op, node).inc(ios * w)
        for dev, direction, nbytes, packets in tables.get("net_io") or ():
            self.net_bytes.labels(dev, direction, node).inc(nbytes * w)
            self.net_packets.labels(dev, direction, node).inc(packets * w)
        for kind, count in tables.get("lost") or ():
            if count > 0:
                self.lost.labels(kind, node).inc(count * w)
        self.recorded.labels(node).inc(max(0.0, t1 - t0) * w)

    def forget(self, pids) -> None:
        """The recorder will not refer to these pids again (RotatingWriter.on_forget)."""
        self.jobs.forget(pids)

    def _job_series(self, counter: Counter, pid: int, *labels: str):
        """``counter``'s child for ``labels`` and ``pid``'s job, remembered under that job so that
        it can be removed when the job is gone (``rotated``)."""
        job = self.jobs.of(pid)
        values = (*labels, job.name, job.kind, self.node)
        self.series.setdefault(job, set()).add((counter, values))
        return counter.labels(*values)

    def rotated(self, _path=None, live_pids=None) -> None:
        """One recording file completed (RotatingWriter.on_rotate). With ``live_pids`` (the
        processes the next file may still refer to), the jobs left without a process lose their
        series: a host that runs a new pod or Slurm job every hour keeps a bounded /metrics (the
        server has the dead job's counts; its series ends, as a finished pod's do in cAdvisor)."""
        self.rotations.labels(self.node).inc()
        if live_pids is None:
            return
        for job in self.jobs.retain(live_pids):
            for counter, values in self.series.pop(job, ()):
                try:
                    counter.remove(*values)
                except KeyError:
                    pass
