"""Per training step: wall time and host CPU (infrastructure CPU above all) per step, from the
recording's step markers.

Steps: ``markers`` of kind ``step`` (``dpuprof.mark_step()``) where there are at least two, else
``ddp_step`` (DDP's per-iteration entry), as the steady window picks them
(:data:`dpuprof.projection.window.STEP_KINDS`). Every rank of a DDP job marks its own steps; the
boundaries are taken from one rank, the one with the most markers (the lowest pid on a tie): the
ranks of a synchronous job step together, so one rank's clock is the job's. Step k runs from
marker k to marker k+1 (the last marker only ends the step before it).

CPU: the recording holds CPU per interval (1 s by default), not per step, so each interval's CPU
is **apportioned to the steps by time overlap**: a step that covers a quarter of an interval gets a
quarter of that interval's CPU, as if the interval's CPU was spent evenly over it. A step's CPU is
therefore smoothed over the interval length; sums over many steps are exact up to the first and
last partial intervals. CPU is host-wide (every process, the recorder included; idle and observer
excluded), like the report's "Host CPU by category".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE, NOT_WORK
from dpuprof.projection.window import STEP_KINDS
from dpuprof.render.memo import per_recording

#: Said wherever per-step CPU is shown.
METHOD = "per-interval CPU apportioned by overlap"


@dataclass
class StepsView:
    """``frame``: one row per step; columns step (0-based), t_start (unix s), t_s (s from the
    recording's start), wall_s, cpu_s (busy host CPU s), infra_cpu_s (network + storage + crypto +
    compression CPU s), then one column per category of CATEGORIES (CPU s).
    ``kind``: the marker kind used; ``pid``: the rank whose markers give the boundaries;
    ``ranks``: how many processes marked steps of that kind."""

    frame: pd.DataFrame
    kind: str
    pid: int
    ranks: int

    def summary(self) -> dict:
        """count, wall_s {median, p90, mean}, infra_cpu_s / cpu_s {median, mean} per step,
        infra_share (infrastructure share of the steps' busy CPU), marker kind, rank, method."""
        f = self.frame
        busy = float(f["cpu_s"].sum())

        def stats(col, q90=False):
            out = {"median": round(float(f[col].median()), 6), "mean": round(float(f[col].mean()), 6)}
            if q90:
                out["p90"] = round(float(f[col].quantile(0.9)), 6)
            return out

        return {"count": int(len(f)), "marker": self.kind, "boundaries_pid": self.pid, "ranks": self.ranks,
                "wall_s": stats("wall_s", True), "infra_cpu_s": stats("infra_cpu_s", True),
                "cpu_s": stats("cpu_s"),
                "infra_share": round(float(f["infra_cpu_s"].sum()) / busy, 6) if busy else None,
                "method": METHOD}

    def as_dict(self) -> dict:
        """JSON-ready: {"summary": ..., "steps": [row, ...]} (t_start dropped: t_s is relative)."""
        f = self.frame.drop(columns=["t_start"]).round(6)
        # column by column (tolist gives Python numbers): the same values as per-row int()/float()
        cols = [[int(x) for x in f[k].tolist()] if k == "step" else [float(x) for x in f[k].tolist()]
                for k in f.columns]
        keys = list(f.columns)
        return {"summary": self.summary(), "steps": [dict(zip(keys, vals)) for vals in zip(*cols)]}

    def summary_line(self) -> str:
        s = self.summary()
        ranks = f", 1 of {self.ranks} ranks" if self.ranks > 1 else ""
        return (f"{s['count']} steps ({s['marker']} markers of pid {self.pid}{ranks}): "
                f"wall median {s['wall_s']['median']:.3f} s, "
                f"p90 {s['wall_s']['p90']:.3f} s; infrastructure CPU per step median "
                f"{s['infra_cpu_s']['median']:.3f} s, mean {s['infra_cpu_s']['mean']:.3f} s "
                f"({METHOD})")


def step_marks(markers: pd.DataFrame) -> tuple[str, int, int, np.ndarray] | None:
    """(kind, pid, ranks, sorted unix times) of the step markers to use, or None (fewer than two)."""
    for kind in STEP_KINDS:
        m = markers[markers["kind"] == kind] if not markers.empty else markers
        if len(m) < 2:
            continue
        counts = m.groupby("pid").size()
        best = counts[counts == counts.max()].index.min()
        t = np.sort(m.loc[m["pid"] == best, "t"].to_numpy(dtype=float))
        if len(t) >= 2:
            return kind, int(best), int(len(counts)), t
    return None


def apportion(intervals: pd.DataFrame, cpu: pd.DataFrame, edges: np.ndarray) -> pd.DataFrame:
    """CPU of each [edges[k], edges[k+1]) by time overlap with the intervals (pure function).

    ``intervals``: [interval, t_start, t_end] (unix s, not overlapping); ``cpu``: index interval,
    one column per quantity (CPU s in that interval). Returns one row per step (len(edges) - 1),
    the same columns: each interval's CPU spread evenly over its length and summed per step.
    """
    iv = intervals.sort_values("t_start")
    vals = cpu.reindex(iv["interval"]).fillna(0.0)
    xs = np.empty(2 * len(iv))
    xs[0::2], xs[1::2] = iv["t_start"].to_numpy(float), iv["t_end"].to_numpy(float)
    out = {}
    for col in vals.columns:
        c = np.cumsum(vals[col].to_numpy(float))
        ys = np.empty(2 * len(iv))
        ys[0::2], ys[1::2] = np.concatenate(([0.0], c[:-1])), c  # flat across gaps between intervals
        cum = np.interp(edges, xs, ys)
        out[col] = np.diff(cum)
    return pd.DataFrame(out, columns=list(vals.columns))


@per_recording
def steps_view(rec) -> StepsView | None:
    """The StepsView of a recording, or None without two step markers or without intervals
    (computed once per Recording: treat it as read-only)."""
    marks = step_marks(rec.table("markers"))
    iv = rec.table("intervals")
    if marks is None or iv.empty:
        return None
    kind, pid, ranks, t = marks
    cat = rec.table("cpu_category")
    cat = cat[~cat["category"].isin(NOT_WORK)]
    per = cat.pivot_table(index="interval", columns="category", values="cpu_s", aggfunc="sum") \
        if not cat.empty else pd.DataFrame()
    per = per.reindex(columns=list(CATEGORIES)).fillna(0.0)
    cpu = apportion(iv, per, t)
    start = rec.info.start_time
    t0 = float(iv["t_start"].min())
    t0 = min(float(start), t0) if start is not None else t0
    frame = pd.DataFrame({"step": np.arange(len(t) - 1), "t_start": t[:-1], "t_s": t[:-1] - t0,
                          "wall_s": np.diff(t), "cpu_s": cpu.sum(axis=1).to_numpy(),
                          "infra_cpu_s": cpu[list(INFRASTRUCTURE)].sum(axis=1).to_numpy()})
    frame = pd.concat([frame, cpu.reset_index(drop=True)], axis=1)
    return StepsView(frame, kind, pid, ranks)
