"""The projection per node and for the job, from the projections ``dpuprof project`` stored for
each node's recording (render never projects: see :mod:`dpuprof.render.projection_file`).

The job is synchronous data-parallel: every step waits for the slowest node, so the job's speedup
is the smallest node speedup (each bound separately), and the job's CPU for AI is the nodes'
weighted by their capacity (cores x duration). Amounts (CPU seconds before, after and freed, per
category and in total) add up over the nodes. A job projection exists only when every node has
one: a node without one would be counted as unchanged, which nobody measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

_AMOUNTS = ("before_s", "after_s", "freed_s")
JOB_ASSUMPTION = ("synchronous data-parallel job: the slowest node sets the pace, so the job "
                  "speedup is the smallest node speedup")


_BOUNDS = ("low", "expected", "high")


@dataclass(frozen=True)
class NodeProjection:
    """A node's stored projection in brief, or why it has none (``missing``). Speedups are
    factors (None: unbounded), cores for AI percent of the node's capacity."""

    node: str
    host: str | list | None
    missing: str | None = None
    dpu: str | None = None
    speedup: dict = field(default_factory=dict)  # {low, expected, high}
    pays: bool = False
    cores_for_ai_before_pct: float | None = None
    cores_for_ai_after_pct: float | None = None

    def as_json(self) -> dict:
        if self.missing is not None:
            return {"node": self.node, "host": self.host, "missing": self.missing}
        return {"node": self.node, "host": self.host, "dpu": self.dpu, "speedup": dict(self.speedup),
                "pays": self.pays, "cores_for_ai_before_pct": self.cores_for_ai_before_pct,
                "cores_for_ai_after_pct": self.cores_for_ai_after_pct}


@dataclass(frozen=True)
class JobBrief:
    """The job's projection in brief: each speedup bound the smallest of the nodes', cores for AI
    the nodes' weighted by capacity; ``dpu`` a list when the nodes were projected differently."""

    dpu: str | list[str]
    speedup: dict  # {low, expected, high}
    slowest_node: str | None
    pays: bool
    cores_for_ai_before_pct: float | None
    cores_for_ai_after_pct: float | None
    assumption: str = JOB_ASSUMPTION

    def as_json(self) -> dict:
        return asdict(self)


def node_projection(v) -> NodeProjection:
    """The NodeProjection of view ``v``'s stored projection (``missing`` says why there is none)."""
    p = v.projection
    if p is None:
        return NodeProjection(v.name, v.meta.host,
                              missing=f"no projection stored for this recording (dpuprof project {v.path})")
    sp, cfa = p.speedup, p.cores_for_ai
    return NodeProjection(v.name, v.meta.host, dpu=p.dpu.name, speedup={k: getattr(sp, k) for k in _BOUNDS},
                          pays=sp.pays, cores_for_ai_before_pct=cfa.before_pct,
                          cores_for_ai_after_pct=cfa.after_pct)


def _capacity(v) -> float:
    return (v.projection.host.host_capacity_s if v.projection is not None else 0.0) or v.capacity_s


def job_speedup(views, projections: list[NodeProjection]) -> JobBrief | None:
    """The job's JobBrief; None unless every node has a projection. A null bound (unbounded)
    never sets the minimum."""
    if not projections or any(p.missing is not None for p in projections):
        return None
    speed, slowest = {}, None
    for key in _BOUNDS:
        vals = [(p.speedup[key], p.node) for p in projections if p.speedup[key] is not None]
        speed[key] = min(vals)[0] if vals else None
        if key == "expected" and vals:
            slowest = min(vals)[1]
    caps = [_capacity(v) for v in views]

    def weighted(key):
        vals = [getattr(p, key) for p in projections]
        if any(x is None for x in vals) or not sum(caps):
            return None
        return round(sum(x * c for x, c in zip(vals, caps)) / sum(caps), 6)

    dpus = sorted({str(p.dpu) for p in projections})
    return JobBrief(dpu=dpus[0] if len(dpus) == 1 else dpus, speedup=speed, slowest_node=slowest,
                    pays=all(p.pays for p in projections),
                    cores_for_ai_before_pct=weighted("cores_for_ai_before_pct"),
                    cores_for_ai_after_pct=weighted("cores_for_ai_after_pct"))


def _sum_by_category(projs: list) -> dict:
    """{category: CategoryTotals summed over the nodes}, in first-seen order."""
    from dpuprof.projection.schema import CategoryTotals  # noqa: PLC0415 -- the pydantic schema (~0.1 s) only for a job's projection

    rows = [{"name": name, **{a: getattr(r, a) for a in _AMOUNTS}} for p in projs for name, r in p.by_category.items()]
    if not rows:
        return {}
    g = pd.DataFrame(rows).groupby("name", sort=False)[list(_AMOUNTS)].sum()
    return {name: CategoryTotals(**{a: round(float(x), 6) for a, x in r.items()}) for name, r in g.iterrows()}


def _sum_totals(projs: list):
    """The nodes' ``totals`` added up, field by field (CPU seconds, rounded to 6 digits)."""
    from dpuprof.projection.schema import Totals  # noqa: PLC0415 -- the pydantic schema (~0.1 s) only for a job's projection

    return Totals(**{k: round(sum(getattr(p.totals, k) for p in projs), 6) for k in Totals.model_fields})


def _unique(texts) -> list[str]:
    return list(dict.fromkeys(texts))


def job_projection(views):
    """(the job's Projection, for the job view's tables and charts; warnings). None unless every
    node has a projection."""
    from dpuprof.projection.schema import CoresForAI, Host, Projection, Speedup  # noqa: PLC0415 -- the pydantic schema (~0.1 s) only for a job's projection

    projs = [v.projection for v in views]
    if all(p is None for p in projs) or any(p is None for p in projs):
        return None, []
    brief = job_speedup(views, [node_projection(v) for v in views])
    warnings = []
    if isinstance(brief.dpu, list):
        warnings.append(f"nodes were projected with different DPUs: {', '.join(brief.dpu)}")
    cfa = [p.cores_for_ai for p in projs]
    merged = Projection(
        projection_version=projs[0].projection_version,
        recording=[str(p.recording) for p in projs],
        dpu=projs[0].dpu,
        host=Host(cpu_count=int(sum(v.cpu_count for v in views)), duration_s=max(v.duration_s for v in views),
                  host_capacity_s=sum(_capacity(v) for v in views)),
        rows=[r.model_copy(update={"node": v.name}) for v, p in zip(views, projs) for r in p.rows],
        by_category=_sum_by_category(projs),
        totals=_sum_totals(projs),
        cores_for_ai=CoresForAI(before_pct=brief.cores_for_ai_before_pct,
                                after_pct=brief.cores_for_ai_after_pct,
                                before_cores=_add([c.before_cores for c in cfa]),
                                after_cores=_add([c.after_cores for c in cfa]),
                                assumptions=_unique(a for c in cfa for a in c.assumptions)),
        # regime None: the job's bounds are minima over nodes that may be in different regimes
        speedup=Speedup(**brief.speedup, pays=brief.pays, regime=None,
                        assumptions=[JOB_ASSUMPTION] + _unique(a for p in projs for a in p.speedup.assumptions)),
        allreduce=next((p.allreduce for p in projs if p.allreduce is not None), None),
        capacity=[c.model_copy(update={"node": v.name}) for v, p in zip(views, projs) for c in p.capacity],
        assumptions=_unique(a for p in projs for a in p.assumptions),
        warnings=_unique(a for p in projs for a in p.warnings),
    )
    return merged, warnings


def _add(vals: list) -> float | None:
    return None if any(x is None for x in vals) else round(sum(vals), 6)
