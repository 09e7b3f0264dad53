"""The Projection: the typed object ``dpuprof project`` writes and every renderer reads.

pydantic models give one schema for three jobs: validating what the model produced before it is
stored, validating a file read back (a damaged or hand-edited file fails with one line), and a
JSON Schema for users' tools (``Projection.model_json_schema()``; docs/projection-contract.md).
Numbers are finite (NaN and infinity are refused); ``None`` stands for "unbounded" or "not known".
Units are in the field names: ``_s`` CPU seconds over the recording, ``_pct`` percent of host
capacity (cpu_count x duration), ``_us`` microseconds. Objects accept extra keys (kept), so newer
files still read; required keys are the ones every renderer draws.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dpuprof.categories import CATEGORIES

#: Version 2 added the critical-path speedup (regime, window, bounds, evidence, contention_proxy).
PROJECTION_VERSION = 2
READABLE_VERSIONS = (1, 2)


class _Obj(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, populate_by_name=True)


class Row(_Obj):
    """One (subcategory, mechanism) slice of the offload model."""

    category: str
    subcategory: str
    mechanism: str | None = None
    label: str = ""
    requires: str = ""
    mode: str = "async"
    before_s: float | None = None
    after_s: float | None = None
    freed_s: float | None = None
    speedup: float | None = None
    alpha: float | None = None
    n: float | None = None
    capacity_limited: bool = False
    pays: bool = False
    enabled: bool = False
    notes: str = ""
    sources: list[str] = Field(default_factory=list)
    node: str | None = None  # set in a merged (cluster) projection


class CategoryTotals(_Obj):
    before_s: float
    after_s: float
    freed_s: float


class Totals(_Obj):
    before_s: float = 0.0
    after_s: float = 0.0
    freed_s: float = 0.0
    infrastructure_before_s: float = 0.0
    infrastructure_after_s: float = 0.0
    workload_before_s: float = 0.0
    workload_after_s: float = 0.0
    workload_freed_s: float = 0.0


class CoresForAI(_Obj):
    before_pct: float | None = None
    after_pct: float | None = None
    before_cores: float | None = None
    after_cores: float | None = None
    assumptions: list[str] = Field(default_factory=list)


class Window(_Obj):
    start_s: float
    end_s: float
    intervals: int = 0
    how: str = ""


class PathBounds(_Obj):
    """One case of the critical-path bounds: each path's seconds of the window before and after the
    offload (dpuprof.project.critical_path.speedup); the case's speedup is max(before) / max(after)."""

    before: dict[str, float]
    after: dict[str, float]


class RankEvidence(_Obj):
    """A rank's measured signals, as shares of the window (0..1), and the CPU seconds the offload
    frees on it. Its waits by reason come as extra keys ``wait_<reason>`` (shares too)."""

    pid: int
    comm: str = ""
    on_cpu: float | None = None
    runq: float | None = None
    freed_s: float | None = None


class LoaderEvidence(_Obj):
    """A DataLoader worker of rank ``rank_pid``: busy and run-queue shares of the window, freed seconds."""

    pid: int
    rank_pid: int | None = None
    busy: float | None = None
    runq: float | None = None
    freed_s: float | None = None


class Evidence(_Obj):
    """What the regime rests on (dpuprof.project.critical_path.evidence): the window's length, the
    host's idle share and freed seconds, the GPUs' busy share (None: no GPU recorded), each rank and
    loader, and what the offload gains on each path (``path_gains_s``, seconds)."""

    window_s: float
    host_idle: float | None = None
    host_freed_s: float | None = None
    gpu_busy: float | None = None
    ranks: list[RankEvidence] = Field(default_factory=list)
    loaders: list[LoaderEvidence] = Field(default_factory=list)
    path_gains_s: dict[str, float] = Field(default_factory=dict)


class OtherMode(_Obj):
    """The speedup under the other execution mode (dpuprof.project.assemble._other_mode): ``mode``
    None means each mechanism's own; ``flag`` is the option that selects it (``--mode sync``)."""

    mode: str | None = None
    flag: str
    modes: dict[str, list[str]] = Field(default_factory=dict)
    low: float | None = None
    expected: float | None = None
    high: float | None = None
    freed_s: float | None = None
    regime: str | None = None


class Speedup(_Obj):
    """Job speedup: ``low <= expected <= high`` (None: unbounded) and how it was found. ``regime``
    None: no single regime (a job's speedup, the minimum over its nodes)."""

    low: float | None = 1.0
    expected: float | None = None
    high: float | None = None
    pays: bool = False
    #: the CPU seconds behind the bounds (dpuprof.project.outcomes.speedup_range): the workload's,
    #: and what the offload frees of it, of other processes, of everything; None in older files
    workload_cpu_s: float | None = None
    workload_freed_s: float | None = None
    other_freed_s: float | None = None
    other_infrastructure_s: float | None = None
    freed_s: float | None = None
    regime: str | None = "unknown"
    regime_why: str = ""
    contention_proxy: float | None = None
    window: Window | None = None
    #: {case ("low", "expected", "high"): its paths' seconds before and after}
    bounds: dict[str, PathBounds] | None = None
    evidence: Evidence | None = None
    assumptions: list[str] = Field(default_factory=list)
    #: {mode: [mechanism, ...]} whose freed CPU the bounds rest on (dpuprof.project.modes); None in
    #: older files and merged (job) projections
    modes: dict[str, list[str]] | None = None
    #: the same model under the other execution mode: {mode (None: each mechanism's own), flag,
    #: modes, low, expected, high, freed_s, regime}; None in older files and from the agent
    other_mode: OtherMode | None = None


class Dpu(_Obj):
    """The DPU profile projected on (its whole TOML, as ``Profile.as_dict``); the report draws the
    name and description."""

    name: str | None = None
    file: str | None = None
    description: str = ""


class AlgorithmTimes(_Obj):
    """One all-reduce algorithm's modelled time per operation (us) and bus bandwidth (Gb/s; None
    where it is not defined) over each transport (dpuprof.project.allreduce.model)."""

    tcp_us: float
    rdma_us: float
    tcp_busbw_gbps: float | None = None
    rdma_busbw_gbps: float | None = None


class VendorSize(_Obj):
    """One message size of the vendor comparison: the fastest algorithm's time per transport, and
    every algorithm's."""

    message_bytes: int
    tcp_us: float
    rdma_us: float
    algorithms: dict[str, AlgorithmTimes] = Field(default_factory=dict)
    algorithm: dict[str, str] = Field(default_factory=dict)


class VendorComparison(_Obj):
    """The vendor brief's scale, modelled (dpuprof.project.allreduce.vendor_row)."""

    vendor: str
    nodes: int
    gpus_per_node: int
    ranks: int
    sizes: list[VendorSize] = Field(default_factory=list)
    assumption: str = ""


class ParamValue(_Obj):
    """A DPU profile parameter as the projection used it (``Param.as_dict``): its value (None:
    unbounded) and its source; a ``note`` where the profile gives one."""

    value: float | str | None = None
    source: str = ""


class Allreduce(_Obj):
    """All-reduce per operation at ``nodes`` x ``gpus_per_node`` ranks (``--nodes``), modelled
    (dpuprof/project/allreduce.py; fields in the order it writes them, so a file reads back the same).
    A field an older file lacks is None."""

    nodes: int
    gpus_per_node: int = 1
    ranks: int | None = None
    recorded_ranks: int | None = None
    method: str = ""
    measured: bool = False
    bytes_per_step: float | None = None
    bytes_per_op: float | None = None
    ops_recorded: float | None = None
    bytes_total_per_rank: float | None = None
    measured_us_per_op: float | None = None
    tcp_us: float | None = None
    rdma_us: float | None = None
    #: transport ("tcp", "rdma") -> the fastest algorithm modelled ("ring", "tree", "hierarchical")
    algorithm: dict[str, str] = Field(default_factory=dict)
    #: algorithm ("ring", "tree", "hierarchical") -> its modelled times
    algorithms: dict[str, AlgorithmTimes] = Field(default_factory=dict)
    tcp_total_s: float | None = None
    rdma_total_s: float | None = None
    recorded_duration_s: float | None = None
    exceeds_recording: dict[str, bool] = Field(default_factory=dict)
    tcp_host_cpu_us_per_step: float | None = None
    rdma_host_cpu_us_per_step: float | None = None
    vendor_comparison: VendorComparison | None = None
    #: the profile's allreduce parameters and its line rate, by name
    parameters: dict[str, ParamValue] = Field(default_factory=dict)
    assumptions: list[str] = Field(default_factory=list)


class Capacity(_Obj):
    """One DPU resource's demand against its limit, in ``unit`` (a merged projection adds ``node``)."""

    resource: str
    unit: str = ""
    demand: float | None = None
    limit: float | None = None
    bottleneck: bool = False
    action: str = ""
    note: str = ""
    mechanisms: list[str] = Field(default_factory=list)


class Host(_Obj):
    cpu_count: int = 0
    duration_s: float = 0.0
    host_capacity_s: float = 0.0


class SweepPoint(_Obj):
    """One value of a swept parameter and the projection's outcome at it."""

    value: float
    low: float | None = None
    expected: float | None = None
    high: float | None = None
    freed_s: float = 0.0
    after_pct: float | None = None
    pays: bool = False


class Sweep(_Obj):
    """``dpuprof project --sweep`` (dpuprof.project.sweep.sweep): ``param`` of ``mechanism`` from
    ``lo`` to ``hi`` in ``unit``, where it enters the model, and whether the outcome stays flat
    (with the reason)."""

    param: str
    mechanism: str | None = None
    field: str = ""
    unit: str = ""
    lo: float
    hi: float
    enters: list[str] = Field(default_factory=list)
    flat: bool = False
    speedup_flat: bool = False
    flat_reason: str | None = None
    points: list[SweepPoint] = Field(default_factory=list)
    note: str = ""


class Projection(_Obj):
    """The whole projection file (docs/projection-contract.md)."""

    projection_version: int
    recording: str | list[str] = ""
    recording_sha256: str | None = None
    dpu: Dpu = Field(default_factory=Dpu)
    mode_override: str | None = None
    only: list[str] | None = None
    host: Host = Field(default_factory=Host)
    rows: list[Row] = Field(default_factory=list)
    rejected: list[Row] = Field(default_factory=list)
    left_on_host: list[Row] = Field(default_factory=list)
    by_category: dict[str, CategoryTotals] = Field(default_factory=dict)
    totals: Totals = Field(default_factory=Totals)
    cores_for_ai: CoresForAI = Field(default_factory=CoresForAI)
    speedup: Speedup = Field(default_factory=Speedup)
    allreduce: Allreduce | None = None
    capacity: list[Capacity] = Field(default_factory=list)
    sweep: Sweep | None = None
    assumptions: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    #: ``dpuprof project --set MECH.PARAM=value`` what-ifs applied, as given; None without any
    set: list[str] | None = None

    @field_validator("projection_version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v not in READABLE_VERSIONS:
            raise ValueError(f"projection_version {v!r} not supported (readable: {READABLE_VERSIONS})")
        return v

    @field_validator("by_category")
    @classmethod
    def _categories(cls, v: dict) -> dict:
        unknown = [c for c in v if c not in CATEGORIES]
        if unknown:
            raise ValueError(f"unknown categories in by_category: {', '.join(map(str, unknown[:3]))}")
        return v

    def as_json(self) -> dict:
        """The JSON-ready dict (what ``--format json`` prints and the file holds)."""
        return self.model_dump(mode="json")
