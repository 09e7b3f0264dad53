"""``--format perfetto``: Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing) on the real clock.

So that it lines up with a PyTorch profiler (Kineto) or nsys trace of the same run:

- ``ts`` is microseconds since the Unix epoch: the recording's intervals are stamped with the
  recorder's ``time.time()`` (``t_start``/``t_end``, unix seconds), the clock Kineto's JSON uses
  too; a meta ``clock_offset_s``, where a recording has one, is added to every time;
- ``pid``/``tid`` are the real ones, with ``process_name`` (the recorded comm; the recorder is
  named "dpuprof recorder") and ``thread_name`` (from the ``threads`` table of schema-v2
  recordings; else the main thread, tid = pid, is named after its process); a v2 recording's
  ``thread_time`` gives each thread an on-CPU / run-queue counter in cores.

What the trace holds, per run:

- pid 0 ("HOST: ... (dpuprof)", the idle task's pid, never a real process of the run): host-wide
  counters -- CPU by category in cores (``host cpu (cores)``, one counter series per category),
  network and disk MB/s, IOPS, and per GPU ``gpu N util (%)`` and ``gpu N memory (MiB)``;
- each process of the ``processes`` table with busy CPU: a ``cpu (cores)`` counter with one series
  per category, 0 where the process was not seen;
- each process NVML saw on a GPU (schema v3 ``gpu_process``): ``gpu N (%)`` {sm} and
  ``gpu N memory (MiB)`` {used} counters on its own track;
- stack samples as instant events (``"ph": "i"``, thread scope) on the process's main thread: the
  recording keeps stack samples per interval, not per sample, so each (interval, process, stack)
  becomes one instant at the interval's start, named after the leaf frame, with ``args``
  {stack (root first), samples, category, subcategory}. (Instants rather than the format's
  ``samples``/``stackFrames`` block, because ui.perfetto.dev's JSON importer shows instants and
  their args, and a selection of them lists the leaf frames with their counts.)
- step markers (schema v2 ``markers``) as instant events named after their kind;
- in ``metadata``: the data lost as shares (worst first) and the ``--time`` window, per run.

Comparisons and clusters hold several runs: run k's pids and tids are shifted by k x 2**22 (above
Linux's largest pid), so runs never share a track; the first run keeps its real ids.
"""

from __future__ import annotations

import json

import pandas as pd

from dpuprof.categories import CATEGORIES, NOT_WORK
from dpuprof.recording.folded import leaf
from dpuprof.render.gpu import gpu_view
from dpuprof.render.output import Rendered
from dpuprof.render.view import RECORDER_LABEL, Report, RunView, recorder_pid, workload_stack_samples

HOST_PID = 0
PID_STRIDE = 1 << 22
IO_TRACKS = {"host net (MB/s)": {"tx": ("net_tx", 1e-6), "rx": ("net_rx", 1e-6)},
             "host disk (MB/s)": {"read": ("disk_read", 1e-6), "write": ("disk_write", 1e-6)},
             "host IOPS": {"read": ("read_iops", 1.0), "write": ("write_iops", 1.0)}}


def _us(t: float) -> int:
    return int(round(float(t) * 1e6))


def _meta(kind: str, pid: int, tid: int, **args) -> dict:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _counter_series(name: str, pid: int, starts, frame: pd.DataFrame, end: float) -> list[dict]:
    """One ``C`` event per row of ``frame`` (columns = series) at ``starts``, then all 0 at ``end``."""
    cols = list(frame.columns)
    events = [{"name": name, "ph": "C", "ts": _us(t), "pid": pid, "tid": pid,
               "args": {c: round(float(v), 6) for c, v in zip(cols, row)}}
              for t, row in zip(starts, frame.itertuples(index=False))]
    if events:
        events.append({"name": name, "ph": "C", "ts": _us(end), "pid": pid, "tid": pid,
                       "args": {c: 0 for c in cols}})
    return events


class _Clock:
    """Interval times of one recording (unix s, plus the stored clock offset)."""

    def __init__(self, rec):
        self.offset = rec.info.clock_offset_s
        iv = rec.table("intervals").sort_values("interval").set_index("interval")
        self.iv = iv.assign(dt=(iv["t_end"] - iv["t_start"]).clip(lower=1e-9),
                            t_start=iv["t_start"] + self.offset, t_end=iv["t_end"] + self.offset)
        self.end = float(self.iv["t_end"].max()) if not iv.empty else 0.0


def _host_events(v: RunView, rec, clock: _Clock, pid: int) -> list[dict]:
    iv = clock.iv
    host = v.host_text or "host"
    events = [_meta("process_name", pid, pid, name=f"HOST: {host} (dpuprof {v.name})"),
              _meta("process_sort_index", pid, pid, sort_index=-1)]
    tl = v.timeline.reset_index(drop=True)
    if len(tl) == len(iv):
        events += _counter_series("host cpu (cores)", pid, iv["t_start"], tl, clock.end)
    io = v.io.reset_index(drop=True)
    if len(io) == len(iv):
        for name, series in IO_TRACKS.items():
            frame = pd.DataFrame({k: io[col] * scale for k, (col, scale) in series.items() if col in io})
            events += _counter_series(name, pid, iv["t_start"], frame, clock.end)
    return events + _gpu_events(rec, clock, pid)


def _gpu_events(rec, clock: _Clock, pid: int) -> list[dict]:
    """Per GPU (dpuprof/render/gpu.py) two counter tracks on the host: ``gpu N util (%)`` and
    ``gpu N memory (MiB)`` {used, total}, stamped with the intervals' times as the CPU tracks are.
    A refused NVML field is left out of its event rather than drawn as 0."""
    gpu, _ = gpu_view(rec)
    if gpu is None:
        return []
    events = []
    tl = gpu.timeline[gpu.timeline["interval"].isin(clock.iv.index)]
    for index, g in tl.groupby("gpu_index"):
        starts = clock.iv.loc[g["interval"], "t_start"]
        util = pd.DataFrame({"util": g["util_pct"].to_numpy()})
        mem = pd.DataFrame({"used": (g["mem_used_bytes"] / 2 ** 20).to_numpy(),
                            "total": (g["mem_total_bytes"] / 2 ** 20).to_numpy()})
        for name, frame in ((f"gpu {int(index)} util (%)", util), (f"gpu {int(index)} memory (MiB)", mem)):
            series = _counter_series(name, pid, starts, frame.fillna(-1.0), clock.end)
            for ev in series:  # NaN (not answered) was marked -1: drop it from the event's args
                ev["args"] = {k: v for k, v in ev["args"].items() if v != -1.0}
            events += [ev for ev in series if ev["args"]]
    return events


def _gpu_process_events(rec, clock: _Clock, shift: int, known: set[int]) -> list[dict]:
    """Per process on a GPU (schema v3 ``gpu_process``, where NVML gives it): a ``gpu N (%)``
    counter {sm} on the process's track, and ``gpu N memory (MiB)`` {used}; a process with no
    CPU track yet is named from the processes table."""
    gp = rec.table("gpu_process")
    gp = gp[gp["interval"].isin(clock.iv.index)]
    if gp.empty:
        return []
    procs = rec.table("processes").drop_duplicates("pid").set_index("pid")["comm"]
    events = []
    for (pid, index), g in gp.sort_values("interval").groupby(["pid", "gpu_index"]):
        pid = int(pid)
        if pid not in known:
            known.add(pid)
            events.append(_meta("process_name", pid + shift, pid + shift, name=procs.get(pid) or f"pid {pid}"))
        starts = clock.iv.loc[g["interval"], "t_start"]
        for name, frame in ((f"gpu {int(index)} (%)", pd.DataFrame({"sm": g["sm_util_pct"].to_numpy()})),
                            (f"gpu {int(index)} memory (MiB)",
                             pd.DataFrame({"used": (g["mem_used_bytes"] / 2 ** 20).to_numpy()}))):
            if frame.iloc[:, 0].isna().all():
                continue
            series = _counter_series(name, pid + shift, starts, frame.fillna(-1.0), clock.end)
            events += [dict(ev, args={k: v for k, v in ev["args"].items() if v != -1.0}) for ev in series
                       if any(v != -1.0 for v in ev["args"].values())]
    return events


def _process_events(rec, clock: _Clock, shift: int) -> list[dict]:
    """Names and per-process CPU counters of every process of the processes table with busy CPU."""
    procs = rec.table("processes").drop_duplicates("pid").set_index("pid")
    cat = rec.table("cpu_category")
    cat = cat[~cat["category"].isin(NOT_WORK) & cat["pid"].isin(procs.index)]
    rpid = recorder_pid(rec)
    events = []
    # one pivot for all processes (a pivot per process is 30x slower on a long recording)
    wide = cat.groupby(["pid", "interval", "category"])["cpu_s"].sum().unstack("category")
    wide = wide.reindex(columns=list(CATEGORIES)).fillna(0.0)
    for pid, pivot in wide.groupby(level="pid"):
        pid = int(pid)
        pivot = pivot.droplevel("pid")
        name = RECORDER_LABEL if pid == rpid else (procs.at[pid, "comm"] or f"pid {pid}")
        events.append(_meta("process_name", pid + shift, pid + shift, name=name))
        cmd = procs.at[pid, "cmdline"]
        if cmd:
            events.append(_meta("process_labels", pid + shift, pid + shift, labels=str(cmd)[:200]))
        events.append(_meta("thread_name", pid + shift, pid + shift, name=name))
        span = clock.iv.loc[int(pivot.index.min()):int(pivot.index.max())]
        pivot = pivot.reindex(index=span.index, columns=list(CATEGORIES), fill_value=0.0).fillna(0.0)
        cores = pivot.div(span["dt"], axis=0)
        events += _counter_series("cpu (cores)", pid + shift, span["t_start"], cores, float(span["t_end"].max()))
    return events


def _thread_events(rec, clock: _Clock, shift: int, known: set[int]) -> list[dict]:
    """thread_name of each thread of the ``threads`` table (schema v2), and per thread its scheduler
    time from ``thread_time`` as a counter ``thread TID comm`` {on_cpu, runq} in cores (a counter
    belongs to a process in this format, so the thread is named in the counter's name)."""
    th = rec.table("threads").drop_duplicates("tid")
    th = th[th["pid"].isin(known)]
    events = [_meta("thread_name", int(r.pid) + shift, int(r.tid) + shift, name=r.comm or f"tid {int(r.tid)}")
              for r in th.itertuples(index=False) if int(r.tid) != int(r.pid)]
    tt = rec.table("thread_time")
    tt = tt[tt["tid"].isin(th["tid"]) & tt["interval"].isin(clock.iv.index)]
    owner = th.set_index("tid")
    for tid, rows in tt.groupby("tid"):
        rows = rows.groupby("interval")[["on_cpu_ns", "runq_ns"]].sum()
        span = clock.iv.loc[rows.index]
        cores = pd.DataFrame({"on_cpu": rows["on_cpu_ns"].to_numpy(), "runq": rows["runq_ns"].to_numpy()}) \
            .div(span["dt"].to_numpy() * 1e9, axis=0)
        pid = int(owner.at[tid, "pid"]) + shift
        events += _counter_series(f"thread {int(tid)} {owner.at[tid, 'comm']} (cores)", pid, span["t_start"],
                                  cores, float(span["t_end"].max()))
    return events


def _stack_events(rec, clock: _Clock, shift: int, known: set[int]) -> list[dict]:
    ss = workload_stack_samples(rec)
    ss = ss[ss["pid"].isin(known) & ss["interval"].isin(clock.iv.index)]
    st = rec.table("stacks")
    agg = ss.groupby(["interval", "pid", "stack_id"], as_index=False)["samples"].sum()
    agg = agg[agg["samples"] > 0].merge(st[~st["category"].isin(NOT_WORK)], on="stack_id", how="inner")
    agg["ts"] = clock.iv.loc[agg["interval"], "t_start"].to_numpy()
    agg["leaf"] = agg["folded"].map(leaf)
    return [{"name": leaf, "ph": "i", "s": "t", "pid": int(pid) + shift, "tid": int(pid) + shift, "ts": _us(ts),
             "cat": "stack", "args": {"stack": folded, "samples": int(n), "category": cat, "subcategory": sub}}
            for leaf, pid, ts, folded, n, cat, sub in zip(agg["leaf"], agg["pid"], agg["ts"], agg["folded"],
                                                          agg["samples"], agg["category"], agg["subcategory"])]


def _marker_events(rec, clock: _Clock, shift: int) -> list[dict]:
    m = rec.table("markers")
    return [{"name": str(r.kind), "ph": "i", "s": "t", "pid": int(r.pid) + shift, "tid": int(r.tid) + shift,
             "ts": _us(r.t + clock.offset), "cat": "marker"} for r in m.itertuples(index=False)]


def run_events(v: RunView, k: int) -> list[dict]:
    """The events of run ``k`` of a report (k = 0 keeps the real pids)."""
    rec = v.recording
    shift = k * PID_STRIDE
    clock = _Clock(rec)
    events = _host_events(v, rec, clock, HOST_PID + shift)
    if rec.category_split:
        events += _process_events(rec, clock, shift)
    known = {int(e["pid"]) - shift for e in events if e["name"] == "process_name"} - {HOST_PID}
    events += _gpu_process_events(rec, clock, shift, known)
    events += _thread_events(rec, clock, shift, known)
    events += _stack_events(rec, clock, shift, known)
    events += _marker_events(rec, clock, shift)
    return events


def trace(report: Report) -> dict:
    events = []
    for k, v in enumerate(report.runs):
        events += run_events(v, k)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": {"source": "dpuprof", "report": report.title,
                         "clock": "ts: microseconds since the Unix epoch (the recorder's time.time())",
                         "pid_shift": {v.name: k * PID_STRIDE for k, v in enumerate(report.runs)},
                         # the data lost, as shares of what each loss affects, worst first
                         "lost_shares": {v.name: v.summary.lost_shares for v in report.runs},
                         "window": {v.name: v.summary.window for v in report.runs if v.summary.window}}}


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    return Rendered(json.dumps(trace(report), separators=(",", ":"), allow_nan=False).encode("utf-8"))
