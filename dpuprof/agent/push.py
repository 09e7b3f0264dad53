"""``--push URL``: each completed recording's CPU profiles, one per job, to a Pyroscope-compatible
``/ingest`` endpoint (Grafana Pyroscope, or anything that speaks its ingest API).

The API, as documented in "Pyroscope server HTTP API", Ingestion
(https://grafana.com/docs/pyroscope/latest/configure-server/about-server-api/): ``POST /ingest``
with the metadata as query parameters -- ``name`` (application name with ``{label=value,...}``),
``from`` and ``until`` (unix seconds), ``format``, ``sampleRate`` (Hz), ``spyName`` -- and the
profile in the body. With ``format=pprof``:

- ``name`` is the application name's *prefix*: the server appends the profile type, so
  ``dpuprof{...}`` is shown as ``dpuprof.cpu{...}`` (Pyroscope 1.x: ``service_name="dpuprof"``,
  profile types ``process_cpu:...``, one per sample type).
- the body is a ``multipart/form-data`` form: the profile in a file field named ``profile`` and a
  sample type configuration (JSON) in one named ``sample_type_config``. Ours names the ``samples``
  column ``cpu`` (samples, summed, ``sampled``: scaled by the sampling rate); Pyroscope 1.x reads
  every sample type of the profile whatever the configuration says (cpu and per-category ns).

The profile is the one ``dpuprof report --format pprof`` writes (dpuprof/render/formats/pprof.py,
gzip-compressed ``profile.proto``), of the job's processes only. Labels: ``job_id`` and
``job_kind`` as /metrics has them (jobs.py), and ``node``; a ``,``, ``{``, ``}`` or ``=`` in a
value (which would end it in ``name``) is written ``_``.

Through ``requests`` (a maintained HTTP client: multipart encoding, connection reuse, timeouts).
A push that fails -- the server unreachable, or an HTTP status other than 2xx -- is one line per
file (``warn``) and one increment of ``dpuprof_push_failures_total{node, reason}``; it never stops
the recording. Runs in the agent's background thread (background.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Callable

import requests
from prometheus_client import CollectorRegistry, Counter

from dpuprof import __version__
from dpuprof.agent.jobs import NO_JOB, Job, JobLabels, jobs_by_pid
from dpuprof.render.formats import pprof
from dpuprof.render.view import Report, build_view, stack_table, workload_stack_samples

APP = "dpuprof"
SPY = "dpuprof"
#: (connect, read) seconds: a server that does not answer costs the thread at most this per file
#: (an unreachable server ends the file's pushes at the first profile, see Pusher.consume)
TIMEOUT_S = (5.0, 30.0)
SAMPLE_TYPE_CONFIG = {"samples": {"units": "samples", "aggregation": "sum", "display-name": "cpu", "sampled": True}}
_RESERVED = str.maketrans({c: "_" for c in ",{}="})


def app_name(job: Job, node: str) -> str:
    """The ``name`` query parameter: ``dpuprof{job_id=ID,job_kind=KIND,node=NODE}``."""
    labels = {"job_id": job.name, "job_kind": job.kind, "node": node}
    return APP + "{" + ",".join(f"{k}={str(v).translate(_RESERVED).strip()}" for k, v in labels.items()) + "}"


def job_pids(rec, max_jobs: int = 500) -> dict[Job, set[int]]:
    """{Job: pids} of the processes with stack samples in ``rec`` (the recorder's own left out),
    most samples first; beyond ``max_jobs`` jobs the rest are one, JobLabels.OTHER, as in
    /metrics. Processes without a cgroup are job NO_JOB (kind ``none``), as in /metrics."""
    ss = workload_stack_samples(rec)
    per_pid = ss.groupby("pid")["samples"].sum()
    jobs = jobs_by_pid(rec.table("processes"))
    out: dict[Job, set[int]] = {}
    weight: dict[Job, float] = {}
    for pid, n in per_pid.items():
        job = jobs.get(int(pid), NO_JOB)
        out.setdefault(job, set()).add(int(pid))
        weight[job] = weight.get(job, 0.0) + float(n)
    order = sorted(out, key=weight.get, reverse=True)
    if len(order) <= max_jobs:
        return {job: out[job] for job in order}
    keep = [job for job in order[:max_jobs - 1] if job != JobLabels.OTHER]
    return {**{job: out[job] for job in keep},
            JobLabels.OTHER: set().union(*(out[job] for job in order if job not in keep))}


def job_profiles(rec, max_jobs: int = 500) -> list[tuple[Job, bytes]]:
    """[(Job, gzipped pprof)] of ``rec``: ``--format pprof``'s profile of each job's processes
    (jobs without a busy stack sample left out)."""
    view = build_view(rec)
    view.recording = rec
    out = []
    for job, pids in job_pids(rec, max_jobs).items():
        stacks = stack_table(rec, pids)
        if stacks["samples"].sum() <= 0:  # only idle or the observer: nothing for a flame graph
            continue
        jv = dataclasses.replace(view, name=f"{view.name} {job.kind} {job.name}".rstrip(), stacks=stacks)
        out.append((job, pprof.render(Report(kind="single", runs=[jv])).main))
    return out


def ingest_params(rec, job: Job, node: str) -> dict:
    """The query parameters of ``job``'s push of ``rec``: from/until in whole unix seconds (the
    API's unit) around the file's window, sampleRate its sampling frequency (Hz)."""
    iv = rec.table("intervals")
    params = {"name": app_name(job, node), "from": str(math.floor(float(iv["t_start"].min()))),
              "until": str(math.ceil(float(iv["t_end"].max()))), "format": "pprof", "spyName": SPY}
    if rec.sample_freq_hz > 0:
        params["sampleRate"] = str(int(round(rec.sample_freq_hz)))
    return params


class Pusher:
    """Pushes each completed file's job profiles to ``url`` (options.parse_push_url's, ending in
    /ingest): a task of the agent's RotationWorker. ``warn`` gets one line per file that was not
    pushed whole."""

    def __init__(self, url: str, node: str, registry: CollectorRegistry, warn: Callable[[str], None],
                 max_jobs: int = 500):
        self.url, self.node, self.warn, self.max_jobs = url, node, warn, max_jobs
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"dpuprof/{__version__}"
        self.failures = Counter("dpuprof_push_failures", "Completed recordings whose profiles were not all "
                                "pushed (reason: connect, http, busy, error)", ("node", "reason"), registry=registry)
        self.pushed = Counter("dpuprof_pushed_profiles", "Job profiles accepted by the --push server",
                              ("node",), registry=registry)
        self.pushed.labels(node)  # present from the first scrape, at 0

    def consume(self, rec) -> None:
        """Push ``rec``'s job profiles, the busiest job first. An unreachable server (refused,
        timed out) ends this file's pushes; an HTTP error status is counted and the next job tried."""
        if rec.table("intervals").empty:
            return
        profiles = job_profiles(rec, self.max_jobs)
        failed, first, reason = 0, "", ""
        for i, (job, data) in enumerate(profiles):
            why, kind = self._post(ingest_params(rec, job, self.node), data)
            if why is None:
                self.pushed.labels(self.node).inc()
                continue
            failed, first, reason = failed + 1, first or why, reason or kind
            if kind == "connect":
                failed += len(profiles) - i - 1  # the rest: the server is not there now
                break
        if failed:
            self._failed(rec.path, reason, f"{failed} of {len(profiles)} profile(s) not pushed: {first}")

    def _post(self, params: dict, data: bytes) -> tuple[str | None, str]:
        """POST one profile; (None, "") when accepted, else (the reason in a few words, kind)."""
        files = {"profile": ("profile.pb.gz", data, "application/octet-stream"),
                 "sample_type_config": ("sample_type_config.json", json.dumps(SAMPLE_TYPE_CONFIG),
                                        "application/json")}
        try:
            resp = self.session.post(self.url, params=params, files=files, timeout=TIMEOUT_S)
        except requests.RequestException as err:
            return _short(err), "connect"
        if 200 <= resp.status_code < 300:
            return None, ""
        body = " ".join(resp.text.split())[:200]
        return f"HTTP {resp.status_code} {resp.reason or ''}".rstrip() + (f": {body}" if body else ""), "http"

    def skip(self, path: Path, reason: str, why: str = "") -> None:
        """A file not pushed at all: ``reason`` busy (the thread was still on the previous file) or
        error (it could not be loaded or encoded)."""
        self._failed(path, reason, why or reason)

    def _failed(self, path: Path, reason: str, why: str) -> None:
        self.failures.labels(self.node, reason).inc()
        self.warn(f"--push {self.url}: {Path(path).name}: {why}")


def _short(err: Exception) -> str:
    """A requests exception in a few words: its innermost reason (``Connection refused``) rather
    than the chain of wrapped urllib3 exceptions."""
    while err.__context__ is not None and not isinstance(err.__context__, KeyboardInterrupt):
        err = err.__context__
    text = str(err).split("] ")[-1]  # "[Errno 111] Connection refused" -> "Connection refused"
    return f"cannot reach the server ({text or type(err).__name__})"
