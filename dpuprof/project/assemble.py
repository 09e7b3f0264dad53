"""Assemble the Projection (dpuprof.projection.schema, docs/projection-contract.md) from a
ProjectionInput and a Profile.

``evaluate_rows`` runs the model (demand -> plan -> capacity -> equations) and returns the
DataFrames; ``build_projection`` turns them into the typed Projection, validated here, once. Pure:
no file I/O (the CLI adds ``recording_sha256`` and writes the file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dpuprof.project import allreduce, capacity, modes, offload_rows, outcomes
from dpuprof.project.speedup import job_speedup
from dpuprof.projection.schema import PROJECTION_VERSION, Projection
from dpuprof.project.features import Features, demand
from dpuprof.project.inputs import ProjectionInput
from dpuprof.project.profiles import Profile


GLOBAL_ASSUMPTIONS = [
    "CPU seconds are each process's exact on-CPU time from the scheduler, split across subcategories in "
    "proportion to its stack samples (taken at the sampling frequency); idle is excluded",
    "offload model: Accelerometer (Sriraman and Dhanotia, ASPLOS 2020; akshithasriraman/Accelerometer "
    "accelerometer.cc) applied per (subcategory, mechanism) slice with C = the slice's measured host time",
    "each mechanism takes the measured share of a subcategory it can cover, in the profile's order; "
    "'remainder' takes what earlier mechanisms left; what no mechanism covers stays on the host",
    "a mechanism whose per-offload costs exceed what it removes (S <= 1) is left off and listed under 'rejected'",
    "every device parameter carries its source in 'dpu' and in each row's 'sources'; 'assumption:' marks "
    "values not found published",
]


@dataclass
class ModelResult:
    """The model's DataFrames for one input and profile."""

    demand: pd.DataFrame
    rows: pd.DataFrame  # evaluated rows (offload_rows.evaluate columns)
    capacity: list
    features: Features


def evaluate_rows(inp: ProjectionInput, profile: Profile, only: tuple[str, ...] | None = None,
                  window: tuple[float, float] | str = "steady") -> ModelResult:
    """demand -> plan -> capacity at the post-offload rate -> Accelerometer equations.

    ``only``: offload only these top-level categories (a one-category what-if); the rest stays on
    the host but still counts in the totals. Capacity is checked at the rate the job runs after
    the offload: the self-consistent expected speedup of the job (capacity.at_post_offload_rate),
    read over ``window``.
    """
    feats = Features(inp)
    dem = demand(inp)
    offered = dem if only is None else dem[dem["category"].isin(only)]
    rows = offload_rows.plan(offered, profile, feats)

    def at(rate: float):
        capped, caps = capacity.apply(rows, profile, feats, inp.duration_s, rate=rate)
        ev = offload_rows.evaluate(capped)
        return ev, caps, job_speedup(inp, dem, ev, window)["expected"]

    ev, caps, _, _ = capacity.at_post_offload_rate(at)
    return ModelResult(dem, ev, caps, feats)


def _num(x, digits: int = 6):
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return round(x, digits)


def _str(x) -> str | None:
    """Text or None (pandas turns None into NaN in object columns)."""
    return x if isinstance(x, str) else None


def _row_dict(r) -> dict:
    mechanism = _str(r.mechanism)
    notes = [r.notes] if _str(r.notes) else []
    limited = bool(r.cap_factor < 1.0 - 1e-12)
    if limited:
        notes.append(f"capacity-limited: the device has capacity for {100 * r.cap_factor:.1f} % of this work; "
                     "the rest stays on the host")
    if mechanism is not None and not r.pays:
        notes.append(f"does not pay: S = {r.speedup:.3f} <= 1, the per-offload cost n x (o0 + L + Q"
                     f"{' + o1' if r.mode == 'sync_os' else ''}) exceeds what it removes; left on the host")
    return {
        "category": r.category, "subcategory": r.subcategory, "mechanism": mechanism,
        "label": _str(r.label) or "", "requires": _str(r.requires) or "", "mode": r.mode,
        "runs_on": _str(r.runs_on), "resource": _str(r.resource),
        "share": _num(r.share), "share_workload": _num(r.share_workload),
        "alpha": _num(r.alpha_eff), "alpha_profile": _num(r.alpha), "capacity_factor": _num(r.cap_factor),
        "A": _num(r.A), "n": _num(r.n, 3), "n_profile": _num(r.n_profile, 3), "C": _num(r.before_s * 1e9, 1),
        "host_bytes_per_cpu_s": _num(r.host_bytes_per_cpu_s, 1), "rate_note": _str(r.rate_note),
        "rate_basis": _str(r.rate_basis),
        "o0": _num(r.o0_ns, 3), "L": _num(r.L_ns, 3), "Q": _num(r.Q_ns, 3), "o1": _num(r.o1_ns, 3),
        "before_s": _num(r.before_s), "after_s": _num(r.after_s), "freed_s": _num(r.freed_s),
        "workload_before_s": _num(r.workload_before_s), "workload_after_s": _num(r.workload_after_s),
        "workload_freed_s": _num(r.workload_freed_s),
        "speedup": _num(r.speedup), "after_if_enabled_s": _num(r.after_if_enabled_s),
        "pays": bool(r.pays), "enabled": bool(r.enabled), "capacity_limited": limited,
        "notes": "; ".join(notes), "sources": list(r.sources) if isinstance(r.sources, (list, tuple)) else [],
    }


def build_projection(inp: ProjectionInput, profile: Profile, *, nodes: int | None = None, gpus_per_node: int = 1,
            mode: str | None = None, only: tuple[str, ...] | None = None,
            window: tuple[float, float] | str = "steady", compare_modes: bool = True) -> Projection:
    """The Projection of ``inp`` on ``profile`` (CPU seconds over the recording, as
    docs/projection-contract.md); ``recording_sha256`` is None (the file's checksum is the
    caller's: dpuprof.projection.store.stamp).

    ``only``: offload only these top-level categories. ``window``: the part of the recording the
    job speedup is read from, (start, end) seconds or "steady" (dpuprof.projection.window).

    ``mode``: override every mechanism's execution mode (sync, sync_os, async) for a what-if.
    ``nodes``/``gpus_per_node``: extrapolate all-reduce time (alpha-beta ring, TCP vs RDMA).
    ``compare_modes``: also run the model under the other execution mode (dpuprof.project.modes)
    into ``speedup.other_mode``; the agent, which publishes only the bounds, turns it off.
    """
    given = profile
    if mode is not None:
        profile = profile.with_overrides(mode=mode)
    res = evaluate_rows(inp, profile, only, window)
    rows = res.rows
    enabled, rejected, left, warnings = _split_rows(rows, res.capacity)
    assumptions = _assumptions(res, rows, enabled + rejected)

    ar, w = (None, []) if nodes is None else _allreduce(inp, profile, res, nodes, gpus_per_node)
    warnings += w

    warnings = res.features.warnings + warnings
    busy = float(res.demand["host_s"].sum()) if not res.demand.empty else 0.0
    if inp.capacity_s > 0 and busy > 1.10 * inp.capacity_s:
        warnings.append(f"busy CPU samples ({busy:.1f} s) exceed cpu_count x duration ({inp.capacity_s:.1f} s) "
                        f"by {100 * (busy / inp.capacity_s - 1):.0f} %: sampling at the recording's edges, or a "
                        "wrong cpu_count; cores for AI may be understated")

    speed = job_speedup(inp, res.demand, rows, window)
    speed["modes"] = modes.assumed(rows)
    speed["other_mode"] = _other_mode(inp, given, mode, only, window) if compare_modes else None
    if not speed["pays"]:
        warnings.append(f"offload does not pay on this recording with {profile.name}: no mechanism frees host CPU")

    # validated here, once: a model bug (a NaN that escaped _num, an unknown category) fails where
    # it is made, and every caller reads typed fields
    return Projection.model_validate({
        "projection_version": PROJECTION_VERSION,
        "recording": inp.source,
        "recording_sha256": None,
        "dpu": profile.as_dict(),
        "mode_override": mode,
        "only": list(only) if only else None,
        "host": {"cpu_count": inp.cpu_count, "duration_s": round(inp.duration_s, 6),
                 "host_capacity_s": round(inp.capacity_s, 6)},
        "rows": enabled,
        "rejected": rejected,
        "left_on_host": left,
        "by_category": outcomes.by_category(res.demand, rows),
        "totals": outcomes.totals(res.demand, rows),
        "cores_for_ai": outcomes.cores_for_ai(res.demand, rows, inp.cpu_count, inp.duration_s),
        "speedup": speed,
        "allreduce": ar,
        "capacity": res.capacity,
        "sweep": None,
        "assumptions": assumptions,
        "warnings": list(dict.fromkeys(warnings)),
    })


def _other_mode(inp: ProjectionInput, given: Profile, mode: str | None, only: tuple[str, ...] | None,
                window: tuple[float, float] | str) -> dict:
    """The speedup under the other execution mode (modes.other_override), by the whole model:
    ``{mode, flag, modes, low, expected, high, freed_s, regime}`` (``mode`` None: each mechanism's own)."""
    other, flag = modes.other_override(given, mode)
    profile = given.with_overrides(mode=other) if other is not None else given
    res = evaluate_rows(inp, profile, only, window)
    sp = job_speedup(inp, res.demand, res.rows, window)
    return {"mode": other, "flag": flag, "modes": modes.assumed(res.rows), "low": sp["low"],
            "expected": sp["expected"], "high": sp["high"], "freed_s": sp["freed_s"], "regime": sp["regime"]}


def _allreduce(inp: ProjectionInput, profile: Profile, res: ModelResult, nodes: int,
               gpus_per_node: int) -> tuple[dict | None, list[str]]:
    """(the ``allreduce`` object at ``nodes`` x ``gpus_per_node`` ranks or None, its warnings),
    with RDMA's per-operation cost (o0 + L + Q, ns) from the profile's rdma mechanism if any."""
    rdma = next((m for m in profile.mechanisms if m.name == "rdma"), None)
    cost = None if rdma is None else float(rdma.o0_ns.value + rdma.L_ns.value + rdma.Q_ns.value)
    net_cpu = float(res.demand.loc[res.demand["category"] == "network", "host_s"].sum()) \
        if not res.demand.empty else 0.0
    return allreduce.project_allreduce(res.features, profile, nodes, gpus_per_node, inp.duration_s, net_cpu, cost)


def _split_rows(rows: pd.DataFrame, capacity: list) -> tuple[list, list, list, list]:
    """(enabled, rejected, left on the host) row dicts of the evaluated ``rows``, and the warnings
    they and the capacity records raise."""
    warnings: list[str] = []
    enabled, rejected, left = [], [], []
    for r in rows.itertuples(index=False):
        d = _row_dict(r)
        if d["mechanism"] is None:
            left.append(d)
        elif r.enabled:
            enabled.append(d)
        else:
            rejected.append(d)
            if r.alpha_eff > 0 and r.before_s > 0:
                warnings.append(f"{d['mechanism']} on {r.subcategory} does not pay (S = {r.speedup:.3f}): left on the host")
    for c in capacity:
        if c["bottleneck"]:
            warnings.append(f"capacity: {c['resource']} demand {c['demand']:g} {c['unit']} exceeds the limit "
                            f"{c['limit']:g} {c['unit']} ({c['action']})")
    return enabled, rejected, left, warnings


def _assumptions(res: ModelResult, rows: pd.DataFrame, offered: list) -> list[str]:
    """The projection's assumptions: the global ones, loopback standing in for the network, the
    rate notes of the rows, and RDMA carrying the workload's TCP traffic when it is offered."""
    assumptions = list(GLOBAL_ASSUMPTIONS)
    net = res.features.net
    if net["lo_bytes"] > 0:
        share = net["lo_bytes"] / max(1.0, net["tx_bytes"] + net["rx_bytes"])
        assumptions.append(f"{100 * share:.0f} % of the recorded network bytes are loopback (dev lo); loopback "
                           "kernel network work stands in for inter-node traffic (a real node does the same "
                           "send and receive processing for its own rank)")
    assumptions += list(dict.fromkeys(n for n in rows.get("rate_note", pd.Series(dtype=object)) if _str(n)))
    if any(r["mechanism"] == "rdma" for r in offered):
        assumptions.append("the workload's TCP traffic is its collective traffic, which RDMA would carry")
    return assumptions
