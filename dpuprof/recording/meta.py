"""The recording's metadata as one typed object, built once when a Recording is made.

``Recording.meta`` stays the raw dict (every key as stored, unknown ones included, for tools and
the projection's inputs); ``Recording.info`` is this ``RecordingMeta``: the keys the summary and
the report draw, each with its type and an explicit default for a file that lacks it (older
schema versions, fixtures, a combined job recording). The reader has already checked the types of
the keys it knows (reader ``_META_CHECKS``); the shapes it does not check (``attached``, ``job``,
``window``, ``gpu``) are normalised here, once, so no renderer guards them again.
Units: seconds (``_s``, ``interval_s``), unix seconds (``start_time``, ``end_time``), Hz.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WindowMeta:
    """--time: the part of the recording kept (seconds from its start) and how it was chosen
    (``dpuprof.projection.window.Window.as_dict``, set by render/timewindow.py)."""

    start_s: float
    end_s: float
    intervals: int
    how: str

    def as_dict(self) -> dict:
        return {"start_s": self.start_s, "end_s": self.end_s, "intervals": self.intervals, "how": self.how}

    @classmethod
    def from_dict(cls, win) -> "WindowMeta | None":
        """The window of meta ``window``, None when there is none (or it is not an object)."""
        if not isinstance(win, dict):
            return None
        return cls(start_s=float(win.get("start_s") or 0.0), end_s=float(win.get("end_s") or 0.0),
                   intervals=int(win.get("intervals") or 0), how=str(win.get("how") or ""))


@dataclass(frozen=True)
class DutyMeta:
    """``agent --duty``: ``on_s`` seconds recorded of every ``period_s`` (the reader checked
    0 < on_s < period_s)."""

    on_s: float
    period_s: float


@dataclass(frozen=True)
class RecordingMeta:
    schema_version: int = 1
    dpuprof_version: str | None = None
    #: the host name; a combined job recording (render/merge.py) holds one per node, or a line
    host: str | list | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    #: None when the recorder did not say (a report counts it as 1 CPU)
    cpu_count: int | None = None
    command: list[str] | None = None
    #: what in_workload marks: "command", "attach", "cgroup" or "system-wide"
    workload: str = "command"
    system_wide: bool = False
    #: -p: [{pid, comm, cmdline}] (entries that are not objects dropped)
    attached: list[dict] = field(default_factory=list)
    cgroup: str | None = None
    mode: str | None = None
    #: stack sampling frequency; 0 when unknown (psutil mode, old files)
    sample_freq_hz: float = 0.0
    interval_s: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    complete: bool = False
    exit_code: int | None = None
    #: False for --probes psutil (no classified samples)
    category_split: bool = True
    probes_unavailable: dict[str, str] = field(default_factory=dict)
    recorder_pid: int | None = None
    #: "measured" or "unavailable: <reason>" (schema v5), else None
    probe_cost: str | None = None
    #: probe_cost holds intervals 0, N, 2N, ... only (the statistics cost every program run: on one
    #: interval in N, record/drain/cost.py); 1 in older recordings
    probe_cost_every: int = 1
    #: --time: {start_s, end_s, intervals, how} of the part kept (render/timewindow.py)
    window: WindowMeta | None = None
    #: the duty cycle of an agent's recording, None when it recorded all the time
    duty: DutyMeta | None = None
    #: {job_id, job_id_source, host, ...}: which job's node this is (record/metadata.py)
    job: dict = field(default_factory=dict)
    #: {available, reason, devices}: whether NVML found a GPU
    gpu: dict = field(default_factory=dict)
    #: seconds added to the recorded interval times to put them on the wall clock
    clock_offset_s: float = 0.0
    #: the command's CPU seconds as the kernel counted them when it was reaped (its tree's, through
    #: wait4: RUSAGE_CHILDREN), when the recording covered its whole life; else None
    command_cpu_s: float | None = None
    #: {table: counter} for net_io and block_io read from the kernel's counters ("/proc/PID/net/dev",
    #: "/proc/diskstats"); a table not named here was counted by its probe
    io_sources: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, meta: dict) -> "RecordingMeta":
        """The typed metadata of the raw ``meta`` dict (missing keys take the defaults above)."""
        def obj(key) -> dict:
            value = meta.get(key)
            return value if isinstance(value, dict) else {}

        pid, every = meta.get("recorder_pid"), meta.get("probe_cost_every")
        return cls(
            schema_version=int(meta.get("schema_version") or 1),
            dpuprof_version=meta.get("dpuprof_version"), host=meta.get("host"), kernel=meta.get("kernel"),
            cpu_model=meta.get("cpu_model"),
            cpu_count=None if meta.get("cpu_count") is None else int(meta["cpu_count"]),
            command=meta.get("command"), workload=meta.get("workload") or "command",
            system_wide=meta.get("system_wide") is True,
            attached=[a for a in _list(meta.get("attached")) if isinstance(a, dict)],
            cgroup=meta.get("cgroup"), mode=meta.get("mode"),
            sample_freq_hz=float(meta.get("sample_freq_hz") or 0),
            interval_s=meta.get("interval_s"), start_time=meta.get("start_time"), end_time=meta.get("end_time"),
            # an explicit null counts as false, as it always has (bool(None))
            complete=bool(meta.get("complete", False)), exit_code=meta.get("exit_code"),
            category_split=bool(meta.get("category_split", True)),
            probes_unavailable=dict(meta.get("probes_unavailable") or {}),
            recorder_pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
            probe_cost=meta.get("probe_cost") if isinstance(meta.get("probe_cost"), str) else None,
            probe_cost_every=every if isinstance(every, int) and not isinstance(every, bool) and every > 0 else 1,
            window=WindowMeta.from_dict(meta.get("window")), duty=_duty(meta.get("duty")),
            job=obj("job"), gpu=obj("gpu"), clock_offset_s=_number(meta.get("clock_offset_s")) or 0.0,
            command_cpu_s=_number(meta.get("command_cpu_s")), io_sources=obj("io_sources"),
        )


def _duty(duty) -> DutyMeta | None:
    """Meta ``duty`` ({on_s, period_s}), None without one."""
    if not isinstance(duty, dict):
        return None
    return DutyMeta(on_s=float(duty["on_s"]), period_s=float(duty["period_s"]))


def _list(value) -> list:
    """``value`` when it is a list, else [] (a damaged file's ``attached`` may be a number)."""
    return value if isinstance(value, list) else []


def _number(value) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
