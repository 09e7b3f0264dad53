"""Which job a process belongs to, from its cgroup v2 path (``/proc/PID/cgroup``, ``0::PATH``).

Pure functions, no I/O. The rules, first match wins, reading the path from its leaf upwards so
that the innermost job-like group decides:

- **Kubernetes**: a ``kubepods`` path holding a pod group, in the systemd driver's shape
  (``kubepods-burstable-pod<uid>.slice``, the uid's dashes written as underscores) or the cgroupfs
  driver's (``/kubepods/burstable/pod<uid>/<container>``): kind ``pod``, the pod uid with dashes.
  The path never holds a namespace or pod name, so none is invented; join on the uid (kube-state
  -metrics' ``kube_pod_info{uid}``).
- **Slurm**: a ``job_<id>`` group (``/system.slice/slurmstepd.scope/job_42/step_0/...``, or the
  cgroup/v1-style ``/slurm/uid_1000/job_42/...``): kind ``slurm``, the job id.
- **systemd**: the innermost ``*.scope`` or ``*.service`` group: kind ``unit``, the unit's name.
- anything else: kind ``cgroup``, the path itself (``/`` for kernel threads).

Paths read inside a cgroup namespace (``/../../x.slice/...``) lose their ``..`` steps first.

A process without a path (exited before /proc was read, or the idle task) is kind ``none``, job
``""``.

The agent's own process (``own_pid``: its recorder, /metrics server, and the background thread's
``--push`` and ``--project`` work) is kind ``observer``, job ``dpuprof-agent``, whatever its cgroup:
set apart as ``dpuprof record`` sets apart its recorder (counted in host CPU, never as a job's).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_POD = re.compile(r"^(?:kubepods(?:-[a-z]+)*-)?pod([0-9a-fA-F_-]{8,})(?:\.slice)?$")
_SLURM = re.compile(r"^job_(\d+)$")
_UNIT = re.compile(r"^.+\.(?:scope|service)$")

#: The job kinds, a fixed set: the ``job_kind`` label never grows.
KINDS = ("pod", "slurm", "unit", "cgroup", "observer", "none")


class Job(NamedTuple):
    """A job label: ``kind`` one of KINDS, ``name`` the pod uid, Slurm job id, unit or path."""

    kind: str
    name: str


NO_JOB = Job("none", "")
#: The agent's own process (module docstring).
OBSERVER_JOB = Job("observer", "dpuprof-agent")


def job_of(cgroup: str | None) -> Job:
    """The job for cgroup v2 path ``cgroup`` (as /proc/PID/cgroup writes it, after ``0::``); see
    the module docstring for the rules. None or empty gives NO_JOB."""
    if not cgroup:
        return NO_JOB
    # In a container with a cgroup namespace of its own (a DaemonSet on cgroup v2), the host's
    # other groups read as relative to the container's (``/../../kubepods-...``): the ".." steps
    # name nothing.
    parts = [p for p in cgroup.split("/") if p and p != ".."]
    if any(p.startswith("kubepods") for p in parts):
        for part in reversed(parts):
            m = _POD.match(part)
            if m:
                return Job("pod", m.group(1).replace("_", "-"))
    for part in reversed(parts):
        m = _SLURM.match(part)
        if m:
            return Job("slurm", m.group(1))
    for part in reversed(parts):
        if _UNIT.match(part):
            return Job("unit", part)
    return Job("cgroup", "/" + "/".join(parts))


def jobs_by_pid(processes, own_pid: int | None = None) -> dict[int, Job]:
    """{pid: Job} of a recording's ``processes`` table (columns pid, cgroup; a NULL cgroup, read
    as NaN or None, is NO_JOB). A pid with several rows takes its last one's job. ``own_pid`` (the
    recorder's, meta ``recorder_pid``) is OBSERVER_JOB."""
    out = {int(pid): job_of(cg if isinstance(cg, str) else None)
           for pid, cg in zip(processes["pid"], processes["cgroup"])}
    if own_pid is not None and own_pid in out:
        out[own_pid] = OBSERVER_JOB
    return out


class JobLabels:
    """{pid: Job} for the processes seen so far, with at most ``max_jobs`` distinct jobs: once
    that many are known, a new one is counted as ``Job("cgroup", "other")``, so a host that makes
    a cgroup per short-lived task cannot grow the metrics without bound. ``own_pid`` (the agent's
    process) is always OBSERVER_JOB, outside that count."""

    OTHER = Job("cgroup", "other")

    def __init__(self, max_jobs: int = 500, own_pid: int | None = None):
        self.max_jobs, self.own_pid = max_jobs, own_pid
        self.by_pid: dict[int, Job] = {}
        self.jobs: set[Job] = set()

    def note(self, pid: int, cgroup: str | None) -> None:
        """Remember ``pid``'s job from its cgroup path (a path already known for it is kept
        unless a new one is given: a process can be moved between cgroups)."""
        if pid == self.own_pid or (cgroup is None and pid in self.by_pid):
            return
        job = job_of(cgroup)
        if job not in self.jobs and job != NO_JOB:
            if len(self.jobs) >= self.max_jobs:
                job = self.OTHER
            else:
                self.jobs.add(job)
        self.by_pid[pid] = job

    def of(self, pid: int) -> Job:
        """The job of ``pid``; NO_JOB for one never noted (pid 0, the idle task, included);
        OBSERVER_JOB for ``own_pid``."""
        return OBSERVER_JOB if pid == self.own_pid else self.by_pid.get(pid, NO_JOB)

    def forget(self, pids) -> None:
        """Drop these pids (exited: the recorder will not refer to them again) without forgetting
        any job: a job left without a process is forgotten at ``retain`` (a rotation), so that its
        series ends with a file. Keeps ``by_pid`` to the live processes within a file, not every
        pid the file saw."""
        for pid in pids:
            self.by_pid.pop(pid, None)

    def retain(self, pids) -> set[Job]:
        """Keep only ``pids`` (the processes still referred to); return the jobs that no longer
        have a process, which are forgotten too (and so free a place under ``max_jobs``)."""
        keep = set(pids)
        self.by_pid = {pid: job for pid, job in self.by_pid.items() if pid in keep}
        gone = self.jobs - set(self.by_pid.values())
        self.jobs -= gone
        return gone
