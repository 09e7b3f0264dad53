"""The summary of a Recording: the contract behind ``dpuprof report --format json``.

All CPU values are seconds of CPU time (one busy core for one second = 1.0). Categories are the six
top-level names of ``dpuprof.categories.CATEGORIES``; idle is reported as ``idle_s``, and samples
in dpuprof's own BPF programs (category ``observer``, docs/taxonomy.md) as ``observer_s``: neither
is in ``total_s``, ``by_category`` or ``by_subcategory``.
"""

from __future__ import annotations

from typing import TypedDict

from dpuprof.categories import CATEGORIES, IDLE, NOT_WORK, OBSERVER
from dpuprof.recording import partial
from dpuprof.recording.reader import Recording


class HostCpu(TypedDict):
    """The host's CPU seconds; ``by_category``/``by_subcategory`` None without a category split;
    ``cpu_times`` /proc/stat's fields summed over the recording."""

    total_s: float
    idle_s: float
    observer_s: float
    by_category: dict[str, float] | None
    by_subcategory: dict[str, float] | None
    cpu_times: dict[str, float]


class WorkloadCpu(TypedDict):
    """The workload's CPU seconds, as ``HostCpu``; ``proc_cpu_s`` from /proc. ``kernel_s`` is the
    self-check: the command tree's CPU as the kernel counted it when it was reaped (meta
    ``command_cpu_s``), to hold against total_s + observer_s (the same CPU, categorised); None where
    the recording did not cover the command's whole life."""

    total_s: float
    observer_s: float
    by_category: dict[str, float] | None
    by_subcategory: dict[str, float] | None
    proc_cpu_s: float
    kernel_s: float | None


class _ProcessBase(TypedDict):
    pid: int
    ppid: int | None
    comm: str
    cpu_s: float
    by_category: dict[str, float] | None


class ProcessEntry(_ProcessBase, total=False):
    """One workload process, CPU seconds; ``node`` only in a job's summary (render/merge.py)."""

    node: str


class IoTotals(TypedDict):
    """Block I/O over the recording: bytes and IOs, and who counted them ("bpf", "procfs", ...)."""

    source: str
    read_bytes: int
    write_bytes: int
    read_ios: int
    write_ios: int


class NetTotals(TypedDict):
    """Network bytes and packets over the recording, per device ``{dev: {"tx", "rx"}}`` bytes, and
    TCP retransmits; ``source`` says who counted them."""

    source: str
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    by_dev: dict[str, dict[str, int]]
    tcp_retransmits: int


class StoppedEarly(TypedDict):
    """A uprobe detached for being called too often (dpuprof/recording/partial.py): its tables hold
    the calls up to then only; covered_s/span_s None when the recording does not say when."""

    target: str
    calls_per_s: float
    limit_per_s: float
    covered_s: float | None
    span_s: float | None
    warning: str


class Summary(TypedDict):
    """The summary's keys, in the order ``summarize`` writes them. ``workload`` is "command",
    "attach", "cgroup" or "system-wide"; ``probes_unavailable`` {probe: why}; ``softirq_s``
    {vector: seconds}; ``lost`` {kind: count}, and ``lost_samples`` the whole samples lost."""

    schema_version: int
    dpuprof_version: str
    recording: str | list[str]
    command: list[str] | None
    workload: str
    host: str
    kernel: str
    cpu_count: int
    duration_s: float
    complete: bool
    exit_code: int | None
    mode: str | None
    category_split: bool
    sample_freq_hz: float | None
    probes_unavailable: dict[str, str]
    probes_stopped_early: list[StoppedEarly]
    host_cpu: HostCpu
    workload_cpu: WorkloadCpu
    processes: list[ProcessEntry]
    io: IoTotals
    net: NetTotals
    softirq_s: dict[str, float]
    lost_samples: int
    lost: dict[str, int]


class ReportSummary(Summary, total=False):
    """What a report adds to ``Summary`` (render/view.py ``build_view``, render/merge.py
    ``job_summary``): the losses as shares, the recorder's own CPU and what it cost the workload,
    with --time the window covered, and in a job's summary its nodes and the job's own view."""

    lost_shares: list[dict]
    recorder: dict
    observer_cost: dict
    window: dict
    nodes: list[str]
    job: dict


def _by_category(df) -> dict[str, float]:
    sums = df.groupby("category")["cpu_s"].sum() if not df.empty else {}
    return {c: round(float(sums.get(c, 0.0)), 6) for c in CATEGORIES}


def _by_subcategory(df) -> dict[str, float]:
    if df.empty:
        return {}
    sums = df[~df["category"].isin(NOT_WORK)].groupby("subcategory")["cpu_s"].sum().sort_values(ascending=False)
    return {k: round(float(v), 6) for k, v in sums.items()}


def summarize(rec: Recording) -> Summary:
    """Return the summary: a JSON-serialisable dict whose keys, in order, are ``Summary``'s."""
    split = rec.category_split
    cat = rec.table("cpu_category")
    busy = cat[~cat["category"].isin(NOT_WORK)]
    host_times = rec.table("host_cpu").groupby("field")["seconds"].sum()
    host_times = {k: round(float(v), 6) for k, v in host_times.items()}

    host_total, idle = _host_busy_idle(cat, busy, host_times, split)

    wl = busy[busy["pid"].isin(rec.workload_pids)]
    observer = cat[cat["category"] == OBSERVER]
    proc_cpu = rec.table("proc_cpu")
    proc_cpu_tot = proc_cpu.groupby("pid")[["user_s", "system_s"]].sum()
    wl_proc_s = float(proc_cpu_tot.sum().sum()) if not proc_cpu_tot.empty else 0.0

    processes = _processes(rec, wl, proc_cpu_tot, split)

    lost = rec.table("lost").groupby("kind")["count"].sum()
    lost = {k: int(v) for k, v in lost.items()}

    return {
        **_header(rec, split),
        "host_cpu": {
            "total_s": round(host_total, 6),
            "idle_s": round(idle, 6),
            "observer_s": round(float(observer["cpu_s"].sum()), 6),
            "by_category": _by_category(busy) if split else None,
            "by_subcategory": _by_subcategory(busy) if split else None,
            "cpu_times": host_times,
        },
        "workload_cpu": {
            "total_s": round(float(wl["cpu_s"].sum()) if split else wl_proc_s, 6),
            "observer_s": round(float(observer.loc[observer["pid"].isin(rec.workload_pids), "cpu_s"].sum()), 6),
            "by_category": _by_category(wl) if split else None,
            "by_subcategory": _by_subcategory(wl) if split else None,
            "proc_cpu_s": round(wl_proc_s, 6),
            "kernel_s": rec.info.command_cpu_s,
        },
        "processes": processes,
        "io": _io(rec),
        "net": _net(rec),
        "softirq_s": _softirq(rec),
        "lost_samples": int(sum(v for k, v in lost.items() if k.startswith("samples"))),
        "lost": lost,
    }


def _header(rec: Recording, split: bool) -> dict:
    """The summary's first keys: what was recorded, where, how long and how."""
    info = rec.info
    return {"schema_version": info.schema_version, "dpuprof_version": info.dpuprof_version,
            "recording": str(rec.path), "command": info.command, "workload": info.workload,
            "host": info.host, "kernel": info.kernel, "cpu_count": info.cpu_count,
            "duration_s": round(rec.duration_s, 6), "complete": info.complete, "exit_code": info.exit_code,
            "mode": info.mode, "category_split": split, "sample_freq_hz": info.sample_freq_hz,
            "probes_unavailable": info.probes_unavailable, "probes_stopped_early": _stopped_early(rec)}


def _stopped_early(rec: Recording) -> list[StoppedEarly]:
    """The uprobes that stopped early (dpuprof/recording/partial.py), as JSON objects."""
    out = []
    for p in partial.detached(rec.meta, rec.table("intervals")):
        out.append({"target": p.target, "calls_per_s": p.calls_per_s, "limit_per_s": p.limit_per_s,
                    "covered_s": None if p.covered_s is None else round(p.covered_s, 6),
                    "span_s": None if p.span_s is None else round(p.span_s, 6), "warning": p.line()})
    return out


def _host_busy_idle(cat, busy, host_times: dict, split: bool) -> tuple[float, float]:
    """(busy, idle) host CPU seconds: from the classified rows with a category split, else from
    /proc/stat's times (idle + iowait idle, the rest busy)."""
    if split:
        return float(busy["cpu_s"].sum()), float(cat.loc[cat["category"] == IDLE, "cpu_s"].sum())
    idle = host_times.get("idle", 0.0) + host_times.get("iowait", 0.0)
    return sum(v for k, v in host_times.items() if k not in ("idle", "iowait")), idle

def _processes(rec: Recording, wl, proc_cpu_tot, split: bool) -> list[ProcessEntry]:
    """The workload's processes, busiest first: [{pid, ppid, comm, cpu_s, by_category}]; CPU from
    the classified rows ``wl`` with a category split, else from proc_cpu totals ``proc_cpu_tot``."""
    procs = rec.table("processes")
    processes = []
    for row in procs[procs["in_workload"] != 0].itertuples():
        mine = wl[wl["pid"] == row.pid]
        if split:
            cpu_s = float(mine["cpu_s"].sum())
        elif row.pid in proc_cpu_tot.index:
            cpu_s = float(proc_cpu_tot.loc[row.pid].sum())
        else:
            cpu_s = 0.0
        processes.append({
            "pid": int(row.pid),
            "ppid": None if row.ppid != row.ppid else int(row.ppid),
            "comm": row.comm,
            "cpu_s": round(cpu_s, 6),
            "by_category": _by_category(mine) if split else None,
        })
    processes.sort(key=lambda p: -p["cpu_s"])
    return processes


def _softirq(rec: Recording) -> dict[str, float]:
    """Exact softirq seconds per vector (all CPUs), from irq:softirq_entry/exit."""
    sirq = rec.table("softirq")
    if sirq.empty:
        return {}
    by_vec = sirq.groupby("vector")["time_ns"].sum().sort_values(ascending=False)
    return {k: round(float(v) / 1e9, 6) for k, v in by_vec.items()}


def _io(rec: Recording) -> IoTotals:
    blk = rec.table("block_io")
    if not blk.empty:
        by_op = blk.groupby("op")[["bytes", "ios"]].sum()
        get = lambda op, col: int(by_op.loc[op, col]) if op in by_op.index else 0  # noqa: E731
        return {"source": rec.info.io_sources.get("block_io", "bpf"), "read_bytes": get("read", "bytes"), "write_bytes": get("write", "bytes"),
                "read_ios": get("read", "ios"), "write_ios": get("write", "ios")}
    disk = rec.table("host_disk").sum()
    return {"source": "procfs",
            "read_bytes": int(disk.get("read_bytes", 0)), "write_bytes": int(disk.get("write_bytes", 0)),
            "read_ios": int(disk.get("read_count", 0)), "write_ios": int(disk.get("write_count", 0))}


def _net(rec: Recording) -> NetTotals:
    net = rec.table("net_io")
    events = rec.table("events")
    retrans = int(events.loc[events["event"] == "tcp_retransmit", "count"].sum())
    if not net.empty:
        by_dir = net.groupby("direction")[["bytes", "packets"]].sum()
        get = lambda d, col: int(by_dir.loc[d, col]) if d in by_dir.index else 0  # noqa: E731
        by_dev = {dev: {d: int(g.loc[g["direction"] == d, "bytes"].sum()) for d in ("tx", "rx")}
                  for dev, g in net.groupby("dev")}
        return {"source": rec.info.io_sources.get("net_io", "bpf"), "tx_bytes": get("tx", "bytes"), "rx_bytes": get("rx", "bytes"),
                "tx_packets": get("tx", "packets"), "rx_packets": get("rx", "packets"),
                "by_dev": by_dev, "tcp_retransmits": retrans}
    hn = rec.table("host_net")
    by_dev = {dev: {"tx": int(g["bytes_sent"].sum()), "rx": int(g["bytes_recv"].sum())}
              for dev, g in hn.groupby("dev")}
    return {"source": "procfs", "tx_bytes": int(hn["bytes_sent"].sum()), "rx_bytes": int(hn["bytes_recv"].sum()),
            "tx_packets": int(hn["packets_sent"].sum()), "rx_packets": int(hn["packets_recv"].sum()),
            "by_dev": by_dev, "tcp_retransmits": retrans}
