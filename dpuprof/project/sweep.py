"""Sensitivity: the speedup range against one model parameter (``--sweep PARAM=lo:hi``).

The swept value replaces that parameter on every mechanism of the profile (``alpha`` is the
offloadable fraction of each mechanism's slice; ``A`` the accelerator speed-up; ``o0``, ``L``,
``Q``, ``o1`` per-offload costs in nanoseconds), then the whole model is re-run.
"""

from __future__ import annotations

from dpuprof.errors import UserError
from dpuprof.project import outcomes
from dpuprof.project.inputs import ProjectionInput
from dpuprof.project.profiles import Profile
from dpuprof.project.projection import evaluate_rows

#: Sweepable parameter -> (Mechanism field, lower bound, upper bound, unit).
PARAMS = {
    "alpha": ("alpha", 0.0, 1.0, "fraction"),
    "A": ("A", 1e-9, float("inf"), "x host"),
    "o0": ("o0_ns", 0.0, float("inf"), "ns"),
    "L": ("L_ns", 0.0, float("inf"), "ns"),
    "Q": ("Q_ns", 0.0, float("inf"), "ns"),
    "o1": ("o1_ns", 0.0, float("inf"), "ns"),
}
DEFAULT_POINTS = 11


def parse(spec: str) -> tuple[str, float, float, int]:
    """``PARAM=lo:hi`` or ``PARAM=lo:hi:points`` -> (param, lo, hi, points); UserError if bad."""
    if "=" not in spec:
        raise UserError(f"--sweep {spec!r}: expected PARAM=lo:hi (PARAM one of {', '.join(PARAMS)})")
    param, rng = spec.split("=", 1)
    param = param.strip()
    if param not in PARAMS:
        raise UserError(f"--sweep: unknown parameter {param!r} (one of {', '.join(PARAMS)})")
    parts = rng.split(":")
    if len(parts) not in (2, 3):
        raise UserError(f"--sweep {spec!r}: expected PARAM=lo:hi or PARAM=lo:hi:points")
    try:
        lo, hi = float(parts[0]), float(parts[1])
        points = int(parts[2]) if len(parts) == 3 else DEFAULT_POINTS
    except ValueError:
        raise UserError(f"--sweep {spec!r}: lo and hi must be numbers, points an integer") from None
    _, pmin, pmax, _ = PARAMS[param]
    if not (lo == lo and hi == hi) or lo > hi:
        raise UserError(f"--sweep {spec!r}: need lo <= hi")
    if lo < pmin or hi > pmax or hi == float("inf"):
        raise UserError(f"--sweep {spec!r}: {param} must lie in [{pmin:g}, {pmax:g}] and be finite")
    if not 2 <= points <= 101:
        raise UserError(f"--sweep {spec!r}: points must be between 2 and 101")
    return param, lo, hi, points


def sweep(inp: ProjectionInput, profile: Profile, param: str, lo: float, hi: float,
          points: int = DEFAULT_POINTS, mode: str | None = None) -> dict:
    """{"param", "field", "unit", "points": [{value, low, expected, high, freed_s, after_pct, pays}]}."""
    field, _, _, unit = PARAMS[param]
    base = profile.with_overrides(mode=mode) if mode else profile
    out = []
    for i in range(points):
        value = lo + (hi - lo) * i / (points - 1)
        res = evaluate_rows(inp, base.with_overrides(**{field: value}))
        sp = outcomes.speedup_range(res.demand, res.rows)
        cfa = outcomes.cores_for_ai(res.demand, res.rows, inp.cpu_count, inp.duration_s)
        out.append({"value": round(value, 9), "low": sp["low"], "expected": sp["expected"], "high": sp["high"],
                    "freed_s": sp["freed_s"], "after_pct": cfa["after_pct"], "pays": sp["pays"]})
    return {"param": param, "field": field, "unit": unit, "lo": lo, "hi": hi, "points": out,
            "note": f"{param} set on every mechanism of {profile.name}; mechanisms that do not pay are left off"}
