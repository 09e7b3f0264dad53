"""What every renderer draws from: a ``RunView`` per recording (plus a merged one for a cluster)
and the ``Report`` that holds them.

A RunView is a handful of small DataFrames derived once from a Recording -- CPU by category, the
same over time, throughput over time, and the classified stacks -- so renderers never read raw
tables; a job of several nodes adds a merged view, built from the nodes' tables by ``merge``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from dpuprof.categories import CATEGORIES, IDLE, INFRASTRUCTURE, NOT_WORK, OBSERVER
from dpuprof.errors import UserError
from dpuprof.recording.folded import SEP, escape
from dpuprof.recording.meta import RecordingMeta
from dpuprof.recording.summary import summarize
from dpuprof.render.losses import from_recording as losses_of
from dpuprof.render.notes import RECORDER_LABEL, run_notes, with_projection
from dpuprof.render.observer import cost as observer_cost
from dpuprof.render.run_summary import RunSummary

if TYPE_CHECKING:  # annotations only: pydantic is imported when a projection file is read
    from dpuprof.projection.schema import Projection

#: host_cpu fields shown over time when a recording has no category split (psutil mode)
CPU_TIME_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
#: recording file names that say nothing: the report names such a run after its folder
GENERIC_NAMES = ("recording", "dpuprof")
#: how the recorder's own CPU is named where host CPU is listed by process
IO_COLUMNS = ("net_tx", "net_rx", "disk_read", "disk_write", "read_iops", "write_iops")


@dataclass
class RunView:
    name: str
    path: str
    #: the recording's typed metadata (a job total's: the nodes' combined, ``host`` one per node)
    meta: RecordingMeta
    #: how reports name the workload (``workload_label``)
    workload_label: str
    #: the summary contract (dpuprof.recording.summary, plus the report's additions: build_view)
    #: and the figures the tables read from it
    summary: RunSummary
    #: the validated projection file (dpuprof.projection.schema.Projection), or None
    projection: Projection | None
    warnings: list[str]
    cpu_count: float
    duration_s: float
    interval_s: float
    category_split: bool
    #: index CATEGORIES + idle + observer; columns cpu_s, samples (host-wide)
    cats: pd.DataFrame
    #: the same for the workload's processes only
    wl_cats: pd.DataFrame
    #: index t_s (start of interval, from the start of the recording); columns CATEGORIES, in
    #: cores (CPU seconds per second); CPU_TIME_FIELDS instead when there is no category split
    timeline: pd.DataFrame
    #: index t_s; IO_COLUMNS: bytes/s and IO/s
    io: pd.DataFrame
    #: folded (process comm as root frame), category, subcategory, samples; idle and observer
    #: (the recorder's BPF programs) excluded
    stacks: pd.DataFrame
    #: busy CPU seconds by subcategory, largest first
    subcats: pd.Series
    nodes: list["RunView"] = field(default_factory=list)
    #: the (windowed) Recording this view was built from, for exports that need its raw tables
    #: (perfetto: real pids, threads, wall-clock times); None for a merged cluster total
    recording: object = None
    #: the job view's per-node rows, spread, stragglers and projections (render/job.py JobView);
    #: None except for a merged job total
    job: object = None

    @property
    def export_freq_hz(self) -> float:
        """The frequency stack exports (pprof, speedscope) weigh samples by: the recorded
        sampling frequency, or 1 Hz (one sample counts as one second) when it is unknown."""
        return self.meta.sample_freq_hz or 1.0

    @property
    def host_text(self) -> str | None:
        """The host line of a header: the host name, or a job's hosts joined by ', '."""
        host = self.meta.host
        return ", ".join(map(str, host)) if isinstance(host, list) else host

    # Derived figures, all from ``cats`` (host-wide) so merged views stay consistent; each is
    # computed once, on first use (``cats`` is not changed after the view is built).
    @cached_property
    def capacity_s(self) -> float:
        """CPU seconds available: all cores for the whole recording (summed over a cluster's nodes,
        which need not have run equally long)."""
        if self.nodes:
            return sum(n.capacity_s for n in self.nodes)
        return self.cpu_count * self.duration_s

    @cached_property
    def busy_s(self) -> float:
        return float(self.cats.loc[list(CATEGORIES), "cpu_s"].sum())

    @cached_property
    def busy_samples(self) -> float:
        return float(self.cats.loc[list(CATEGORIES), "samples"].sum())

    @cached_property
    def infra_s(self) -> float:
        return float(self.cats.loc[list(INFRASTRUCTURE), "cpu_s"].sum())

    @cached_property
    def infra_samples(self) -> float:
        return float(self.cats.loc[list(INFRASTRUCTURE), "samples"].sum())

    def cores(self, category: str) -> float:
        """Average cores used by ``category`` over the recording."""
        return float(self.cats.loc[category, "cpu_s"]) / self.duration_s if self.duration_s else 0.0

    @cached_property
    def cores_for_ai_pct(self) -> float | None:
        """Share of host CPU capacity not consumed by infrastructure work (measured)."""
        if not self.category_split or not self.capacity_s:
            return None
        return 100.0 * (1 - self.infra_s / self.capacity_s)

    def projected_s(self, category: str) -> float | None:
        """CPU seconds of ``category`` after the projection (the measured ones for a category it
        leaves alone), or None without a projection."""
        if self.projection is None:
            return None
        row = self.projection.by_category.get(category)
        return row.after_s if row is not None else float(self.cats.loc[category, "cpu_s"])


@dataclass
class Report:
    kind: str  # "single", "compare" or "merge"
    runs: list[RunView]
    total: RunView | None = None
    comparison: pd.DataFrame | None = None
    #: a comparison's check of A's projection against B (render/projection_check.py ProjectionCheck)
    check: object = None
    workers: int | None = None  # -j: processes the renderers may draw charts in (None: one per CPU)

    @property
    def main(self) -> RunView:
        """The view a single-run layout shows: the cluster total, else the (last) run."""
        return self.total if self.total is not None else self.runs[-1]

    @property
    def title(self) -> str:
        if self.kind == "compare":
            return f"{self.runs[0].name} vs {self.runs[1].name}"
        if self.kind == "merge":
            return f"job of {len(self.runs)} nodes"
        return self.runs[0].name


# --------------------------------------------------------------------------------------------
# Building a view from a recording

def require_stacks(report: "Report", fmt: str) -> None:
    """Stack exports need classified stack samples: refuse clearly when a run has none."""
    for v in report.runs:
        if not v.category_split:
            raise UserError(f"{v.name} has no stack samples (psutil mode): --format {fmt} needs a "
                            "recording made with the BPF probes")


def frame_name(comm: str, pid: int) -> str:
    """A process name usable as a folded-stack frame (no ';', no line breaks)."""
    comm = escape(comm or "").strip()
    return comm or f"pid {pid}"


def cat_totals(df: pd.DataFrame) -> pd.DataFrame:
    """Per category (every category, then idle and observer, in that order; zeros where absent):
    ``cpu_s`` (seconds) and ``samples``, summed from ``df``'s rows (columns category, cpu_s,
    samples)."""
    index = list(CATEGORIES) + [IDLE, OBSERVER]
    if df.empty:
        return pd.DataFrame(0.0, index=index, columns=["cpu_s", "samples"])
    g = df.groupby("category")[["cpu_s", "samples"]].sum()
    return g.reindex(index, fill_value=0.0).astype(float)


def intervals(rec) -> pd.DataFrame:
    """The recording's intervals table indexed by ``interval``, plus ``t_s`` (seconds from the
    recording's start, as every timeline counts it) and ``dt`` (the interval's length, seconds,
    at least 1e-9 so rates never divide by zero)."""
    iv = rec.table("intervals").set_index("interval")
    if iv.empty:
        return iv.assign(t_s=[], dt=[])
    t0 = float(rec.info.start_time or iv["t_start"].min())
    t0 = min(t0, float(iv["t_start"].min()))
    return iv.assign(t_s=(iv["t_start"] - t0).round(6), dt=(iv["t_end"] - iv["t_start"]).clip(lower=1e-9))


def _per_second(iv: pd.DataFrame, pivot: pd.DataFrame, columns) -> pd.DataFrame:
    """Rows of ``pivot`` (index interval) divided by interval length, re-indexed on t_s."""
    pivot = pivot.reindex(index=iv.index, columns=list(columns), fill_value=0.0).fillna(0.0)
    out = pivot.div(iv["dt"], axis=0)
    out.index = pd.Index(iv["t_s"].values, name="t_s")
    return out.astype(float)


def _timeline(rec, iv: pd.DataFrame, split: bool) -> pd.DataFrame:
    if split:
        cat = rec.table("cpu_category")
        pivot = cat.pivot_table(index="interval", columns="category", values="cpu_s", aggfunc="sum")
        return _per_second(iv, pivot, CATEGORIES)
    host = rec.table("host_cpu")
    pivot = host.pivot_table(index="interval", columns="field", values="seconds", aggfunc="sum")
    return _per_second(iv, pivot, CPU_TIME_FIELDS)


def _io(rec, iv: pd.DataFrame) -> pd.DataFrame:
    net, blk = rec.table("net_io"), rec.table("block_io")
    parts = []
    if not net.empty:
        p = net.pivot_table(index="interval", columns="direction", values="bytes", aggfunc="sum")
        parts.append(p.rename(columns={"tx": "net_tx", "rx": "net_rx"}))
    else:
        hn = rec.table("host_net").groupby("interval")[["bytes_sent", "bytes_recv"]].sum()
        parts.append(hn.rename(columns={"bytes_sent": "net_tx", "bytes_recv": "net_rx"}))
    if not blk.empty:
        b = blk.pivot_table(index="interval", columns="op", values="bytes", aggfunc="sum")
        n = blk.pivot_table(index="interval", columns="op", values="ios", aggfunc="sum")
        parts.append(b.rename(columns={"read": "disk_read", "write": "disk_write"}))
        parts.append(n.rename(columns={"read": "read_iops", "write": "write_iops"}))
    else:
        hd = rec.table("host_disk").groupby("interval").sum()
        parts.append(hd.rename(columns={"read_bytes": "disk_read", "write_bytes": "disk_write",
                                        "read_count": "read_iops", "write_count": "write_iops"}))
    pivot = pd.concat(parts, axis=1) if parts else pd.DataFrame()
    pivot = pivot.loc[:, ~pivot.columns.duplicated()]
    return _per_second(iv, pivot, IO_COLUMNS)


def recorder_pid(rec) -> int | None:
    """The recorder's own pid (meta ``recorder_pid``), or None."""
    return rec.info.recorder_pid


def workload_stack_samples(rec) -> pd.DataFrame:
    """``stack_samples`` without the recorder's own process: its BPF polling is not the workload's
    (it stays in host CPU, under RECORDER_LABEL)."""
    ss = rec.table("stack_samples")
    rpid = recorder_pid(rec)
    return ss if rpid is None else ss[ss["pid"] != rpid]


def stack_table(rec, pids=None) -> pd.DataFrame:
    """RunView.stacks of ``rec``: DataFrame[folded (process name as root frame), category,
    subcategory, samples], idle, observer and the recorder's own process left out; with ``pids``
    (a set), only those processes' samples (the agent pushes one profile per job, dpuprof/agent)."""
    cols = ["folded", "category", "subcategory", "samples"]
    ss, st = workload_stack_samples(rec), rec.table("stacks")
    if pids is not None:
        ss = ss[ss["pid"].isin(pids)]
    if ss.empty or st.empty:
        return pd.DataFrame(columns=cols).astype({"samples": float})
    agg = ss.groupby(["pid", "stack_id"], as_index=False)["samples"].sum()
    agg = agg.merge(st, on="stack_id", how="inner")
    agg = agg[~agg["category"].isin(NOT_WORK)]
    if agg.empty:  # only idle and the observer sampled (an agent's file of a quiet minute)
        return pd.DataFrame(columns=cols).astype({"samples": float})
    procs = rec.table("processes").drop_duplicates("pid").set_index("pid")["comm"]
    roots = {pid: frame_name(procs.get(pid, ""), int(pid)) for pid in agg["pid"].unique()}
    agg["folded"] = agg["pid"].map(roots) + SEP + agg["folded"]
    out = agg.groupby(["folded", "category", "subcategory"], as_index=False)["samples"].sum()
    return out[cols].astype({"samples": float})


def _recorder_summary(rec) -> dict | None:
    """{pid, label, cpu_s}: the recorder's own busy CPU, counted in host CPU; None without a pid."""
    rpid = recorder_pid(rec)
    if rpid is None:
        return None
    cat = rec.table("cpu_category")
    own = float(cat.loc[(cat["pid"] == rpid) & (cat["category"] != IDLE), "cpu_s"].sum())
    return {"pid": rpid, "label": RECORDER_LABEL, "cpu_s": round(own, 6)}


def workload_label(meta: RecordingMeta) -> str:
    """How reports name the workload: the command line (``(host-wide)`` added for ``-a -- CMD``),
    ``every process (system-wide)``, ``attached to pid N (its command line)`` or ``cgroup PATH``;
    from the recording's ``workload``, ``command``, ``attached`` and ``cgroup`` metadata."""
    kind = meta.workload
    if kind == "system-wide":
        return "every process (system-wide)"
    if kind == "attach":
        parts = []
        for a in meta.attached:
            what = a.get("cmdline") or a.get("comm")
            parts.append(f"pid {a.get('pid')}" + (f" ({what})" if what else ""))
        return "attached to " + (", ".join(parts) or "running processes")
    if kind == "cgroup":
        return f"cgroup {meta.cgroup}"
    cmd = shlex.join(map(str, meta.command)) if meta.command is not None else ""
    return cmd + (" (host-wide)" if cmd and meta.system_wide else "")


def build_view(rec, projection: Projection | None = None, projection_warnings=(), name: str | None = None) -> RunView:
    """Derive the RunView of a loaded Recording (and its projection, if any)."""
    summary = summarize(rec)
    # additions to the recording summary contract: the losses as shares, the recorder's own CPU and,
    # with --time, the window the report covers
    summary["lost_shares"] = [x.as_dict() for x in losses_of(rec)]
    summary["recorder"] = _recorder_summary(rec)
    # beside the losses: what the recorder's own probes and process cost (render/observer.py)
    summary["observer_cost"] = observer_cost(rec, summary["workload_cpu"]["total_s"])
    if rec.info.window is not None:
        summary["window"] = rec.info.window.as_dict()
    split = rec.category_split
    iv = intervals(rec)
    cat = rec.table("cpu_category") if split else rec.table("cpu_category").iloc[0:0]
    busy = cat[~cat["category"].isin(NOT_WORK)]
    subcats = busy.groupby("subcategory")["cpu_s"].sum().sort_values(ascending=False).astype(float)
    interval_s = float(rec.info.interval_s or (iv["dt"].median() if not iv.empty else 1.0))
    return RunView(
        name=name or rec.name,
        path=str(rec.path),
        meta=rec.info,
        workload_label=workload_label(rec.info),
        summary=RunSummary.of(summary),
        projection=projection,
        warnings=with_projection(run_notes(rec, summary), projection_warnings),
        cpu_count=float(rec.info.cpu_count or 1),
        duration_s=rec.duration_s,
        interval_s=interval_s if interval_s > 0 else 1.0,
        category_split=split,
        cats=cat_totals(cat),
        wl_cats=cat_totals(cat[cat["pid"].isin(rec.workload_pids)]),
        timeline=_timeline(rec, iv, split),
        io=_io(rec, iv),
        stacks=stack_table(rec),
        subcats=subcats,
    )


def display_names(paths: list[Path]) -> list[str]:
    """Short distinct names for recordings: the stem, or parent/stem, or stem#k when equal."""
    def stem(p: Path) -> str:
        name = p.name[:-4] if p.name.endswith(".rec") else p.name
        if name in GENERIC_NAMES and p.resolve().parent.name:  # fixtures/ddp-plain/recording.rec
            return p.resolve().parent.name
        return name

    base = [stem(p) for p in paths]
    if len(set(base)) == len(base):
        return base
    parents = [p.resolve().parent.name for p in paths]
    qualified = [n if n == d or not d else f"{d}/{n}" for n, d in zip(base, parents)]
    if len(set(qualified)) == len(qualified):
        return qualified
    return [f"{n}#{i + 1}" for i, n in enumerate(base)]
