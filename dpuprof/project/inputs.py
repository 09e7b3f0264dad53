"""What the projection reads from a Recording, as plain DataFrames.

``ProjectionInput`` is the boundary between the Recording file and the pure model: tests build one
from synthetic DataFrames, the CLI builds one with :func:`from_recording`. Columns and units are
those of ``dpuprof.recording.schema`` (``cpu_s`` CPU seconds, ``bytes``, ``packets``, ``ios``,
``calls`` counts over the whole recording).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from dpuprof.categories import OBSERVER
from dpuprof.errors import UserError
from dpuprof.recording import partial
from dpuprof.recording.schema import TABLES

#: Tables the model uses.
USED_TABLES = ("cpu_category", "net_io", "block_io", "sock_io", "softirq", "stacks", "stack_samples",
               "host_disk", "codec_calls", "collectives", "markers", "intervals", "processes", "threads",
               "thread_time", "thread_wait", "thread_category", "gpu")
_TEXT_COLUMNS = ("category", "subcategory", "dev", "op", "direction", "protocol", "vector", "folded", "lib",
                 "func", "kind", "comm", "state", "cmdline")


def empty(table: str) -> pd.DataFrame:
    """An empty DataFrame with the columns of ``table``."""
    return pd.DataFrame({c: pd.Series(dtype="object" if c in _TEXT_COLUMNS else "float64") for c in TABLES[table]})


@dataclass
class ProjectionInput:
    """Everything the model needs.

    ``frames[name]`` holds the recording table ``name`` (columns of ``schema.TABLES``); missing
    tables are empty. ``workload_pids`` are the processes of the recorded job (in_workload=1).
    ``cpu_count`` host CPUs, ``duration_s`` wall seconds; capacity = cpu_count x duration_s.
    ``detached``: the uprobes that stopped early (dpuprof.recording.partial.DetachedProbe), whose
    rows in codec_calls/collectives are partial (project/codecs.py scales or bounds them).
    ``waits_measured``: False when the threads' waits were not recorded (no sched_wait probe:
    ``record --light``, or a --probes list without it), so thread_wait is empty for want of a probe,
    not of waits: the critical path has no inputs then, although thread_time has rows.

    Rows of the ``observer`` category (samples in dpuprof's own BPF programs: the recorder's cost,
    docs/taxonomy.md) are dropped from ``cpu_category``, ``stacks`` and ``thread_category`` here,
    once, so no part of the model can count or offer to offload them. Each process's other rows
    already hold only its own work (the exact time was split over all its samples, observer ones
    included, when recorded), so nothing is re-spread.
    """

    cpu_count: int
    duration_s: float
    workload_pids: set = field(default_factory=set)
    frames: dict = field(default_factory=dict)
    source: str = ""
    detached: tuple = ()
    waits_measured: bool = True

    def __post_init__(self) -> None:
        self.frames = {name: _without_observer(name, df) for name, df in self.frames.items()}

    def table(self, name: str) -> pd.DataFrame:
        df = self.frames.get(name)
        return empty(name) if df is None else df

    @property
    def capacity_s(self) -> float:
        return float(self.cpu_count) * float(self.duration_s)


def _without_observer(name: str, df):
    """``df`` (recording table ``name``) less its observer rows; other tables unchanged."""
    if df is None or df.empty:
        return df
    if name in ("cpu_category", "stacks") and "category" in df.columns:
        keep = df["category"] != OBSERVER
    elif name == "thread_category" and "subcategory" in df.columns:
        sub = df["subcategory"].astype(str)
        keep = ~(sub.str.startswith(OBSERVER + ".") | (sub == OBSERVER))
    else:
        return df
    return df if keep.all() else df[keep].reset_index(drop=True)


def from_recording(rec) -> ProjectionInput:
    """Build the input from a loaded :class:`dpuprof.recording.Recording`.

    Raises UserError when the recording cannot be projected: no per-category CPU data (recorded
    with ``--probes psutil``), no duration, or no CPU count.
    """
    where = str(rec.path)
    if not rec.category_split:
        raise UserError(f"{where}: no per-category CPU data (mode {rec.meta.get('mode', '?')!r}, "
                        "category_split false or empty cpu_category), so there is nothing to offload; "
                        "re-record without --probes psutil")
    cpu_count = rec.meta.get("cpu_count")
    if isinstance(cpu_count, bool) or not isinstance(cpu_count, (int, float)) or cpu_count <= 0:
        raise UserError(f"{where}: metadata has no usable cpu_count ({cpu_count!r}); cannot size host capacity")
    duration = rec.duration_s
    if not duration or duration <= 0:
        raise UserError(f"{where}: the recording has no duration (no intervals); record for longer")
    frames = {name: rec.table(name) for name in USED_TABLES}
    waits = "sched_wait" in (rec.meta.get("probes_used") or ()) or not frames["thread_wait"].empty
    return ProjectionInput(cpu_count=int(cpu_count), duration_s=float(duration),
                           workload_pids=set(rec.workload_pids), frames=frames, source=where,
                           detached=tuple(partial.detached(rec.meta, frames["intervals"])), waits_measured=waits)
