"""The GPU beside the host: a view model of a recording's ``gpu`` and ``gpu_process`` tables
(NVML, sampled once per interval by dpuprof/record/drain/gpu.py), for every report format.

``gpu_view(rec)`` returns ``(GpuView, None)``, or ``(None, line)`` where the recording holds no GPU
sample: ``line`` is one sentence, "no GPU recorded: <why>", the why from meta ``gpu`` (what the
recorder found: no nvidia-ml-py, no driver, no device).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dpuprof.recording.meta import RecordingMeta


@dataclass
class GpuView:
    """``devices``: one row per GPU, index gpu_index; columns name, intervals (sampled),
    util_mean_pct, util_max_pct (NVML utilisation %, over the intervals it answered),
    mem_max_bytes, mem_total_bytes (NaN where unknown).
    ``timeline``: one row per interval x GPU; columns interval, t_start (unix s), t_s (s from the
    recording's start, the CPU timeline's clock), gpu_index, util_pct, mem_used_bytes, mem_total_bytes.
    ``processes``: one row per GPU x process, where NVML gave per-process figures (else empty);
    columns gpu_index, pid, comm, in_workload, sm_util_mean_pct (mean over the device's sampled
    intervals, 0 where the process had no sample), sm_share (its part of the summed per-process
    SM utilisation of that GPU, 0-1; NaN without SM figures), mem_max_bytes.
    """

    devices: pd.DataFrame
    timeline: pd.DataFrame
    processes: pd.DataFrame

    def as_dict(self, timeline: bool = True) -> dict:
        """JSON-ready: devices and processes as lists of records (NaN -> null), the timeline too
        unless ``timeline`` is False."""
        out = {"devices": _records(self.devices.reset_index()), "processes": _records(self.processes)}
        if timeline:
            out["timeline"] = _records(self.timeline.drop(columns=["t_start"]))
        return out


def _records(df: pd.DataFrame) -> list[dict]:
    rows = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if isinstance(v, float) and v != v:
                v = None
            elif hasattr(v, "item"):  # numpy scalar
                v = v.item()
            row[k] = round(v, 4) if isinstance(v, float) else v
        rows.append(row)
    return rows


def no_gpu_line(meta: RecordingMeta) -> str:
    """One line on why a recording has no GPU samples, from meta ``gpu``."""
    g = meta.gpu
    if g.get("available") is False and g.get("reason"):
        why = str(g["reason"])
    elif g.get("available"):
        why = "NVML found a GPU but gave no sample in the intervals shown"
    else:
        why = "the recorder did not look for one (no 'gpu' metadata)"
    return f"no GPU recorded: {why}"


def _t0(rec) -> float:
    iv = rec.table("intervals")
    start = rec.info.start_time
    first = float(iv["t_start"].min())
    return min(float(start), first) if start is not None else first


def gpu_view(rec) -> tuple[GpuView | None, str | None]:
    """(GpuView, None) for a recording with gpu rows, else (None, "no GPU recorded: ...")."""
    g = rec.table("gpu")
    iv = rec.table("intervals")
    if g.empty or iv.empty:
        return None, no_gpu_line(rec.info)
    if "mem_total_bytes" not in g.columns:  # a file read without the v3 late column
        g = g.assign(mem_total_bytes=float("nan"))
    t0 = _t0(rec)
    tl = g.merge(iv[["interval", "t_start"]], on="interval", how="inner").sort_values(["interval", "gpu_index"])
    tl = tl.assign(t_s=(tl["t_start"] - t0).round(6))
    tl = tl[["interval", "t_start", "t_s", "gpu_index", "util_pct", "mem_used_bytes", "mem_total_bytes"]]
    tl = tl.reset_index(drop=True)
    names = rec.info.gpu.get("devices")
    by = tl.groupby("gpu_index")
    devices = pd.DataFrame({"intervals": by["interval"].nunique(),
                            "util_mean_pct": by["util_pct"].mean(), "util_max_pct": by["util_pct"].max(),
                            "mem_max_bytes": by["mem_used_bytes"].max(),
                            "mem_total_bytes": by["mem_total_bytes"].max()})
    named = isinstance(names, list)
    devices.insert(0, "name", [str(names[int(i)]) if named and 0 <= int(i) < len(names) else f"GPU {int(i)}"
                               for i in devices.index])
    return GpuView(devices, tl, _processes(rec, devices)), None


def _processes(rec, devices: pd.DataFrame) -> pd.DataFrame:
    cols = ["gpu_index", "pid", "comm", "in_workload", "sm_util_mean_pct", "sm_share", "mem_max_bytes"]
    gp = rec.table("gpu_process")
    if gp.empty:
        return pd.DataFrame(columns=cols)
    agg = gp.groupby(["gpu_index", "pid"], as_index=False).agg(
        sm_sum=("sm_util_pct", "sum"), sm_n=("sm_util_pct", "count"), mem_max_bytes=("mem_used_bytes", "max"))
    n = agg["gpu_index"].map(devices["intervals"]).fillna(1).clip(lower=1)
    dev_sum = agg.groupby("gpu_index")["sm_sum"].transform("sum")
    agg["sm_util_mean_pct"] = (agg["sm_sum"] / n).where(agg["sm_n"] > 0)
    agg["sm_share"] = (agg["sm_sum"] / dev_sum).where((agg["sm_n"] > 0) & (dev_sum > 0))
    procs = rec.table("processes").drop_duplicates("pid").set_index("pid")
    agg["comm"] = [procs["comm"].get(p) or f"pid {int(p)}" for p in agg["pid"]]
    agg["in_workload"] = [bool(procs["in_workload"].get(p, 0)) for p in agg["pid"]]
    agg = agg.sort_values(["gpu_index", "sm_util_mean_pct", "mem_max_bytes"], ascending=[True, False, False])
    return agg[cols].reset_index(drop=True)


def device_lines(view: GpuView) -> list[str]:
    """One plain-text line per device (terminal and markdown share it)."""
    out = []
    for i, d in view.devices.iterrows():
        mem = "memory ?" if d["mem_max_bytes"] != d["mem_max_bytes"] else \
            f"memory max {d['mem_max_bytes'] / 2 ** 30:.1f} GiB" + \
            (f" of {d['mem_total_bytes'] / 2 ** 30:.1f}" if d["mem_total_bytes"] == d["mem_total_bytes"] else "")
        util = "util ?" if d["util_mean_pct"] != d["util_mean_pct"] else \
            f"util mean {d['util_mean_pct']:.0f} % (max {d['util_max_pct']:.0f} %)"
        out.append(f"GPU {int(i)} {d['name']}: {util}, {mem}, {int(d['intervals'])} intervals")
    return out


def process_lines(view: GpuView, top: int = 5) -> list[str]:
    """The busiest processes per device, one line each (empty without per-process figures)."""
    out = []
    for r in view.processes.groupby("gpu_index").head(top).itertuples(index=False):
        share = "" if r.sm_share != r.sm_share else f" ({100 * r.sm_share:.0f} % of the GPU's)"
        sm = "SM ?" if r.sm_util_mean_pct != r.sm_util_mean_pct else f"SM {r.sm_util_mean_pct:.0f} %{share}"
        mem = "" if r.mem_max_bytes != r.mem_max_bytes else f", memory max {r.mem_max_bytes / 2 ** 30:.2f} GiB"
        out.append(f"GPU {int(r.gpu_index)} pid {int(r.pid)} {r.comm}: {sm}{mem}")
    return out
