"""The offload model: measured CPU per subcategory in, per-(subcategory, mechanism) rows out.

``plan(demand, profile, features)`` slices each infrastructure subcategory among the profile's
mechanisms (in profile order; a slice is the mechanism's measured ``share``, ``remainder`` takes
what is left) and attaches the Accelerometer parameters and offload counts.
``evaluate(rows)`` applies the equations (dpuprof.project.accelerometer) to every row.

Row DataFrame columns (units):
    category, subcategory        taxonomy names
    mechanism                    profile mechanism name, or None for what no mechanism covers
    label, requires, runs_on, resource, notes, sources
    share, share_workload        fraction (0..1) of the subcategory's host / workload CPU in the slice
    before_s, workload_before_s  CPU seconds of the slice, host-wide / workload processes only
    mode                         sync | sync_os | async
    alpha                        offloadable fraction of the slice (Accelerometer alpha)
    A                            accelerator speed-up (inf allowed)
    n, workload_n                offloads over the recording (host / workload share)
    o0_ns, L_ns, Q_ns, o1_ns     per-offload costs, nanoseconds
    cap_factor                   fraction of alpha the device has capacity for (1 = no limit hit)
    n_from, host_bytes_per_cpu_s how n is counted; bytes one host CPU-second processes (cpu_chunks and
                                 inline-crypto demand): measured from codec_calls where recorded
    calls_per_cpu_s              measured calls per CPU-second (codec_calls), else NaN
    rate_note                    where host_bytes_per_cpu_s came from (measured, or a profile constant)
    rate_basis                   "measured", "extrapolated" (a uprobe stopped early: its counts scaled
                                 up, project/codecs.py), "lower_bound" (stopped early, time unknown),
                                 "profile" (the constant), or None (no rate)
  after evaluate():
    alpha_eff                    alpha x cap_factor
    n, workload_n                now the offloads of the effective alpha: n_profile x cap_factor
    n_profile                    the offloads at the profile's alpha (before capacity limits)
    after_s, workload_after_s    host CPU seconds the slice costs after offload (if enabled)
    freed_s, workload_freed_s    before - after (0 when not enabled)
    speedup                      Accelerometer S of the slice (C = before_s), as if enabled
    pays                         S > 1: the offload frees more than it costs
    enabled                      pays; a mechanism that does not pay is left off (after = before)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpuprof.categories import INFRASTRUCTURE
from dpuprof.project import accelerometer
from dpuprof.project.features import Features
from dpuprof.project.profiles import Profile

ROW_COLUMNS = ["category", "subcategory", "mechanism", "label", "requires", "runs_on", "resource", "notes",
               "sources", "share", "share_workload", "before_s", "workload_before_s", "mode", "alpha", "A",
               "n", "workload_n", "o0_ns", "L_ns", "Q_ns", "o1_ns", "cap_factor", "n_from", "host_bytes_per_cpu_s",
               "calls_per_cpu_s", "rate_note", "rate_basis"]
_EPS = 1e-12


def plan(dem: pd.DataFrame, profile: Profile, feats: Features) -> pd.DataFrame:
    """Slice each infrastructure subcategory of ``dem`` (see features.demand) among mechanisms.

    Returns rows with the columns of ``ROW_COLUMNS``; ``cap_factor`` is 1 (see capacity.apply).
    """
    rows = []
    for rec in dem.itertuples(index=False):
        if rec.category not in INFRASTRUCTURE or (rec.host_s <= 0 and rec.workload_s <= 0):
            continue
        left_h, left_w = 1.0, 1.0
        for mech in profile.mechanisms:
            if not mech.matches(rec.subcategory):
                continue
            if mech.share == "remainder":
                sh, sw = left_h, left_w
            else:
                sh = feats.share(mech.share, rec.subcategory, workload=False)
                sw = min(feats.share(mech.share, rec.subcategory, workload=True), left_w)
                if rec.host_s > 0:  # the workload's slice is part of the host's: keep before >= workload
                    sh = max(sh, sw * rec.workload_s / rec.host_s)
                sh = min(sh, left_h)
            if sh <= _EPS and sw <= _EPS:
                continue
            left_h, left_w = max(0.0, left_h - sh), max(0.0, left_w - sw)
            rows.append({
                "category": rec.category, "subcategory": rec.subcategory, "mechanism": mech.name,
                "label": mech.label, "requires": mech.requires, "runs_on": mech.runs_on,
                "resource": mech.resource, "notes": mech.notes, "sources": mech.sources(),
                "share": sh, "share_workload": sw,
                "before_s": sh * rec.host_s, "workload_before_s": sw * rec.workload_s,
                "mode": mech.mode.value, "alpha": float(mech.alpha.value), "A": float(mech.A.value),
                "n": 0.0, "workload_n": 0.0,
                "o0_ns": float(mech.o0_ns.value), "L_ns": float(mech.L_ns.value),
                "Q_ns": float(mech.Q_ns.value), "o1_ns": float(mech.o1_ns.value), "cap_factor": 1.0,
                "n_from": mech.n_from,
                "_chunk": None if mech.chunk_bytes is None else float(mech.chunk_bytes.value),
                **_host_rate(mech, rec.subcategory, feats),
            })
        if left_h > _EPS or left_w > _EPS:
            rows.append({
                "category": rec.category, "subcategory": rec.subcategory, "mechanism": None,
                "label": "no mechanism of this device covers it", "requires": "", "runs_on": None,
                "resource": None, "notes": "", "sources": [], "share": left_h, "share_workload": left_w,
                "before_s": left_h * rec.host_s, "workload_before_s": left_w * rec.workload_s,
                "mode": "async", "alpha": 0.0, "A": 1.0, "n": 0.0, "workload_n": 0.0,
                "o0_ns": 0.0, "L_ns": 0.0, "Q_ns": 0.0, "o1_ns": 0.0, "cap_factor": 1.0,
                "n_from": "none", "_chunk": None, "host_bytes_per_cpu_s": None, "calls_per_cpu_s": None,
                "rate_note": None, "rate_basis": None,
            })
    if not rows:
        return pd.DataFrame(columns=ROW_COLUMNS)
    df = pd.DataFrame(rows)
    _attach_counts(df, feats)
    return df[ROW_COLUMNS].reset_index(drop=True)


def _host_rate(mech, subcategory: str, feats: Features) -> dict:
    """host_bytes_per_cpu_s / calls_per_cpu_s / rate_note of a slice: measured, else the profile's."""
    const = mech.host_bytes_per_cpu_s
    measured = feats.codec_measure(subcategory, mech.share) if const is not None else None
    if measured is not None:
        return {"host_bytes_per_cpu_s": measured.bytes_per_cpu_s, "calls_per_cpu_s": measured.calls_per_cpu_s,
                "rate_note": f"{mech.name} on {subcategory}: host_bytes_per_cpu_s {measured.describe()}; "
                             "n = one offload per measured call, or per chunk_bytes of a larger call",
                "rate_basis": measured.basis}
    if const is None:
        return {"host_bytes_per_cpu_s": None, "calls_per_cpu_s": None, "rate_note": None, "rate_basis": None}
    why = ("the uprobes see user-space calls only" if not subcategory.endswith(".user")
           else "no codec_calls for it in the recording: record with dpuprof record --codec-uprobes; a "
                "schema v1 file has none, and a uprobe may not attach")
    return {"host_bytes_per_cpu_s": float(const.value), "calls_per_cpu_s": None,
            "rate_note": f"{mech.name} on {subcategory}: host_bytes_per_cpu_s = {float(const.value):.3g} B per "
                         f"CPU-second is a profile constant, not measured on this host ({why}); source: "
                         f"{const.source}", "rate_basis": "profile"}


def _attach_counts(df: pd.DataFrame, feats: Features) -> None:
    """Fill ``n`` / ``workload_n``: a mechanism's recorded count split over its rows by CPU share."""
    for name, grp in df[df["mechanism"].notna()].groupby("mechanism", sort=False):
        n_from = grp["n_from"].iloc[0]
        if n_from == "cpu_chunks":
            # one offload per chunk of the bytes the offloaded CPU time processed
            per_s = grp["host_bytes_per_cpu_s"] / grp["_chunk"]
            calls = pd.to_numeric(grp["calls_per_cpu_s"], errors="coerce")
            per_s = np.where(calls.notna(), np.maximum(calls.fillna(0.0), per_s), per_s)
            df.loc[grp.index, "n"] = grp["alpha"] * grp["before_s"] * per_s
            df.loc[grp.index, "workload_n"] = grp["alpha"] * grp["workload_before_s"] * per_s
            continue
        total = feats.count(n_from)
        host = grp["before_s"].sum()
        if host > 0:
            n = total * grp["before_s"] / host
            df.loc[grp.index, "n"] = n
            # the workload's offloads in proportion to its share of each row's CPU
            safe = grp["before_s"].where(grp["before_s"] > 0, 1.0)
            df.loc[grp.index, "workload_n"] = np.where(grp["before_s"] > 0, n * grp["workload_before_s"] / safe, 0.0)


def evaluate(rows: pd.DataFrame) -> pd.DataFrame:
    """Apply the Accelerometer equations to each row (see module doc for the added columns)."""
    df = rows.copy()
    if df.empty:
        for col in ("alpha_eff", "n_profile", "after_s", "workload_after_s", "freed_s", "workload_freed_s", "speedup"):
            df[col] = pd.Series(dtype=float)
        df["pays"] = pd.Series(dtype=bool)
        df["enabled"] = pd.Series(dtype=bool)
        return df
    ns = 1e-9
    df["alpha_eff"] = df["alpha"] * df["cap_factor"]
    # only the capacity-limited part is offloaded, so only its offloads are paid for
    df["n_profile"] = df["n"]
    df["n"] = df["n"] * df["cap_factor"]
    df["workload_n"] = df["workload_n"] * df["cap_factor"]
    args = dict(A=df["A"], o0=df["o0_ns"] * ns, L=df["L_ns"] * ns, Q=df["Q_ns"] * ns, o1=df["o1_ns"] * ns,
                mode=df["mode"].to_numpy(dtype=object))
    after = accelerometer.host_time_after(df["before_s"], df["alpha_eff"], n=df["n"], **args)
    wl_after = accelerometer.host_time_after(df["workload_before_s"], df["alpha_eff"], n=df["workload_n"], **args)
    df["speedup"] = accelerometer.speedup(df["before_s"], df["alpha_eff"], n=df["n"], **args)
    df["after_if_enabled_s"] = after
    covered = df["mechanism"].notna()
    df["pays"] = covered & (df["before_s"] - after > _EPS * np.maximum(1.0, df["before_s"]))
    df["enabled"] = df["pays"]
    df["after_s"] = np.where(df["enabled"], after, df["before_s"])
    df["workload_after_s"] = np.where(df["enabled"], np.minimum(wl_after, df["workload_before_s"]),
                                      df["workload_before_s"])
    df["freed_s"] = df["before_s"] - df["after_s"]
    df["workload_freed_s"] = df["workload_before_s"] - df["workload_after_s"]
    return df
