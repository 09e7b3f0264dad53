"""Sensitivity and what-ifs on one mechanism's parameter.

``--sweep MECHANISM.PARAM=lo:hi[:points]`` re-runs the whole model with PARAM of MECHANISM set to
each point; ``--set MECHANISM.PARAM=value`` sets it once. A bare ``PARAM`` is accepted only when
exactly one mechanism of the profile has PARAM entering its model (after ``--mode``); otherwise
the error line lists the mechanisms it enters. Parameters: ``alpha`` (offloadable fraction),
``A`` (accelerator speed-up), ``o0``, ``L``, ``Q``, ``o1`` (per-offload costs, ns), ``mode``
(``--set`` only).

Where PARAM enters (Accelerometer, ASPLOS 2020, and dpuprof.project.capacity):
- ``alpha``: every equation;
- ``A``: the sync equation (``alpha / A``), and the Arm-core capacity of work that runs on the
  Arm cores (``alpha x C / A`` Arm core-seconds); not the sync_os or async equations;
- ``o0``, ``L``, ``Q``: ``n x (o0 + L + Q)`` of every mode, where the mechanism counts offloads;
- ``o1``: only the sync_os equation.

A sweep whose expected speedup and freed CPU do not move says why (``flat``, ``flat_reason``); so
does one whose freed CPU moves but whose speedup does not (``speedup_flat``: the regime binds elsewhere).
"""

from __future__ import annotations

from dpuprof.errors import UserError
from dpuprof.project import outcomes
from dpuprof.project.inputs import ProjectionInput
from dpuprof.project.profiles import MODES, Mechanism, Profile
from dpuprof.project.assemble import evaluate_rows
from dpuprof.project.speedup import job_speedup

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
_FLAT_TOL = 1e-9


def _split(flag: str, spec: str, target: str) -> tuple[str | None, str]:
    mech, _, param = target.strip().rpartition(".")
    if param not in PARAMS and not (flag == "--set" and param == "mode"):
        allowed = ", ".join(list(PARAMS) + (["mode"] if flag == "--set" else []))
        raise UserError(f"{flag}: unknown parameter {param!r} (one of {allowed}; MECHANISM.PARAM targets one mechanism)")
    if mech == "" and "." in target:
        raise UserError(f"{flag} {spec!r}: empty mechanism name before '.{param}'")
    return (mech or None), param


def parse(spec: str) -> tuple[str, float, float, int]:
    """``[MECH.]PARAM=lo:hi[:points]`` -> (target, lo, hi, points); UserError if malformed.

    ``target`` is ``PARAM`` or ``MECH.PARAM`` as given (resolved against a profile by :func:`resolve`).
    """
    if "=" not in spec:
        raise UserError(f"--sweep {spec!r}: expected MECHANISM.PARAM=lo:hi (PARAM one of {', '.join(PARAMS)})")
    target, rng = spec.split("=", 1)
    _, param = _split("--sweep", spec, target)
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
    return target.strip(), lo, hi, points


def parse_set(spec: str) -> tuple[str, float | str]:
    """``[MECH.]PARAM=value`` -> (target, value); ``mode`` takes sync, sync_os (sync-os) or async."""
    if "=" not in spec:
        raise UserError(f"--set {spec!r}: expected MECHANISM.PARAM=value")
    target, raw = spec.split("=", 1)
    _, param = _split("--set", spec, target)
    raw = raw.strip()
    if param == "mode":
        value = raw.replace("-", "_")
        if value not in MODES:
            raise UserError(f"--set {spec!r}: mode must be one of sync, sync-os, async")
        return target.strip(), value
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"--set {spec!r}: value must be a number") from None
    _, pmin, pmax, _ = PARAMS[param]
    if not (pmin <= value <= pmax) or value != value:
        raise UserError(f"--set {spec!r}: {param} must lie in [{pmin:g}, {pmax:g}]")
    return target.strip(), value


# ------------------------------------------------------------------------------ where it enters

def enters(mech: Mechanism, param: str) -> list[str]:
    """The parts of the model in which ``param`` of ``mech`` enters (empty: it changes nothing)."""
    mode = mech.mode.value
    counts = mech.n_from != "none"
    if param in ("alpha", "mode"):
        return [f"the {mode} equation"]
    if param == "A":
        out = ["the sync equation (alpha / A)"] if mode == "sync" else []
        if mech.runs_on == "arm":
            out.append("Arm-core capacity (alpha x C / A Arm core-seconds at the post-offload rate)")
        return out
    if param in ("o0", "L", "Q"):
        return [f"n x (o0 + L + Q) of the {mode} equation"] if counts else []
    if param == "o1":
        return ["n x (o0 + L + Q + o1) of the sync_os equation"] if mode == "sync_os" and counts else []
    raise ValueError(param)


def why_not(mech: Mechanism, param: str) -> str:
    """Why ``param`` does not enter ``mech`` (for a flat sweep or an ambiguous bare name)."""
    mode = mech.mode.value
    if param == "A":
        return (f"A does not enter the {mode} equation of {mech.name} (only sync, where the host waits for "
                f"the accelerator, has alpha / A) and {mech.name} does not run on the Arm cores "
                f"(runs_on = {mech.runs_on}), so no capacity depends on it")
    if param in ("o0", "L", "Q", "o1") and mech.n_from == "none":
        return f"{mech.name} counts no offloads (n_from = none), so n x ({param}) is 0"
    if param == "o1":
        return f"o1 enters only the sync_os equation; {mech.name} is {mode}"
    return f"{param} does not enter {mech.name}"


def resolve(profile: Profile, target: str, flag: str = "--sweep") -> tuple[str, str]:
    """``PARAM`` or ``MECH.PARAM`` -> (mechanism name, PARAM) on ``profile``, or one UserError line."""
    mech_name, param = _split(flag, target, target)
    names = [m.name for m in profile.mechanisms]
    if mech_name is not None:
        if mech_name not in names:
            raise UserError(f"{flag} {target}: {profile.name} has no mechanism {mech_name!r} "
                            f"(mechanisms: {', '.join(names)})")
        return mech_name, param
    if len(names) == 1:
        return names[0], param
    where = [m.name for m in profile.mechanisms if enters(m, param)]
    if len(where) == 1:
        return where[0], param
    if where:
        raise UserError(f"{flag} {target}: ambiguous on {profile.name}: {param} enters {', '.join(where)}; "
                        f"name one as MECHANISM.{param} (mechanisms: {', '.join(names)})")
    raise UserError(f"{flag} {target}: {param} enters no mechanism of {profile.name} in these modes "
                    f"({why_not(profile.mechanisms[0], param)}, and likewise for the others); name one as "
                    f"MECHANISM.{param} to see it flat (mechanisms: {', '.join(names)})")


def apply_sets(profile: Profile, specs) -> Profile:
    """Apply ``--set`` specs (strings) in order; returns the changed profile."""
    for spec in specs or ():
        target, value = parse_set(spec)
        mech, param = resolve(profile, target, "--set")
        field = "mode" if param == "mode" else PARAMS[param][0]
        profile = profile.with_overrides(mechanisms=[mech], **{field: value})
    return profile


# ------------------------------------------------------------------------------------------ sweep

def _flat_reason(inp, profile: Profile, mech_name: str, param: str, field: str, lo: float, hi: float) -> str:
    mech = profile.mechanism(mech_name)
    if not enters(mech, param):
        return why_not(mech, param)
    res = evaluate_rows(inp, profile.with_overrides(mechanisms=[mech_name], **{field: lo}))
    rows = res.rows[res.rows["mechanism"] == mech_name] if not res.rows.empty else res.rows
    if rows.empty or float(rows["before_s"].sum()) <= 0:
        return (f"{mech_name} covers no CPU in this recording (its slice of {', '.join(mech.applies_to)} "
                "is empty), so none of its parameters can move the result")
    if param == "A" and mech.mode.value != "sync":
        cap = next((c for c in res.capacity if c["resource"] == "arm_cores"), None)
        demand = f"{cap['demand']:.3g} of {cap['limit']:g} cores at A = {lo:g}" if cap else "no Arm-core demand"
        return (f"A enters {mech_name} ({mech.mode.value}) only through Arm-core capacity, and the demand "
                f"({demand}) stays within the Arm cores over the whole range; A < 1 matters here only when "
                "the Arm cores cannot keep up")
    if not bool(rows["enabled"].any()):
        res_hi = evaluate_rows(inp, profile.with_overrides(mechanisms=[mech_name], **{field: hi}))
        rows_hi = res_hi.rows[res_hi.rows["mechanism"] == mech_name]
        if not bool(rows_hi["enabled"].any()):
            return f"{mech_name} does not pay (S <= 1) anywhere in [{lo:g}, {hi:g}], so it stays off"
    return f"{param} moves {mech_name}'s freed CPU by less than {_FLAT_TOL:g} s over [{lo:g}, {hi:g}]"


def _regime_reason(regimes: dict, freed: list, job_freed: list) -> str:
    """Why the speedup stays put while the freed CPU moves: the change is in other processes, or the
    job's regime is bound by something the freed CPU is not on."""
    said = "; ".join(name if name == "unknown" or not why else f"{name} ({why})" for name, why in regimes.items())
    moved = f"the freed CPU moves ({min(freed):.3g} to {max(freed):.3g} s)"
    if max(job_freed) - min(job_freed) <= _FLAT_TOL:
        return f"{moved}, all of the change in other processes, which the job's speedup (regime {said}) does not count"
    return f"{moved}, the job's with it, but not the job's speedup: in regime {said} that CPU is off what bounds the job"


def sweep(inp: ProjectionInput, profile: Profile, target: str, lo: float, hi: float,
          points: int = DEFAULT_POINTS, mode: str | None = None, only: tuple[str, ...] | None = None,
          window: tuple[float, float] | str = "steady") -> dict:
    """Sweep ``target`` (``PARAM`` or ``MECH.PARAM``, see :func:`resolve`) over [lo, hi].

    Returns {"param", "mechanism", "field", "unit", "lo", "hi", "enters", "flat", "flat_reason",
    "note", "points": [{value, low, expected, high, freed_s, after_pct, pays}]}.
    """
    base = profile.with_overrides(mode=mode) if mode else profile
    mech_name, param = resolve(base, target)
    field, _, _, unit = PARAMS[param]
    out, regimes, job_freed = [], {}, []
    for i in range(points):
        value = lo + (hi - lo) * i / (points - 1)
        res = evaluate_rows(inp, base.with_overrides(mechanisms=[mech_name], **{field: value}), only, window)
        sp = job_speedup(inp, res.demand, res.rows, window)
        cfa = outcomes.cores_for_ai(res.demand, res.rows, inp.cpu_count, inp.duration_s)
        out.append({"value": round(value, 9), "low": sp["low"], "expected": sp["expected"], "high": sp["high"],
                    "freed_s": sp["freed_s"], "after_pct": cfa["after_pct"], "pays": sp["pays"]})
        job_freed.append(sp["workload_freed_s"])
        regimes.setdefault(sp["regime"], sp.get("regime_why", ""))
    exp = [p["expected"] for p in out]
    freed = [p["freed_s"] for p in out]
    same = all(e == exp[0] or (e is not None and exp[0] is not None and abs(e - exp[0]) <= _FLAT_TOL) for e in exp)
    flat = same and max(freed) - min(freed) <= _FLAT_TOL
    mech = base.mechanism(mech_name)
    if flat:
        reason = _flat_reason(inp, base, mech_name, param, field, lo, hi)
    elif same:
        reason = _regime_reason(regimes, freed, job_freed)
    else:
        reason = None
    return {"param": param, "mechanism": mech_name, "field": field, "unit": unit, "lo": lo, "hi": hi,
            "enters": enters(mech, param), "flat": bool(flat), "speedup_flat": bool(same),
            "flat_reason": reason,
            "points": out,
            "note": f"{param} set on {mech_name} of {profile.name} only; mechanisms that do not pay are left off"}
