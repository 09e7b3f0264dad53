"""Are these recordings the nodes of one job? (``dpuprof report node-*.rec``)

A job view adds the nodes up, so it is only made of recordings that belong together. Their job
identity must agree:

- **job id**: where any recording has one (meta ``job.job_id``: ``record --job-id``, else
  ``SLURM_JOB_ID``, else ``TORCHELASTIC_RUN_ID``), every recording must have the same one;
- **what ran**, only where no recording has a job id: the same command line (argv; for ``-p`` the
  attached command lines, for ``--cgroup`` the cgroup, for ``-a`` "every process"). With a job id
  the commands may differ: torchrun's ``--node-rank`` differs per node;
- **time**: every recording's [start_time, end_time] overlaps every other's (the nodes of one job
  run at the same time);
- **hosts**: no host appears twice. A recorder samples every CPU of its node, so two recordings of
  one host would count its CPU twice.

Anything else is refused with one line naming the recordings that differ and how, unless the user
asks for ``--merge``; then the reason is kept as a warning of the job view.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from dataclasses import dataclass

from dpuprof.recording.meta import RecordingMeta


@dataclass(frozen=True)
class Identity:
    """One recording's job identity (see the module docstring)."""
    name: str                 # the report's display name of the recording
    job_id: str | None
    job_id_source: str | None
    what_ran: tuple[str, ...]  # the command's argv, or what -p / --cgroup / -a recorded
    start: float | None       # unix s
    end: float | None         # unix s; the last interval's end when the recorder was cut short
    host: str | None


def _what_ran(meta: RecordingMeta) -> tuple[str, ...]:
    if meta.command:
        return tuple(map(str, meta.command))
    kind = meta.workload
    if kind == "attach":
        lines = sorted(str(a.get("cmdline") or a.get("comm") or "?") for a in meta.attached)
        return ("attached to", *lines)
    if kind == "cgroup":
        return ("cgroup", str(meta.cgroup))
    if kind == "system-wide":
        return ("every process (system-wide)",)
    return ("?",)


def identity(rec, name: str) -> Identity:
    """The Identity of a loaded Recording ``rec``, shown as ``name``."""
    meta = rec.info
    job = meta.job
    job_id = job.get("job_id")
    job_id = str(job_id) if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) and \
        str(job_id) else None
    source = job.get("job_id_source") if isinstance(job.get("job_id_source"), str) else None
    iv = rec.table("intervals")
    start, end = meta.start_time, meta.end_time
    if start is None:
        start = float(iv["t_start"].min()) if not iv.empty else None
    if end is None:
        end = float(iv["t_end"].max()) if not iv.empty else None
    host = meta.host if isinstance(meta.host, str) else None  # a combined job's is a list
    return Identity(name, job_id, source if job_id else None, _what_ran(meta),
                    None if start is None else float(start), None if end is None else float(end), host)


def _clock(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _job_ids(ids: list[Identity]) -> str | None:
    with_id = [i for i in ids if i.job_id]
    if not with_id:
        return None
    first = with_id[0]
    without = [i for i in ids if not i.job_id]
    if without:
        return (f"{without[0].name} has no job id while {first.name} has job {first.job_id} "
                f"({first.job_id_source})")
    other = next((i for i in ids if i.job_id != first.job_id), None)
    if other:
        return f"job ids differ: {first.name} is job {first.job_id}, {other.name} is job {other.job_id}"
    return None


def _commands(ids: list[Identity]) -> str | None:
    if any(i.job_id for i in ids):
        return None
    first = ids[0]
    other = next((i for i in ids if i.what_ran != first.what_ran), None)
    if other:
        return f"no job id, and the commands differ: {_argv_diff(first, other)}"
    return None


def _argv_diff(a: Identity, b: Identity) -> str:
    """Where two command lines part: the first differing argument, with its neighbour before."""
    k = next((i for i, (x, y) in enumerate(zip(a.what_ran, b.what_ran)) if x != y),
             min(len(a.what_ran), len(b.what_ran)))
    if k == 0:
        return f"{a.name} ran {_short(shlex.join(a.what_ran))!r}, {b.name} ran {_short(shlex.join(b.what_ran))!r}"

    def part(argv):
        return _short(shlex.join(argv[k - 1:k + 1]), 40) if k < len(argv) else "(nothing more)"
    return f"at argument {k}, {a.name} has {part(a.what_ran)!r} where {b.name} has {part(b.what_ran)!r}"


def _times(ids: list[Identity]) -> str | None:
    unknown = next((i for i in ids if i.start is None or i.end is None), None)
    if unknown:
        return f"{unknown.name} has no recorded interval, so its time cannot be matched"
    latest = max(ids, key=lambda i: i.start)
    earliest = min(ids, key=lambda i: i.end)
    if latest.start < earliest.end:
        return None
    return (f"not at the same time: {earliest.name} ended at {_clock(earliest.end)}, before "
            f"{latest.name} began at {_clock(latest.start)}")


def _hosts(ids: list[Identity]) -> str | None:
    seen: dict[str, str] = {}
    for i in ids:
        if i.host is None:
            continue
        if i.host in seen:
            return (f"{seen[i.host]} and {i.name} both recorded host {i.host!r} (one recorder samples "
                    "all of a node's CPUs: two would count them twice)")
        seen[i.host] = i.name
    return None


def why_not_one_job(ids: list[Identity]) -> str | None:
    """None when ``ids`` (two or more) are the nodes of one job, else the first reason they are
    not, as one line naming the recordings that differ."""
    for check in (_job_ids, _commands, _times, _hosts):
        why = check(ids)
        if why:
            return why
    return None


def describe(ids: list[Identity]) -> str:
    """How the job was identified, for the job view's header: 'job 42 (SLURM_JOB_ID)' or 'same
    command, overlapping in time'."""
    first = ids[0]
    if first.job_id and all(i.job_id == first.job_id for i in ids):
        return f"job {first.job_id} ({first.job_id_source or 'job id'})"
    return "no job id: the same command, overlapping in time"
