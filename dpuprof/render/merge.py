"""Merge the recordings of one job (one per node) into a cluster view: the sum of the nodes.

Everything that is an amount -- CPU seconds, samples, cores, bytes, IOs -- adds up; the duration is
the longest node's; time series are aligned on the time since each node's own start (the nodes of one
job start together, within a few seconds). Merging two copies of one recording doubles every amount
and leaves every share unchanged.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.errors import UserError
from dpuprof.render.view import RunView
from dpuprof.render.projection_file import num

_MAX_KEYS = {"duration_s"}
_FIRST_KEYS = {"schema_version", "sample_freq_hz", "dpuprof_version", "command", "mode",
               "recording_sha256", "projection_version"}


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def sum_tree(items: list):
    """Merge JSON-like values: numbers add up, dicts merge key by key, equal strings stay,
    differing strings become a list of the distinct values, lists concatenate."""
    present = [v for v in items if v is not None]
    if not present:
        return None
    if all(_is_num(v) for v in present):
        total = sum(present)
        return round(total, 6) if isinstance(total, float) else total
    if all(isinstance(v, bool) for v in present):
        return all(present)
    if all(isinstance(v, dict) for v in present):
        keys = list(dict.fromkeys(k for d in present for k in d))
        out = {}
        for k in keys:
            vals = [d.get(k) for d in present]
            if k in _MAX_KEYS and all(_is_num(v) for v in vals if v is not None):
                out[k] = max(v for v in vals if v is not None)
            elif k in _FIRST_KEYS:
                out[k] = next(v for v in vals if v is not None) if any(v is not None for v in vals) else None
            else:
                out[k] = sum_tree(vals)
        return out
    if all(isinstance(v, list) for v in present):
        return [x for v in present for x in v]
    distinct = list(dict.fromkeys(str(v) for v in present))
    return distinct[0] if len(distinct) == 1 else distinct


def merge_summaries(views: list[RunView]) -> dict:
    """The summary contract summed over nodes; ``processes`` gain a ``node`` key."""
    summaries = []
    for v in views:
        s = {k: val for k, val in v.summary.items() if k != "projection"}
        s["processes"] = [dict(p, node=v.name) for p in s.get("processes", [])]
        s["recording"] = [s.get("recording")]
        summaries.append(s)
    total = sum_tree(summaries)
    total["processes"].sort(key=lambda p: -(p.get("cpu_s") or 0))
    total["nodes"] = [v.name for v in views]
    total["complete"] = all(v.summary.get("complete") for v in views)
    codes = [v.summary.get("exit_code") for v in views]
    total["exit_code"] = next((c for c in codes if c), codes[0])  # the first failure, else 0
    total["category_split"] = all(v.category_split for v in views)
    return total


def merge_projections(views: list[RunView]) -> tuple[dict | None, list[str]]:
    """One projection for the cluster, or None unless every node has one."""
    projs = [v.projection for v in views]
    if not any(projs):
        return None, []
    missing = [v.name for v, p in zip(views, projs) if not p]
    if missing:
        return None, [f"no projection for {', '.join(missing)}: the cluster view is measured only"]
    caps = [num((p.get("host") or {}).get("host_capacity_s")) or v.capacity_s for v, p in zip(views, projs)]
    cap = sum(caps) or 1.0

    def weighted(key: str):
        vals = [num((p.get("cores_for_ai") or {}).get(key)) for p in projs]
        if any(x is None for x in vals):
            return None
        return sum(x * c for x, c in zip(vals, caps)) / cap

    speed = {}
    for key in ("low", "expected", "high"):  # null = unbounded, so it never sets the minimum
        vals = [x for x in (num((p.get("speedup") or {}).get(key)) for p in projs) if x is not None]
        speed[key] = min(vals) if vals else None
    speed["pays"] = all(bool((p.get("speedup") or {}).get("pays")) for p in projs)
    speed["assumptions"] = ["synchronous data-parallel job: the slowest node sets the pace, so the "
                            "cluster speedup is the smallest node speedup"] + \
        list(dict.fromkeys(a for p in projs for a in (p.get("speedup") or {}).get("assumptions") or []
                           if isinstance(a, str)))
    cores = {"before_pct": weighted("before_pct"), "after_pct": weighted("after_pct"),
             "before_cores": sum_tree([(p.get("cores_for_ai") or {}).get("before_cores") for p in projs]),
             "after_cores": sum_tree([(p.get("cores_for_ai") or {}).get("after_cores") for p in projs]),
             "assumptions": list(dict.fromkeys(a for p in projs for a in
                                               (p.get("cores_for_ai") or {}).get("assumptions") or []
                                               if isinstance(a, str)))}
    warnings = []
    dpus = {str((p.get("dpu") or {}).get("name")) for p in projs}
    if len(dpus) > 1:
        warnings.append(f"nodes were projected with different DPUs: {', '.join(sorted(dpus))}")
    merged = {
        "projection_version": 1,
        "recording": [p.get("recording") for p in projs],
        "dpu": projs[0].get("dpu"),
        "host": {"cpu_count": sum(v.cpu_count for v in views), "duration_s": max(v.duration_s for v in views),
                 "host_capacity_s": cap},
        "rows": [dict(r, node=v.name) for v, p in zip(views, projs) for r in p.get("rows") or []],
        "by_category": sum_tree([p.get("by_category") for p in projs]),
        "totals": sum_tree([p.get("totals") for p in projs]),
        "cores_for_ai": cores,
        "speedup": speed,
        "allreduce": next((p.get("allreduce") for p in projs if p.get("allreduce")), None),
        "capacity": [dict(c, node=v.name) for v, p in zip(views, projs) for c in p.get("capacity") or []
                     if isinstance(c, dict)],
        "assumptions": list(dict.fromkeys(a for p in projs for a in p.get("assumptions") or []
                                          if isinstance(a, str))),
        "warnings": list(dict.fromkeys(w for p in projs for w in p.get("warnings") or [] if isinstance(w, str))),
    }
    return merged, warnings


def _aligned_sum(frames: list[pd.DataFrame], grid: float) -> pd.DataFrame:
    aligned = []
    for f in frames:
        f = f.copy()
        f.index = pd.Index((f.index.to_numpy(dtype=float) / grid).round() * grid, name="t_s")
        aligned.append(f.groupby(level=0).sum())
    return pd.concat(aligned).groupby(level=0).sum().sort_index()


def merge_views(views: list[RunView]) -> RunView:
    """The cluster view: the sum of ``views`` (one per node)."""
    if len({v.category_split for v in views}) > 1:
        raise UserError("cannot merge recordings with and without the category split "
                        "(BPF and psutil mode); record every node the same way")
    grid = min(v.interval_s for v in views)
    stacks = pd.concat([v.stacks.assign(folded=v.name.replace(";", ":") + ";" + v.stacks["folded"])
                        for v in views], ignore_index=True)
    projection, warnings = merge_projections(views)
    summary = merge_summaries(views)
    if projection is not None:
        summary["projection"] = projection
    return RunView(
        name=f"cluster ({len(views)} nodes)",
        path=", ".join(v.path for v in views),
        meta={"host": [v.meta.get("host") for v in views], "command": views[0].meta.get("command"),
              "cpu_count": sum(v.cpu_count for v in views), "mode": views[0].meta.get("mode"),
              "sample_freq_hz": views[0].meta.get("sample_freq_hz"),
              "complete": all(v.meta.get("complete") for v in views)},
        summary=summary,
        projection=projection,
        warnings=[f"{v.name}: {w}" for v in views for w in v.warnings] + warnings,
        cpu_count=sum(v.cpu_count for v in views),
        duration_s=max(v.duration_s for v in views),
        interval_s=grid,
        category_split=views[0].category_split,
        cats=sum((v.cats for v in views[1:]), views[0].cats),
        wl_cats=sum((v.wl_cats for v in views[1:]), views[0].wl_cats),
        timeline=_aligned_sum([v.timeline for v in views], grid),
        io=_aligned_sum([v.io for v in views], grid),
        stacks=stacks.groupby(["folded", "category", "subcategory"], as_index=False)["samples"].sum(),
        subcats=pd.concat([v.subcats for v in views]).groupby(level=0).sum().sort_values(ascending=False),
        nodes=list(views),
    )
