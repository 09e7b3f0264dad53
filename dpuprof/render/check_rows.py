"""The projection check (:mod:`dpuprof.render.projection_check`) as text rows and lines, shared by
the terminal, markdown and HTML formats so that they say the same thing."""

from __future__ import annotations

from dpuprof.render.projection_check import FINDING_RULE, ProjectionCheck

TITLE = "Projection check: A's projection against B"
CPU_HEADER = ["Workload CPU", "A (before)", "Projected B", "Measured B", "Error", "Error %"]


def _n(v: float) -> str:
    return f"{v:.4f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.0f} %"


def _x(v: float | None) -> str:
    return "unbounded" if v is None else f"{v:.2f}x"


def intro(chk: ProjectionCheck) -> str:
    """One line: what is compared, in which unit."""
    return (f"The projection made from A ({chk.a}) held against what B ({chk.b}) measured, over each "
            f"run's steady window; the workload's CPU (its own processes) in {chk.unit_text}. "
            "Projected = A's CPU x the projection's after/before ratio.")


def cpu_rows(chk: ProjectionCheck) -> list[list[str]]:
    """CPU_HEADER rows: each category, then each offload mechanism (``mechanism: subcategories``)."""
    rows = [[c.name, _n(c.before), _n(c.projected), _n(c.measured), f"{c.error:+.4f}", _pct(c.error_pct)]
            for c in chk.categories]
    rows += [[f"{m.name} ({', '.join(m.subcategories)})", _n(m.before), _n(m.projected), _n(m.measured),
              f"{m.error:+.4f}", _pct(m.error_pct)] for m in chk.mechanisms]
    return rows


def speedup_line(chk: ProjectionCheck) -> str:
    """The measured speedup with its interval against the projected range, and the verdict."""
    sp = chk.speedup
    if sp is None:
        return chk.speedup_note
    return (f"Speedup: measured {sp.measured:.3f}x (95 % interval {sp.ci_low:.3f}-{sp.ci_high:.3f}, bootstrap "
            f"over per-step times; A {sp.a_steps_per_s:.3f} steps/s over {sp.a_steps} steps, B "
            f"{sp.b_steps_per_s:.3f} over {sp.b_steps}); projected low {_x(sp.low)}, expected "
            f"{_x(sp.expected)}, high {_x(sp.high)}: {sp.verdict}")


def finding_lines(chk: ProjectionCheck) -> list[str]:
    """The findings, or one line saying there is none; then the rule."""
    return (list(chk.findings) or ["none: B matched the projection within the rule"]) + [f"rule: {FINDING_RULE}"]


def cannot_lines(chk: ProjectionCheck) -> list[str]:
    """One line per reason the check could not be made."""
    return [f"projection check not made: {why}" for why in chk.cannot]
