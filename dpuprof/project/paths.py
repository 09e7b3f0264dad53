"""The job's critical-path inputs, read from a recording's per-thread tables (schema v2).

Roles, decided from the processes, threads and who-woke-whom tables:

- a **rank** is a workload process that is not a loader and whose main thread (tid = pid) was on
  the CPU for at least ``RANK_MIN_BUSY`` of the window; the training loop runs on that thread;
- a **loader** of a rank is a child process of it with a thread named ``pt_data_worker`` (PyTorch's
  DataLoader workers), or any child process whose threads woke the rank's main thread;
- the rank thread's blocked time is split by who woke it: its loaders (``loader``), other ranks or
  its own process's other threads such as gloo's or NCCL's (``peer``), uninterruptible sleep
  (``io``), anything else (``other``: timers, unrelated processes, interrupts on an idle CPU).

CPU freed by an offload is placed on threads with ``freed_fraction``: per subcategory, the share of
its CPU the enabled offloads free (from the evaluated rows), times the thread's or process's own
CPU in that subcategory over the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from dpuprof.categories import NOT_WORK
from dpuprof.projection.window import Window

RANK_MIN_BUSY = 0.05
LAUNCHER_SHARE = 0.5  # a candidate rank less busy than this share of a child candidate launched it
LOADER_COMM = "pt_data_worker"
WAIT_REASONS = ("loader", "peer", "io", "other")


@dataclass(frozen=True)
class RankThread:
    """A rank's main thread over the window; seconds.

    ``wall_s`` time it lived in the window = ``on_cpu_s`` + ``runq_s`` + off-CPU; ``wait_s`` the
    off-CPU time by reason (``WAIT_REASONS``; what the wake-up probe did not see goes to ``other``;
    with ``record --wait-duty`` the waits seen, scaled by ``wait_coverage``);
    ``freed_s`` CPU the offload frees on this thread itself, ``freed_sd_s`` its sampling standard
    deviation.
    """

    pid: int
    tid: int
    comm: str
    wall_s: float
    on_cpu_s: float
    runq_s: float
    wait_s: dict
    freed_s: float
    freed_sd_s: float = 0.0


@dataclass(frozen=True)
class Loader:
    """A loader process of rank ``rank_pid`` over the window; seconds.

    ``busy_s``: the time its main thread was not waiting for the rank to ask for more (its wall
    time minus blocked time the rank woke it from); ``runq_s`` its main thread's run-queue delay;
    ``freed_s`` CPU the offload frees in the whole process, ``freed_sd_s`` its sampling sd.
    """

    pid: int
    rank_pid: int
    busy_s: float
    runq_s: float
    freed_s: float
    freed_sd_s: float = 0.0


@dataclass(frozen=True)
class JobPaths:
    """Everything the critical-path model reads (see critical_path.speedup)."""

    window: Window
    cpu_count: int
    host_busy_s: float
    host_freed_s: float
    host_freed_sd_s: float
    ranks: tuple = ()
    loaders: tuple = ()
    gpu_busy: float | None = None
    net_freed_fraction: float = 0.0
    notes: list = field(default_factory=list)


def freed_fraction(rows: pd.DataFrame, workload: bool = True) -> dict:
    """{subcategory: fraction of its CPU the enabled offloads free} from evaluated model rows."""
    if rows.empty:
        return {}
    b, f = ("workload_before_s", "workload_freed_s") if workload else ("before_s", "freed_s")
    g = rows.groupby("subcategory")[[b, f]].sum()
    return {sub: float(min(1.0, max(0.0, r[f] / r[b]))) for sub, r in g.iterrows() if r[b] > 0}


def _freed(samples: pd.Series, sec_per_sample: float, frac: dict) -> tuple[float, float]:
    """(freed seconds, sampling sd) for a Series of samples indexed by subcategory."""
    f = sum(n * frac.get(sub, 0.0) for sub, n in samples.items())
    var = sum(n * frac.get(sub, 0.0) ** 2 for sub, n in samples.items())  # Poisson counts
    return f * sec_per_sample, math.sqrt(var) * sec_per_sample


def build(frames: dict, workload_pids: set, cpu_count: int, window: Window, rows: pd.DataFrame) -> JobPaths | None:
    """JobPaths from recording tables (``frames[name]``, columns of recording.schema.TABLES).

    Returns None when the recording has no per-thread data (schema v1, or no thread was seen).
    """
    tt = frames["thread_time"]
    if tt.empty or frames["threads"].empty:
        return None
    ids = set(window.intervals)
    tt = tt[tt["interval"].isin(ids)]
    cpu = frames["cpu_category"]
    cpu = cpu[cpu["interval"].isin(ids) & ~cpu["category"].isin(NOT_WORK)]
    frac_wl, frac_host = freed_fraction(rows, True), freed_fraction(rows, False)
    host_by_sub = cpu.groupby("subcategory")["cpu_s"].sum()
    host_samples = cpu.groupby("subcategory")["samples"].sum()
    host_busy = float(host_by_sub.sum())
    spp_host = host_busy / max(1.0, float(host_samples.sum()))
    host_freed, host_sd = _freed(host_samples, spp_host, frac_host)
    procs = frames["processes"].set_index("pid")
    threads = frames["threads"].set_index("tid")
    per_thread = tt.groupby("tid")[["on_cpu_ns", "runq_ns", "off_cpu_ns"]].sum() / 1e9
    waits = frames["thread_wait"]
    waits = waits[waits["interval"].isin(ids)]
    cover = wait_coverage(frames.get("intervals"), ids)
    if cover <= 0:
        return None  # no wait was measured in the window (--wait-duty: it fell in off parts)
    if cover < 1:  # --wait-duty: the waits of the attached seconds stand for the window's
        waits = waits.assign(ns=waits["ns"] / cover)
    tcat = frames["thread_category"]
    tcat = tcat[tcat["interval"].isin(ids)]
    pid_cpu = cpu.groupby("pid")[["cpu_s", "samples"]].sum()

    def spp(pid):  # CPU seconds one sample of this process stands for (exact-scaled)
        if pid not in pid_cpu.index or pid_cpu.at[pid, "samples"] <= 0:
            return 0.0
        return float(pid_cpu.at[pid, "cpu_s"] / pid_cpu.at[pid, "samples"])

    loader_pids = set(threads.loc[threads["comm"] == LOADER_COMM, "pid"].astype(int)) & set(workload_pids)
    busy = {}  # candidate ranks: pid -> (on, runq, wall) of its main thread
    for pid in sorted(set(workload_pids) - loader_pids):
        if pid not in per_thread.index:
            continue
        on, rq, off = per_thread.loc[pid]
        if on + rq + off > 0 and on >= RANK_MIN_BUSY * window.length_s:
            busy[pid] = (float(on), float(rq), float(on + rq + off))
    ranks = []
    for pid in sorted(set(busy) - launchers(busy, procs)):
        on, rq, wall = busy[pid]
        children = set(procs.index[procs["ppid"] == pid]) & set(workload_pids) if "ppid" in procs else set()
        my_loaders = children & loader_pids
        w = waits[waits["tid"] == pid]
        my_loaders |= set(w.loc[w["waker_pid"].isin(children), "waker_pid"].astype(int))
        loader_pids |= my_loaders
        ranks.append((pid, float(on), float(rq), float(wall), w, my_loaders))
    rank_pids = {r[0] for r in ranks}
    out_ranks, out_loaders = [], []
    for pid, on, rq, wall, w, my_loaders in ranks:
        reasons = _wait_reasons(w, my_loaders, rank_pids, wall - on - rq)
        ts = tcat[tcat["tid"] == pid].groupby("subcategory")["samples"].sum()
        f, sd = _freed(ts, spp(pid), frac_wl)
        comm = str(threads.at[pid, "comm"]) if pid in threads.index else ""
        out_ranks.append(RankThread(pid, pid, comm, wall, on, rq, reasons, min(f, on), sd))
        for lp in sorted(my_loaders):
            out_loaders.append(_loader(lp, pid, per_thread, waits, cpu, spp(lp), frac_wl))
    return JobPaths(window, cpu_count, host_busy, host_freed, host_sd, tuple(out_ranks), tuple(out_loaders),
                    _gpu_busy(frames.get("gpu"), ids), _net_freed_fraction(rows))


def launchers(busy: dict[int, tuple], procs: pd.DataFrame) -> set[int]:
    """The candidate ranks ``busy`` ({pid: (on, ...)}) that launched another one at least
    1 / LAUNCHER_SHARE times as busy on its main thread: torchrun's agent, mp.spawn's parent, a
    script that starts its rank and waits. Its path is the window's wall time and would bind every
    projection, and its waits, woken by the rank, would make the rank its loader (a 3-s run of
    validation cell c_inline_w1, 2026-12-07: the launcher 9 % busy, the rank 100 %, projected
    1.0002x). ``procs``: the processes table indexed by pid."""
    if "ppid" not in procs:
        return set()
    out = set()
    for pid, (on, *_rest) in busy.items():
        ppid = procs.at[pid, "ppid"] if pid in procs.index else None
        parent = int(ppid) if ppid is not None and pd.notna(ppid) else None
        if parent in busy and busy[parent][0] < LAUNCHER_SHARE * on:
            out.add(parent)
    return out


def wait_coverage(intervals: pd.DataFrame | None, ids: set) -> float:
    """Share (0..1) of the seconds of intervals ``ids`` in which the wake-up program measured
    waits: the sum of ``waits_s`` over the sum of the intervals' lengths (recording schema v6,
    ``record --wait-duty``); an interval without ``waits_s`` (NULL, or an older file) counts whole.
    Scaling the waits by its inverse estimates the window's waits from a systematic sample of
    its time (1 without a duty cycle)."""
    if intervals is None or intervals.empty or "waits_s" not in intervals:
        return 1.0
    iv = intervals[intervals["interval"].isin(ids)]
    length = (iv["t_end"] - iv["t_start"]).clip(lower=0.0)
    total = float(length.sum())
    if total <= 0:
        return 1.0
    return min(1.0, float(iv["waits_s"].fillna(length).clip(lower=0.0).sum()) / total)


def _net_freed_fraction(rows: pd.DataFrame) -> float:
    """Share (0..1) of the workload's network CPU the offload frees (evaluated rows)."""
    net = rows[rows["category"] == "network"] if not rows.empty else rows
    net_before = float(net["workload_before_s"].sum()) if not net.empty else 0.0
    return min(1.0, float(net["workload_freed_s"].sum()) / net_before if net_before > 0 else 0.0)


def _wait_reasons(w: pd.DataFrame, my_loaders: set, rank_pids: set, off_cpu_s: float) -> dict:
    """A rank thread's blocked seconds by reason (WAIT_REASONS) from its thread_wait rows ``w``:
    io (uninterruptible), loader (woken by its DataLoader workers), peer (by another rank or its
    own helper threads), other; scaled to fit its off-CPU time ``off_cpu_s``."""
    reasons = {k: 0.0 for k in WAIT_REASONS}
    for row in w.itertuples(index=False):
        if row.state == "io":
            key = "io"
        elif row.waker_pid in my_loaders:
            key = "loader"
        elif row.waker_pid in rank_pids:  # another rank, or this rank's own helper threads
            key = "peer"
        else:
            key = "other"
        reasons[key] += row.ns / 1e9
    # A wait is counted in the interval its wake-up falls in, so the window's waits can exceed
    # its off-CPU time by the part before the window: scale them to fit; what the probe did
    # not see goes to "other". Then wall = on + runq + the waits, exactly.
    seen, off_cpu = sum(reasons.values()), max(0.0, off_cpu_s)
    if seen > off_cpu:
        reasons = {k: v * off_cpu / seen for k, v in reasons.items()}
    reasons["other"] += max(0.0, off_cpu - sum(reasons.values()))
    return reasons


def _loader(pid, rank_pid, per_thread, waits, cpu, spp, frac) -> Loader:
    if pid in per_thread.index:
        on, rq, off = (float(x) for x in per_thread.loc[pid])
    else:
        on = rq = off = 0.0
    w = waits[(waits["tid"] == pid) & (waits["waker_pid"] == rank_pid) & (waits["state"] != "io")]
    slack = min(off, float(w["ns"].sum()) / 1e9)
    samples = cpu[cpu["pid"] == pid].groupby("subcategory")["samples"].sum()
    f, sd = _freed(samples, spp, frac)
    return Loader(pid, rank_pid, on + rq + off - slack, rq, f, sd)


def _gpu_busy(gpu: pd.DataFrame | None, ids: set) -> float | None:
    if gpu is None or gpu.empty:
        return None
    g = gpu[gpu["interval"].isin(ids)]["util_pct"].dropna()
    return None if g.empty else float(g.mean()) / 100.0
