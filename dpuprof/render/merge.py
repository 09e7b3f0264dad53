"""The job view: the recordings of one job (one per node) merged as data, then summarised once.

Like pyinstrument's ``Session.combine``, the merge works on the recorded data, not on the
summaries made from it: every table of every node's Recording is concatenated into one Recording
with a ``node`` column (the node's index), and the ordinary summary (:mod:`dpuprof.recording.summary`)
and category totals are computed from that once. Amounts (CPU seconds, samples, bytes, IOs) thus add
up, shares are shares of the whole job, and merging two copies of one recording doubles every amount
and leaves every share unchanged.

Identifiers that are only unique within a node -- pids and tids, interval and stack ids -- are
made distinct by an offset per node (``PID_STRIDE``, ``ID_STRIDE``); the job summary's process list
gives them back as (``node``, ``pid``). Time stays the wall clock: the job lasts from the first
node's start to the last node's end, and its time series put each node's intervals on one grid
(the shortest interval) from the job's start.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from dpuprof.categories import IDLE, NOT_WORK
from dpuprof.errors import UserError
from dpuprof.recording.reader import Recording
from dpuprof.recording.schema import TABLES
from dpuprof.recording.summary import summarize
from dpuprof.render.job import build_job
from dpuprof.render.job_projection import job_projection
from dpuprof.render.losses import from_recording, warning
from dpuprof.render.losses import from_recording as losses_of
from dpuprof.render.observer import cost as observer_cost
from dpuprof.render.observer import line as observer_line
from dpuprof.render.run_summary import RunSummary
from dpuprof.render.view import RECORDER_LABEL, RunView, cat_totals, recorder_pid

#: Above Linux's largest pid (PID_MAX_LIMIT, 2**22 on 64-bit), so offset pids never collide.
PID_STRIDE = 1 << 23
#: Above any node's interval or stack count.
ID_STRIDE = 1 << 32
_STRIDES = {"pid": PID_STRIDE, "ppid": PID_STRIDE, "tid": PID_STRIDE, "waker_pid": PID_STRIDE,
            "waker_tid": PID_STRIDE, "interval": ID_STRIDE, "stack_id": ID_STRIDE}


def _job_meta(recs: list[Recording]) -> dict:
    """The combined Recording's metadata: what the summary reads, for the job as a whole."""
    infos = [r.info for r in recs]
    first = infos[0]

    def same(key):  # the value every node agrees on, else None
        vals = [getattr(m, key) for m in infos]
        return vals[0] if all(v == vals[0] for v in vals) else None

    starts = [m.start_time for m in infos if m.start_time is not None]
    ends = [m.end_time for m in infos if m.end_time is not None]
    codes = [m.exit_code for m in infos]
    unavailable = {}
    for m in infos:
        for probe, why in m.probes_unavailable.items():
            unavailable.setdefault(probe, why)
    return {
        "schema_version": min(m.schema_version for m in infos),
        "dpuprof_version": first.dpuprof_version,
        "command": same("command"), "workload": same("workload"), "mode": same("mode"),
        "host": [m.host for m in infos], "kernel": same("kernel"),
        "cpu_count": sum(m.cpu_count or 1 for m in infos),
        "sample_freq_hz": same("sample_freq_hz") or first.sample_freq_hz,
        "interval_s": min(float(m.interval_s or 1.0) for m in infos),
        "start_time": min(starts) if starts else None,
        "end_time": max(ends) if len(ends) == len(infos) else None,
        "complete": all(r.complete for r in recs),
        "exit_code": next((c for c in codes if c), codes[0]),  # the first failure, else 0
        "category_split": all(r.category_split for r in recs),
        "probes_unavailable": unavailable,
    }


#: The tables the job summary, its losses and its per-node rows read. The job's stacks, time
#: series and thread tables are not summarised again: they are drawn from each node's view.
JOB_TABLES = ("intervals", "processes", "cpu_category", "proc_cpu", "host_cpu", "host_disk", "host_net",
              "block_io", "net_io", "events", "softirq", "lost", "markers", "probe_cost", "recorder_cpu")


def combine(recs: list[Recording], label: str = "job", tables=JOB_TABLES) -> Recording:
    """One Recording holding ``tables`` of ``recs`` concatenated (the other tables empty), each
    row tagged with ``node`` (its recording's index in ``recs``) and its ids offset per node
    (module docstring). ``tables=TABLES`` combines everything."""
    frames = {}
    for table in TABLES:
        parts = [(i, r.table(table)) for i, r in enumerate(recs) if table in tables and not r.table(table).empty]
        if not parts:
            frames[table] = recs[0].table(table).iloc[0:0].assign(node=pd.Series(dtype="int64"))
            continue
        df = pd.concat([p for _, p in parts], ignore_index=True)
        node = np.repeat([i for i, _ in parts], [len(p) for _, p in parts])
        df["node"] = node
        for col, stride in _STRIDES.items():
            if col in df.columns:
                df[col] = df[col] + node * stride
        frames[table] = df
    return Recording(Path(label), _job_meta(recs), frames)


def split_pid(pid) -> tuple[int, int]:
    """(node index, the node's own pid) of an offset pid."""
    return int(pid) // PID_STRIDE, int(pid) % PID_STRIDE


def job_summary(job: Recording, views: list[RunView]) -> dict:
    """The summary contract of :func:`dpuprof.recording.summary.summarize`, computed once on the
    combined Recording ``job``; processes carry ``node`` (a view's name) and their own pid."""
    names = [v.name for v in views]
    summary = summarize(job)
    for p in summary["processes"]:
        node, p["pid"] = split_pid(p["pid"])
        if p.get("ppid") is not None:
            p["ppid"] = split_pid(p["ppid"])[1]
        p["node"] = names[node]
    summary["recording"] = [v.path for v in views]
    summary["nodes"] = names
    summary["lost_shares"] = [x.as_dict() for x in losses_of(job)]
    own = [i * PID_STRIDE + pid for i, pid in enumerate(recorder_pid(v.recording) for v in views)
           if pid is not None]
    cat = job.table("cpu_category")
    own_s = float(cat.loc[cat["pid"].isin(own) & (cat["category"] != IDLE), "cpu_s"].sum())
    summary["recorder"] = {"label": RECORDER_LABEL, "nodes": len(own), "cpu_s": round(own_s, 6)}
    summary["observer_cost"] = observer_cost(job, summary["workload_cpu"]["total_s"])
    return summary


def _on_job_grid(frames: list[pd.DataFrame], shifts: list[float], grid: float) -> pd.DataFrame:
    """Per-second series of each node (index t_s from the node's start), moved by ``shifts`` (s
    from the job's start to the node's), averaged per node within each grid step, summed over
    nodes. A node's rate is averaged, never added to itself, where two of its intervals fall in
    one step."""
    parts = []
    for i, (f, shift) in enumerate(zip(frames, shifts)):
        if f.empty:
            continue
        t = f.index.to_numpy(dtype=float) + shift
        step = pd.Index(((t + 1e-6) // grid) * grid, name="t_s")
        parts.append(f.set_axis(step).groupby(level=0).mean())
    if not parts:
        return frames[0].iloc[0:0]
    return pd.concat(parts).groupby(level=0).sum().sort_index()


def _hosts(hosts: list) -> list | str:
    """The hosts for a header line: all of them, or for many the first two and the last."""
    if len(hosts) <= 8:
        return hosts
    return f"{hosts[0]}, {hosts[1]}, ..., {hosts[-1]} ({len(hosts)} hosts)"


def _node_starts(views: list[RunView]) -> list[float]:
    """Each node's time origin, as the view's t_s counts it (view.intervals)."""
    out = []
    for v in views:
        iv = v.recording.table("intervals")
        t0 = v.recording.info.start_time
        first = float(iv["t_start"].min()) if not iv.empty else float(t0 or 0.0)
        out.append(min(float(t0), first) if t0 is not None else first)
    return out


def merge_views(views: list[RunView], why_not_one_job: str | None = None) -> RunView:
    """The job view of ``views`` (one per node, each with its ``recording``). ``why_not_one_job``:
    the identity check's reason when the user merged unrelated recordings with --merge."""
    if len({v.category_split for v in views}) > 1:
        raise UserError("cannot merge recordings with and without the category split "
                        "(BPF and psutil mode); record every node the same way")
    job = combine([v.recording for v in views])
    cat = job.table("cpu_category") if job.category_split else job.table("cpu_category").iloc[0:0]
    busy = cat[~cat["category"].isin(NOT_WORK)]
    projection, proj_warnings = job_projection(views)
    summary = job_summary(job, views)
    starts = _node_starts(views)
    shifts = [s - min(starts) for s in starts]
    grid = min(v.interval_s for v in views)
    stacks = pd.concat([v.stacks.assign(folded=v.name.replace(";", ":") + ";" + v.stacks["folded"])
                        for v in views], ignore_index=True)
    total = RunView(
        name=f"job ({len(views)} nodes)",
        path=", ".join(v.path for v in views),
        meta=replace(job.info, host=_hosts([v.meta.host for v in views])),
        workload_label=views[0].workload_label,
        summary=RunSummary.of(summary),  # the same dict: the job key is added below
        projection=projection,
        warnings=[],
        cpu_count=float(job.info.cpu_count),
        duration_s=job.duration_s,
        interval_s=grid,
        category_split=job.category_split,
        cats=cat_totals(cat),
        wl_cats=cat_totals(cat[cat["pid"].isin(job.workload_pids)]),
        timeline=_on_job_grid([v.timeline for v in views], shifts, grid),
        io=_on_job_grid([v.io for v in views], shifts, grid),
        stacks=stacks.groupby(["folded", "category", "subcategory"], as_index=False)["samples"].sum(),
        subcats=busy.groupby("subcategory")["cpu_s"].sum().sort_values(ascending=False).astype(float),
        nodes=list(views),
    )
    jv = build_job(job, views, total, why_not_one_job)
    total.warnings = jv.warnings + proj_warnings + _job_warnings(job, summary, views)
    summary["job"] = jv.as_json()
    total.job = jv
    return total


#: node warnings said once for the job, from the combined data, instead of once per node
_JOB_LEVEL = ("data lost in the kernel", "the recorder itself used", "the recorder's own cost")


def _job_warnings(job: Recording, summary: dict, views: list[RunView]) -> list[str]:
    """The job's losses and recorder cost, then each node's other warnings, one line per distinct
    text: 'all nodes: ...' or 'a, b: ...'."""
    out = [w for w in [warning(from_recording(job)), observer_line(summary.get("observer_cost"))] if w]
    own = summary["recorder"]["cpu_s"]
    if job.category_split and own > 0 and job.duration_s:
        out.append(f"the recorders themselves used {own / job.duration_s:.2f} cores in all ({own:.1f} CPU s "
                   f"on {summary['recorder']['nodes']} nodes), counted in host CPU as {RECORDER_LABEL!r} "
                   "and left out of the stacks")
    by_text: dict[str, list[str]] = {}
    for v in views:
        for w in v.warnings:
            if not w.startswith(_JOB_LEVEL):
                by_text.setdefault(w, []).append(v.name)
    for w, names in by_text.items():
        who = "all nodes" if len(names) == len(views) else \
            ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        out.append(f"{who}: {w}")
    return out
