"""Hold an after-run against the projection made from the before-run (``dpuprof report A B``).

A team that turns an offload on records the same job again; this module says whether the
projection of A was right about B. Pure: it takes the two runs' facts (:class:`RunFacts`, taken
from the recordings by :mod:`dpuprof.render.check_facts`) and A's typed Projection, and returns a
:class:`ProjectionCheck`; no I/O, no printing. The formats render it.

What is compared, over each run's steady window (dpuprof.projection.window):

- **workload CPU after, per category and per offload mechanism**: *projected* is A's measured CPU
  times the projection's after/before ratio for that category (or the mechanism's subcategories:
  the projection's totals cover A's whole recording, its ratio is what carries over to a window);
  *measured* is B's. Both per step when both runs mark steps, else per second of steady window
  (cores). Busy CPU of the workload's processes (other work on the host is not the job's);
- **the job's speedup**: B's steps per second over A's, from the per-step wall times of the steady
  steps, with a percentile-bootstrap 95 % interval (each run's steps resampled on their own),
  against the projection's low / expected / high;
- **findings**: what B shows that the projection did not expect (``FINDING_RULE``).

The check is not made (``cannot`` says why, one line each) when A has no projection, the runs do
different work (another command, once the examples' emulated-offload switches are set aside; or
steps counted by different markers), either run has no steady window, or either has no category
split. The plain comparison is shown either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dpuprof.categories import CATEGORIES
from dpuprof.render.stats import ratio_of_means_ci

if TYPE_CHECKING:
    from dpuprof.projection.schema import Projection

#: Command-line options that switch an (emulated) offload on without changing the job's work:
#: examples/train_ddp.py's ``--emulate KIND=MODE``. A real offload (kTLS, IPsec, RDMA) is turned
#: on outside the command, so the command stays the same.
OFFLOAD_SWITCHES = ("--emulate",)
#: Steps needed in each run's steady window to measure a speedup.
MIN_STEPS = 3
#: A category or mechanism is a finding when B's CPU differs from the projection by more than
#: GROWTH of the projected value and by more than FLOOR of A's busy CPU (per step or per second).
GROWTH = 0.20
FLOOR = 0.02
FINDING_RULE = (f"a category is named when B's CPU is more than {100 * GROWTH:.0f} % away from the projected "
                f"value and more than {100 * FLOOR:.0f} % of A's busy CPU; a mechanism when its CPU fell by less "
                "than half of what the projection expected; the speedup when it is outside [low, high]")
UNITS = {"per_step": "CPU s per step", "per_second": "CPU s per second of steady window (cores)"}


@dataclass(frozen=True)
class RunFacts:
    """What the check needs of one run. ``window_s`` None: no steady window (``window_how`` why).
    ``step_wall_s``: wall seconds of each step inside the steady window (empty without step
    markers); ``cpu_s`` / ``subcat_cpu_s``: the workload's busy CPU seconds per category /
    subcategory over the span the steps cover (else the steady window), ``span_s`` that span's
    length."""

    name: str
    command: tuple[str, ...] | None
    category_split: bool
    step_kind: str | None
    window_s: float | None
    window_how: str
    span_s: float
    step_wall_s: tuple[float, ...] = ()
    cpu_s: Mapping[str, float] = field(default_factory=dict)
    subcat_cpu_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return len(self.step_wall_s)


@dataclass(frozen=True)
class CpuCheck:
    """One category or mechanism: CPU of A, projected for B, measured in B (in the check's unit)."""

    name: str
    before: float
    projected: float
    measured: float
    subcategories: tuple[str, ...] = ()

    @property
    def error(self) -> float:
        """measured - projected."""
        return self.measured - self.projected

    @property
    def error_pct(self) -> float | None:
        """error as a percentage of the projected value; None when nothing was projected."""
        return 100.0 * self.error / self.projected if self.projected > 0 else None

    def as_json(self) -> dict:
        out = {"before": _r(self.before), "projected": _r(self.projected), "measured": _r(self.measured),
               "error": _r(self.error), "error_pct": _r(self.error_pct)}
        if self.subcategories:
            out["subcategories"] = list(self.subcategories)
        return out


@dataclass(frozen=True)
class SpeedupCheck:
    """Measured speedup (B's steps/s over A's) with its bootstrap interval, against the range."""

    measured: float
    ci_low: float
    ci_high: float
    a_steps_per_s: float
    b_steps_per_s: float
    a_steps: int
    b_steps: int
    low: float | None
    expected: float | None
    high: float | None

    @property
    def inside(self) -> bool:
        return (self.low is None or self.measured >= self.low) and (self.high is None or self.measured <= self.high)

    @property
    def outside_pct(self) -> float:
        """How far the measurement is outside [low, high], in % of the bound it passed (0 inside)."""
        if self.high is not None and self.measured > self.high:
            return 100.0 * (self.measured / self.high - 1)
        if self.low is not None and self.measured < self.low:
            return 100.0 * (1 - self.measured / self.low)
        return 0.0

    @property
    def verdict(self) -> str:
        if self.inside:
            return "inside the range"
        side = "above the high bound" if self.high is not None and self.measured > self.high else "below the low bound"
        pct = self.outside_pct  # under 1 %, two decimals: "outside by 0 %" would read as inside
        return f"outside by {pct:.2f} % ({side})" if pct < 1 else f"outside by {pct:.0f} % ({side})"

    def as_json(self) -> dict:
        return {"unit": "x (B steps/s over A steps/s)", "measured": _r(self.measured),
                "ci95": [_r(self.ci_low), _r(self.ci_high)], "ci_method": "percentile bootstrap over per-step times",
                "a_steps_per_s": _r(self.a_steps_per_s), "b_steps_per_s": _r(self.b_steps_per_s),
                "a_steps": self.a_steps, "b_steps": self.b_steps,
                "projected": {"low": _r(self.low), "expected": _r(self.expected), "high": _r(self.high)},
                "inside": self.inside, "outside_pct": _r(self.outside_pct), "verdict": self.verdict}


@dataclass(frozen=True)
class ProjectionCheck:
    """The check of A's projection against B. ``cannot``: why it could not be made (then nothing
    else is filled); ``speedup`` None with ``speedup_note`` when the runs have no steps to time."""

    a: str
    b: str
    cannot: list[str] = field(default_factory=list)
    unit: str = "per_step"
    categories: list[CpuCheck] = field(default_factory=list)
    mechanisms: list[CpuCheck] = field(default_factory=list)
    speedup: SpeedupCheck | None = None
    speedup_note: str = ""
    findings: list[str] = field(default_factory=list)

    @property
    def made(self) -> bool:
        return not self.cannot

    @property
    def unit_text(self) -> str:
        return UNITS[self.unit]

    def as_json(self) -> dict:
        out = {"a": self.a, "b": self.b, "made": self.made, "cannot": list(self.cannot)}
        if not self.made:
            return out
        out.update({"cpu_unit": UNITS[self.unit],
                    "cpu_method": "projected = A's measured CPU x the projection's after/before ratio; "
                                  "measured = B's; both over each run's steady window",
                    "by_category": {c.name: c.as_json() for c in self.categories},
                    "by_mechanism": {m.name: m.as_json() for m in self.mechanisms},
                    "speedup": None if self.speedup is None else self.speedup.as_json(),
                    "findings": list(self.findings), "finding_rule": FINDING_RULE})
        if self.speedup_note:
            out["speedup_note"] = self.speedup_note
        return out


def _r(v):
    return None if v is None else round(float(v), 6)


def same_work(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """True when the commands are equal once OFFLOAD_SWITCHES (and their values) are dropped; two
    runs without a command (attached, system-wide) are taken to be the same job."""
    if a is None or b is None:
        return a is None and b is None
    return _work(a) == _work(b)


def _work(cmd: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for arg in cmd:
        if skip:
            skip = False
        elif arg in OFFLOAD_SWITCHES:
            skip = True
        elif not arg.startswith(tuple(s + "=" for s in OFFLOAD_SWITCHES)):
            out.append(arg)
    return out


def reasons(a: RunFacts, b: RunFacts, projection: Projection | None) -> list[str]:
    """Why the check cannot be made, one line each (empty: it can)."""
    out = []
    if projection is None:
        out.append(f"no projection of A ({a.name}): none found (./RUN.proj.json, or beside the recording), "
                   "or --time left it out; run 'dpuprof project' on A, then report again")
    if not same_work(a.command, b.command):
        out.append("the runs do different work: their commands differ (beyond the offload switches "
                   f"{', '.join(OFFLOAD_SWITCHES)})")
    if a.step_kind and b.step_kind and a.step_kind != b.step_kind:
        out.append(f"the runs count steps differently (A by {a.step_kind} markers, B by {b.step_kind}): "
                   "their steps need not be the same size")
    for tag, f in (("A", a), ("B", b)):
        if f.window_s is None:
            out.append(f"{tag} ({f.name}) has no steady window: {f.window_how}")
        if not f.category_split:
            out.append(f"{tag} ({f.name}) has no category split (psutil mode): nothing to hold against "
                       "the projection's categories")
    return out


def check(a: RunFacts, b: RunFacts, projection: Projection | None, *, seed: int = 0,
          n_boot: int = 4000) -> ProjectionCheck:
    """The check of ``projection`` (made from A) against B (see the module docstring)."""
    why = reasons(a, b, projection)
    if why:
        return ProjectionCheck(a.name, b.name, cannot=why)
    per_step = a.steps >= MIN_STEPS and b.steps >= MIN_STEPS
    norm_a = a.steps if per_step else a.span_s
    norm_b = b.steps if per_step else b.span_s
    cats = [_category(c, a, b, projection, norm_a, norm_b) for c in CATEGORIES]
    mechs = _mechanisms(a, b, projection, norm_a, norm_b)
    speedup, note = None, ""
    if per_step:
        speedup = _speedup(a, b, projection, seed, n_boot)
    else:
        short = [f"{t} ({f.name}) has {f.steps} steps in its steady window" for t, f in (("A", a), ("B", b))
                 if f.steps < MIN_STEPS]
        note = (f"speedup not measured: {'; '.join(short)} (needs {MIN_STEPS}; mark steps with "
                "dpuprof.mark_step())")
    busy_a = sum(a.cpu_s.get(c, 0.0) for c in CATEGORIES) / norm_a if norm_a else 0.0
    return ProjectionCheck(a.name, b.name, unit="per_step" if per_step else "per_second", categories=cats,
                           mechanisms=mechs, speedup=speedup, speedup_note=note,
                           findings=findings(cats, mechs, speedup, busy_a, "per_step" if per_step else "per_second"))


def _ratio(after: float, before: float) -> float:
    return after / before if before > 0 else 1.0


def _category(c: str, a: RunFacts, b: RunFacts, proj: Projection, norm_a: float, norm_b: float) -> CpuCheck:
    row = proj.by_category.get(c)
    factor = _ratio(row.after_s, row.before_s) if row is not None else 1.0
    before = a.cpu_s.get(c, 0.0) / norm_a if norm_a else 0.0
    measured = b.cpu_s.get(c, 0.0) / norm_b if norm_b else 0.0
    return CpuCheck(c, before, before * factor, measured)


def _mechanisms(a: RunFacts, b: RunFacts, proj: Projection, norm_a: float, norm_b: float) -> list[CpuCheck]:
    """One CpuCheck per mechanism of the projection's offloaded rows, where A measured CPU in its
    subcategories (else B cannot tell it apart)."""
    groups: dict[str, list] = {}
    for row in proj.rows:
        if row.enabled and row.mechanism and row.before_s:
            groups.setdefault(row.mechanism, []).append(row)
    out = []
    for mech, rows in groups.items():
        subs = tuple(sorted({r.subcategory for r in rows}))
        a_s = sum(a.subcat_cpu_s.get(s, 0.0) for s in subs)
        if a_s <= 0 or not norm_a or not norm_b:
            continue
        factor = _ratio(sum(r.after_s or 0.0 for r in rows), sum(r.before_s or 0.0 for r in rows))
        before = a_s / norm_a
        out.append(CpuCheck(mech, before, before * factor,
                            sum(b.subcat_cpu_s.get(s, 0.0) for s in subs) / norm_b, subs))
    return out


def _speedup(a: RunFacts, b: RunFacts, proj: Projection, seed: int, n_boot: int) -> SpeedupCheck:
    wa, wb = a.step_wall_s, b.step_wall_s
    point, lo, hi = ratio_of_means_ci(wa, wb, seed=seed, n_boot=n_boot)
    sp = proj.speedup
    return SpeedupCheck(point, lo, hi, len(wa) / sum(wa), len(wb) / sum(wb), len(wa), len(wb),
                        sp.low, sp.expected, sp.high)


def findings(cats: Sequence[CpuCheck], mechs: Sequence[CpuCheck], speedup: SpeedupCheck | None,
             busy_a: float, unit: str) -> list[str]:
    """What B shows that the projection did not expect, worded as findings (FINDING_RULE)."""
    u = "s per step" if unit == "per_step" else "cores"
    out = []
    if speedup is not None and not speedup.inside:
        out.append(f"the job ran {speedup.measured:.2f}x as fast, {speedup.verdict} of the projected "
                   f"{_x(speedup.low)} to {_x(speedup.high)}")
    named = set()  # categories a mechanism finding already speaks for
    for m in mechs:
        want, got = m.before - m.projected, m.before - m.measured
        if want > 0 and got < want / 2:
            verb = "rose" if got < 0 else "fell by only"
            out.append(f"{m.name} ({', '.join(m.subcategories)}): its CPU {verb} {abs(got):.4g} {u} "
                       f"(from {m.before:.4g} to {m.measured:.4g}); the projection expected it to fall by {want:.4g}")
            named |= {s.split(".")[0] for s in m.subcategories}
    for c in cats:
        diff = c.measured - c.projected
        if c.name in named or not (abs(diff) > GROWTH * c.projected and abs(diff) > FLOOR * busy_a):
            continue
        rel = f"{100 * abs(diff) / c.projected:.0f} % " if c.projected > 0 else ""
        out.append(f"{c.name} used {rel}{'more' if diff > 0 else 'less'} CPU than projected: "
                   f"{c.measured:.4g} {u} against {c.projected:.4g} (A: {c.before:.4g})")
    return out


def _x(v) -> str:
    return "unbounded" if v is None else f"{v:.2f}x"
