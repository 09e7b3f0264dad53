"""What the job view says beyond the sum: one row per node, the spread between nodes, the
stragglers, and the projection per node and for the job.

The per-node rows come from the combined Recording's tables (:func:`dpuprof.render.merge.combine`),
grouped by its ``node`` column, so every node is measured by the same code in one pass.

Straggler rule (``STRAGGLER_RULE``): robust to the stragglers themselves, a node is compared with
the median of all nodes, and its distance is judged against the median absolute deviation (MAD,
scaled by 1.4826 to a standard deviation for normal data) with a floor, so that nodes that are
nearly equal (MAD close to 0) are not called out for noise:

- **infrastructure share** (of the node's busy CPU): a straggler when it is above the median by
  more than max(3 x MAD-sigma, 5 percentage points). More of its CPU goes to the tax, so less to
  training: in a synchronous job that node sets everyone's pace;
- **step rate** (steps per second per rank, from the step markers): a straggler when it is below
  the median by more than max(3 x MAD-sigma, 5 % of the median). Synchronous ranks step together,
  so a node that steps slower did not run in lockstep with the others.

With two nodes the MAD is half their difference, and 3 x MAD-sigma always exceeds the distance to
the median, so only the floor applies: the nodes must differ by twice the floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from dpuprof.categories import INFRASTRUCTURE, NOT_WORK
from dpuprof.recording.reader import recorded_s
from dpuprof.render.job_identity import describe, identity
from dpuprof.render.job_projection import JobBrief, NodeProjection, job_speedup, node_projection

MAD_SIGMA = 1.4826
MAD_K = 3.0
INFRA_FLOOR_PP = 5.0
STEP_FLOOR = 0.05
STRAGGLER_RULE = (f"a node is a straggler when its infrastructure share of busy CPU is above the "
                  f"median of the nodes by more than max({MAD_K:g} x MAD x {MAD_SIGMA}, "
                  f"{INFRA_FLOOR_PP:g} pp), or its step rate is below the median by more than "
                  f"max({MAD_K:g} x MAD x {MAD_SIGMA}, {100 * STEP_FLOOR:g} % of the median)")

#: columns of ``JobView.nodes``
NODE_COLUMNS = ("node", "host", "cpu_count", "duration_s", "busy_s", "infra_s", "infra_share_pct",
                "cores_for_ai_pct", "ranks", "steps", "step_rate_hz")


@dataclass
class JobView:
    identity: str                 # how the recordings were found to be one job (job_identity.describe)
    merged_on_request: str | None  # the reason they are not one job, when --merge merged them anyway
    #: one row per node, NODE_COLUMNS; shares in %, CPU in s, step_rate_hz = steps/s per rank
    nodes: pd.DataFrame
    spread: dict                  # metric -> {min, median, max, min_node, max_node}
    stragglers: list[dict]        # [{node, host, metric, value, median, limit, why}]
    projections: list[NodeProjection]  # per node: its projection in brief, or why it has none
    job_projection: JobBrief | None    # None unless every node has a projection
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        rows = self.nodes.astype(object).where(self.nodes.notna(), None).to_dict("records")
        return {"identity": self.identity, "merged_on_request": self.merged_on_request,
                "nodes": [{k: _round(v) for k, v in r.items()} for r in rows],
                "spread": self.spread, "straggler_rule": STRAGGLER_RULE, "stragglers": self.stragglers,
                "projection": {"per_node": [p.as_json() for p in self.projections],
                               "job": None if self.job_projection is None else self.job_projection.as_json()}}


def _round(v):
    return round(v, 6) if isinstance(v, float) else v


def node_rows(job, views) -> pd.DataFrame:
    """NODE_COLUMNS per node, from the combined Recording ``job`` grouped by ``node``."""
    idx = pd.RangeIndex(len(views), name="node_i")
    cat = job.table("cpu_category")
    busy = cat[~cat["category"].isin(NOT_WORK)].groupby("node")["cpu_s"].sum().reindex(idx, fill_value=0.0)
    infra = cat[cat["category"].isin(INFRASTRUCTURE)].groupby("node")["cpu_s"].sum().reindex(idx, fill_value=0.0)
    iv = job.table("intervals")
    duration = pd.Series({node: recorded_s(g) for node, g in iv.groupby("node")}, dtype=float)
    duration = duration.reindex(idx, fill_value=0.0).rename_axis("node_i")
    cpus = pd.Series([v.cpu_count for v in views], index=idx, dtype=float)
    split = job.category_split
    out = pd.DataFrame({
        "node": [v.name for v in views],
        "host": [str(v.meta.host or "") for v in views],
        "cpu_count": cpus.round().astype(int), "duration_s": duration, "busy_s": busy, "infra_s": infra,
        "infra_share_pct": (100 * infra / busy.where(busy > 0)) if split else float("nan"),
        "cores_for_ai_pct": (100 * (1 - infra / (cpus * duration).where(duration > 0))) if split else float("nan"),
    }, index=idx)
    ranks, steps = _steps(job.table("markers"), idx)
    out["ranks"], out["steps"] = ranks.astype(int), steps.astype(int)
    out["step_rate_hz"] = (steps / ranks.where(ranks > 0) / duration.where(duration > 0))
    return out.reset_index(drop=True)


def _steps(markers: pd.DataFrame, idx) -> tuple[pd.Series, pd.Series]:
    """(ranks, step hits) per node: kind "step" where a node has it, else "ddp_step" (schema)."""
    if markers.empty:
        zero = pd.Series(0, index=idx, dtype=float)
        return zero, zero  # no markers: no step rate
    marked = set(markers.loc[markers["kind"] == "step", "node"])
    own = markers["node"].isin(marked)
    m = markers[((markers["kind"] == "step") & own) | ((markers["kind"] == "ddp_step") & ~own)]
    g = m.groupby("node")
    return (g["pid"].nunique().reindex(idx, fill_value=0).astype(float),
            g.size().reindex(idx, fill_value=0).astype(float))


def spread(nodes: pd.DataFrame) -> dict:
    """min / median / max (and the nodes at min and max) of each node metric that has values."""
    out = {}
    for col in ("infra_share_pct", "cores_for_ai_pct", "step_rate_hz", "busy_s"):
        s = nodes[col].dropna()
        if s.empty:
            continue
        out[col] = {"min": _round(float(s.min())), "median": _round(float(s.median())),
                    "max": _round(float(s.max())), "min_node": nodes.loc[s.idxmin(), "node"],
                    "max_node": nodes.loc[s.idxmax(), "node"]}
    return out


def _limit(s: pd.Series, floor: float) -> float:
    mad = float((s - s.median()).abs().median()) if len(s) >= 3 else 0.0
    return max(MAD_K * MAD_SIGMA * mad, floor)


def stragglers(nodes: pd.DataFrame) -> list[dict]:
    """The nodes STRAGGLER_RULE names, each with the metric, its value, the median and the limit."""
    out = []
    if len(nodes) < 2:
        return out
    share = nodes["infra_share_pct"].dropna()
    if len(share) >= 2:
        med, lim = float(share.median()), _limit(share, INFRA_FLOOR_PP)
        for i, x in share[share - med > lim].items():
            out.append(_straggler(nodes, i, "infra_share_pct", x, med, lim,
                                  f"infrastructure {x:.1f} % of busy CPU vs the median {med:.1f} % "
                                  f"(limit +{lim:.1f} pp)"))
    rate = nodes["step_rate_hz"].dropna()
    if len(rate) >= 2:
        med = float(rate.median())
        lim = _limit(rate, STEP_FLOOR * med)
        for i, x in rate[med - rate > lim].items():
            out.append(_straggler(nodes, i, "step_rate_hz", x, med, lim,
                                  f"{x:.3g} steps/s per rank vs the median {med:.3g} (limit -{lim:.3g})"))
    return out


def _straggler(nodes, i, metric, value, median, limit, why) -> dict:
    return {"node": nodes.loc[i, "node"], "host": nodes.loc[i, "host"], "metric": metric,
            "value": _round(float(value)), "median": _round(median), "limit": _round(limit), "why": why}


def build_job(job, views, total, why_not_one_job: str | None) -> JobView:
    """The JobView of the combined Recording ``job`` (its ``views``, one per node; ``total`` the
    summed RunView)."""
    ids = [identity(v.recording, v.name) for v in views]
    nodes = node_rows(job, views)
    projections = [node_projection(v) for v in views]
    warnings = []
    if why_not_one_job:
        warnings.append(f"merged on request (--merge), though these may not be one job: {why_not_one_job}")
    missing = [p.node for p in projections if p.missing is not None]
    if missing and len(missing) < len(views):
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        warnings.append(f"no projection for {shown}: the job projection needs one per node "
                        "(dpuprof project NODE.rec)")
    how = "merged on request (--merge)" if why_not_one_job else describe(ids)
    return JobView(identity=how, merged_on_request=why_not_one_job, nodes=nodes,
                   spread=spread(nodes), stragglers=stragglers(nodes), projections=projections,
                   job_projection=job_speedup(views, projections) if not missing else None,
                   warnings=warnings)


# ----------------------------------------------------------------------------- rows for the renderers

_SPREAD_LABELS = {"infra_share_pct": ("Infrastructure share of busy CPU", "{:.1f} %"),
                  "cores_for_ai_pct": ("Cores for AI (measured)", "{:.1f} %"),
                  "step_rate_hz": ("Step rate per rank", "{:.3g}/s"),
                  "busy_s": ("Busy CPU", "{:.1f} s")}
SPREAD_HEADER = ["Between nodes", "Min", "Median", "Max"]
PROJECTION_HEADER = ["Node", "Host", "DPU", "Speedup (low / expected / high)", "Cores for AI"]


def spread_rows(jv: JobView) -> list[list[str]]:
    """Metric | min (node) | median | max (node), for SPREAD_HEADER."""
    out = []
    for key, s in jv.spread.items():
        label, fmt = _SPREAD_LABELS[key]
        out.append([label, f"{fmt.format(s['min'])} ({s['min_node']})", fmt.format(s["median"]),
                    f"{fmt.format(s['max'])} ({s['max_node']})"])
    return out


def straggler_lines(jv: JobView) -> list[str]:
    """One line per straggler ('node (host): why'), or one saying there is none; then the rule."""
    lines = [f"{s['node']} ({s['host']}): {s['why']}" for s in jv.stragglers] or \
        [f"none among {len(jv.nodes)} nodes"]
    return lines + [f"rule: {STRAGGLER_RULE}"]


def _x(v) -> str:
    return "—" if v is None else ("unbounded" if v == float("inf") else f"{v:.2f}x")


def _speed(sp: dict) -> str:
    return " / ".join(_x(sp[k]) for k in ("low", "expected", "high"))


def _cores(before, after) -> str:
    if before is None:
        return "—"
    return f"{before:.1f} %" + (f" → {after:.1f} %" if after is not None else "")


def projection_rows(jv: JobView) -> list[list[str]]:
    """PROJECTION_HEADER rows: each node's stored projection or why it has none, then the job's."""
    out = []
    for p in jv.projections:
        if p.missing is not None:
            out.append([p.node, str(p.host or ""), "—", p.missing, "—"])
        else:
            out.append([p.node, str(p.host or ""), str(p.dpu or "?"), _speed(p.speedup),
                        _cores(p.cores_for_ai_before_pct, p.cores_for_ai_after_pct)])
    jp = jv.job_projection
    if jp is not None:
        dpu = jp.dpu if isinstance(jp.dpu, str) else ", ".join(jp.dpu)
        out.append(["job", "all", dpu, _speed(jp.speedup) + f" (slowest: {jp.slowest_node})",
                    _cores(jp.cores_for_ai_before_pct, jp.cores_for_ai_after_pct)])
    else:
        n = sum(1 for p in jv.projections if p.missing is not None)
        out.append(["job", "all", "—", f"none: {n} of {len(jv.projections)} nodes have no projection", "—"])
    return out
