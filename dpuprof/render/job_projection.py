"""The projection per node and for the job, from the projections ``dpuprof project`` stored for
each node's recording (render never projects: see :mod:`dpuprof.render.projection_file`).

The job is synchronous data-parallel: every step waits for the slowest node, so the job's speedup
is the smallest node speedup (each bound separately), and the job's CPU for AI is the nodes'
weighted by their capacity (cores x duration). Amounts (CPU seconds before, after and freed, per
category and in total) add up over the nodes. A job projection exists only when every node has
one: a node without one would be counted as unchanged, which nobody measured.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.render.projection_file import num, text_list

_AMOUNTS = ("before_s", "after_s", "freed_s")
JOB_ASSUMPTION = ("synchronous data-parallel job: the slowest node sets the pace, so the job "
                  "speedup is the smallest node speedup")


def node_projection(v) -> dict:
    """{node, host, dpu, speedup {low, expected, high}, pays, cores_for_ai_before_pct,
    cores_for_ai_after_pct} of view ``v``'s stored projection, or {node, host, missing: why}."""
    host = v.meta.get("host")
    p = v.projection
    if not p:
        return {"node": v.name, "host": host,
                "missing": f"no projection stored for this recording (dpuprof project {v.path})"}
    sp, cfa = p.get("speedup") or {}, p.get("cores_for_ai") or {}
    return {"node": v.name, "host": host, "dpu": (p.get("dpu") or {}).get("name"),
            "speedup": {k: num(sp.get(k)) for k in ("low", "expected", "high")},
            "pays": sp.get("pays") if isinstance(sp.get("pays"), bool) else None,
            "cores_for_ai_before_pct": num(cfa.get("before_pct")),
            "cores_for_ai_after_pct": num(cfa.get("after_pct"))}


def _capacity(v) -> float:
    return num(((v.projection or {}).get("host") or {}).get("host_capacity_s")) or v.capacity_s


def job_speedup(views, projections: list[dict]) -> dict | None:
    """The job's projection in brief: {dpu, speedup {low, expected, high}, slowest_node, pays,
    cores_for_ai_before_pct, cores_for_ai_after_pct}; None unless every node has a projection. A
    null bound (unbounded) never sets the minimum."""
    if not projections or any(p.get("missing") for p in projections):
        return None
    speed, slowest = {}, None
    for key in ("low", "expected", "high"):
        vals = [(p["speedup"][key], p["node"]) for p in projections if p["speedup"][key] is not None]
        speed[key] = min(vals)[0] if vals else None
        if key == "expected" and vals:
            slowest = min(vals)[1]
    caps = [_capacity(v) for v in views]

    def weighted(key):
        vals = [p[key] for p in projections]
        if any(x is None for x in vals) or not sum(caps):
            return None
        return round(sum(x * c for x, c in zip(vals, caps)) / sum(caps), 6)

    dpus = sorted({str(p.get("dpu")) for p in projections})
    return {"dpu": dpus[0] if len(dpus) == 1 else dpus, "speedup": speed, "slowest_node": slowest,
            "pays": all(p.get("pays") is True for p in projections),
            "cores_for_ai_before_pct": weighted("cores_for_ai_before_pct"),
            "cores_for_ai_after_pct": weighted("cores_for_ai_after_pct"),
            "assumption": JOB_ASSUMPTION}


def _sum_rows(projs: list[dict], key: str) -> dict:
    """{name: {amount: sum over nodes}} of each projection's ``key`` ({name: {before_s, ...}})."""
    rows = [{"name": name, **{a: num(r.get(a)) for a in _AMOUNTS}}
            for p in projs for name, r in (p.get(key) or {}).items() if isinstance(r, dict)]
    if not rows:
        return {}
    g = pd.DataFrame(rows).groupby("name", sort=False)[list(_AMOUNTS)].sum(min_count=1)
    return {name: {a: (None if pd.isna(x) else round(float(x), 6)) for a, x in r.items()}
            for name, r in g.iterrows()}


def _totals(projs: list[dict]) -> dict:
    keys = list(dict.fromkeys(k for p in projs for k in (p.get("totals") or {})))
    out = {}
    for k in keys:
        vals = [num((p.get("totals") or {}).get(k)) for p in projs]
        out[k] = None if any(x is None for x in vals) else round(sum(vals), 6)
    return out


def _texts(projs: list[dict], key: str) -> list[str]:
    return list(dict.fromkeys(a for p in projs for a in text_list(p.get(key))))


def job_projection(views) -> tuple[dict | None, list[str]]:
    """(the job's projection in the projection contract's shape, for the job view's tables and
    charts; warnings). None unless every node has a projection."""
    projs = [v.projection for v in views]
    if not any(projs) or not all(projs):
        return None, []
    brief = job_speedup(views, [node_projection(v) for v in views])
    warnings = []
    if isinstance(brief["dpu"], list):
        warnings.append(f"nodes were projected with different DPUs: {', '.join(brief['dpu'])}")
    cfa = [p.get("cores_for_ai") or {} for p in projs]
    caps = [_capacity(v) for v in views]
    speed = {k: brief["speedup"][k] for k in ("low", "expected", "high")}
    speed["pays"] = brief["pays"]
    speed["assumptions"] = [JOB_ASSUMPTION] + list(dict.fromkeys(
        a for p in projs for a in text_list((p.get("speedup") or {}).get("assumptions"))))
    merged = {
        "projection_version": projs[0].get("projection_version"),
        "recording": [p.get("recording") for p in projs],
        "dpu": projs[0].get("dpu"),
        "host": {"cpu_count": sum(v.cpu_count for v in views), "duration_s": max(v.duration_s for v in views),
                 "host_capacity_s": sum(caps)},
        "rows": [dict(r, node=v.name) for v, p in zip(views, projs) for r in p.get("rows") or []
                 if isinstance(r, dict)],
        "by_category": _sum_rows(projs, "by_category"),
        "totals": _totals(projs),
        "cores_for_ai": {"before_pct": brief["cores_for_ai_before_pct"],
                         "after_pct": brief["cores_for_ai_after_pct"],
                         "before_cores": _add([num(c.get("before_cores")) for c in cfa]),
                         "after_cores": _add([num(c.get("after_cores")) for c in cfa]),
                         "assumptions": list(dict.fromkeys(a for c in cfa for a in text_list(c.get("assumptions"))))},
        "speedup": speed,
        "allreduce": next((p.get("allreduce") for p in projs if p.get("allreduce")), None),
        "capacity": [dict(c, node=v.name) for v, p in zip(views, projs) for c in p.get("capacity") or []
                     if isinstance(c, dict)],
        "assumptions": _texts(projs, "assumptions"),
        "warnings": _texts(projs, "warnings"),
    }
    return merged, warnings


def _add(vals: list) -> float | None:
    return None if any(x is None for x in vals) else round(sum(vals), 6)
