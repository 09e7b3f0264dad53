"""Kernel work by the user-space work that made the kernel run (``stacks.cause``, schema v2).

A stack with kernel frames carries the user-space work under it (``crypto``, ``compression``,
``python-alloc``, ``torch``, ...; docs/taxonomy.md), so page faults filed as ``kernel_other.mm`` can
be reported as "mm caused by crypto": the part an offload of that user-space work would take
with it. Host-wide (every process), over the whole recording.

CPU seconds: each subcategory's measured CPU (``cpu_category.cpu_s``) is split across causes in
proportion to its stack samples, as the recorder splits exact time across subcategories.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.recording.reader import Recording
from dpuprof.render.memo import per_recording

#: rows shown in the terminal and HTML (all of them are in the JSON)
TOP = 8


@per_recording
def cause_frame(rec: Recording) -> pd.DataFrame | None:
    """Kernel work with a user-space cause, largest first; None where the recording has no causes
    (schema 1, or no kernel stack had user-space work under it). Computed once per Recording:
    treat it as read-only.

    Columns: category, subcategory (taxonomy names), cause, samples (stack samples), share (0..1 of
    the subcategory's stack samples), cpu_s (CPU seconds: share x the subcategory's cpu_s).
    """
    stacks, ss = rec.table("stacks"), rec.table("stack_samples")
    if stacks.empty or ss.empty or "cause" not in stacks.columns:
        return None
    per_stack = ss.groupby("stack_id")["samples"].sum()
    st = stacks.assign(samples=stacks["stack_id"].map(per_stack).fillna(0.0))
    caused = st[(st["cause"] != "") & (st["samples"] > 0)]
    if caused.empty:
        return None
    out = caused.groupby(["category", "subcategory", "cause"], as_index=False)["samples"].sum()
    total = st.groupby("subcategory")["samples"].sum()
    cpu = rec.table("cpu_category").groupby("subcategory")["cpu_s"].sum()
    out["share"] = out["samples"] / out["subcategory"].map(total)
    out["cpu_s"] = out["share"] * out["subcategory"].map(cpu).fillna(0.0)
    return out.sort_values(["cpu_s", "samples"], ascending=False, ignore_index=True)


def cause_rows(frame: pd.DataFrame | None, top: int = TOP) -> list[list[str]]:
    """Table rows (subcategory, cause, CPU s, share of the subcategory) of the largest ``top``."""
    if frame is None:
        return []
    return [[r.subcategory, r.cause, f"{r.cpu_s:.3f}", f"{100 * r.share:.1f} %"]
            for r in frame.head(top).itertuples(index=False)]


HEADER = ["kernel subcategory", "caused by", "CPU s", "share of it"]


def as_records(frame: pd.DataFrame | None) -> list[dict] | None:
    """The JSON form: [{category, subcategory, cause, samples, share, cpu_s}], or None."""
    if frame is None:
        return None
    return [{"category": r.category, "subcategory": r.subcategory, "cause": r.cause, "samples": int(r.samples),
             "share": round(float(r.share), 6), "cpu_s": round(float(r.cpu_s), 6)}
            for r in frame.itertuples(index=False)]
