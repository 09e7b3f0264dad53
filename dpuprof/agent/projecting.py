"""Projected offload per job at each rotation: what a DPU would free, as Prometheus gauges.

When a recording file is completed, the agent's background thread (background.py, so the
recorder's drains are never delayed by the model) loads it and hands it to ``Projector.consume``,
which groups its processes into jobs by cgroup (jobs.py) and runs the pure projection
(dpuprof/project, as ``dpuprof project`` does) once per DPU profile and job, with that job's
processes as the workload. A file that comes while the previous one is still being worked on is
skipped and counted.

Gauges, replaced whole at each projection (a job that is gone loses its series):

- ``dpuprof_projected_freed_cores{dpu, job_id, job_kind, node}``: the job's CPU seconds the DPU
  would free, per second of the file (cores).
- ``dpuprof_projected_speedup{dpu, bound, job_id, job_kind, node}``: the job's speedup range,
  ``bound`` low / expected / high (docs/projection-model.md).
- ``dpuprof_projection_skipped_total{node, reason}``: files not projected (``busy``, ``error``).

Only the ``max_jobs`` jobs with the most CPU in the file are projected, bounding the cost.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge

from dpuprof.agent.jobs import NO_JOB, OBSERVER_JOB, jobs_by_pid
from dpuprof.project.assemble import build_projection
from dpuprof.project.inputs import from_recording
from dpuprof.project.profiles import load_profile


def job_pids(processes, cpu, max_jobs: int, own_pid: int | None = None) -> dict:
    """{Job: set of pids} of a recording's ``processes`` table (pid, cgroup) for the ``max_jobs``
    jobs with the most CPU in its ``cpu_category`` table (pid, category, cpu_s); idle, processes
    without a cgroup and ``own_pid`` (the recorder's: the agent, whose projection work is not a
    job's) are no job."""
    jobs = jobs_by_pid(processes, own_pid)
    busy = cpu[cpu["category"] != "idle"].groupby("pid")["cpu_s"].sum()
    per_job: dict = {}
    for pid, cpu_s in busy.items():
        job = jobs.get(int(pid), NO_JOB)
        if job not in (NO_JOB, OBSERVER_JOB):
            per_job[job] = per_job.get(job, 0.0) + float(cpu_s)
    top = sorted(per_job, key=per_job.get, reverse=True)[:max_jobs]
    return {job: {pid for pid, j in jobs.items() if j == job} for job in top}


def project_jobs(rec, profiles: list, max_jobs: int) -> list[tuple]:
    """[(dpu name, Job, freed cores, {low, expected, high})] for the loaded Recording ``rec``."""
    base = from_recording(rec)
    out = []
    for job, pids in job_pids(rec.table("processes"), rec.table("cpu_category"), max_jobs,
                              rec.info.recorder_pid).items():
        base.workload_pids = pids
        for name, profile in profiles:
            sp = build_projection(base, profile, compare_modes=False).speedup
            freed = (sp.workload_freed_s or 0.0) / base.duration_s
            out.append((name, job, freed, {"low": sp.low, "expected": sp.expected, "high": sp.high}))
    return out


class Projector:
    """Projects completed files on ``dpus`` (profile names or TOML paths) and publishes the gauges
    in ``registry``: a task of the agent's RotationWorker (background.py). Profiles are loaded
    (and checked) at construction: a bad name is a UserError before the agent starts."""

    def __init__(self, dpus: list[str], node: str, registry: CollectorRegistry, max_jobs: int = 20):
        self.profiles = [(name, load_profile(name)) for name in dpus]
        self.node, self.max_jobs = node, max_jobs
        labels = ("dpu", "job_id", "job_kind", "node")
        self.freed = Gauge("dpuprof_projected_freed_cores", "Cores of the job's CPU a DPU would free",
                           labels, registry=registry)
        self.speedup = Gauge("dpuprof_projected_speedup", "Projected job speedup on the DPU (low, expected, high)",
                             ("dpu", "bound") + labels[1:], registry=registry)
        self.skipped = Counter("dpuprof_projection_skipped", "Completed recordings not projected",
                               ("node", "reason"), registry=registry)
        self.errors: list[str] = []  # the last few reasons, for the agent's log

    def consume(self, rec) -> None:
        """Project the loaded Recording ``rec`` and publish the result."""
        self.publish(project_jobs(rec, self.profiles, self.max_jobs))

    def skip(self, path: Path, reason: str, why: str = "") -> None:
        """Count a file not projected: ``reason`` busy or error (``why`` kept for the log)."""
        self.skipped.labels(self.node, reason).inc()
        if reason == "error":
            self.errors = (self.errors + [f"{Path(path).name}: {why}"])[-5:]

    def publish(self, results: list[tuple]) -> None:
        """Replace the gauges with ``results`` (project_jobs')."""
        self.freed.clear()
        self.speedup.clear()
        for dpu, job, freed, bounds in results:
            self.freed.labels(dpu, job.name, job.kind, self.node).set(freed)
            for bound, value in bounds.items():
                if value is not None:
                    self.speedup.labels(dpu, bound, job.name, job.kind, self.node).set(float(value))
