"""How RESULTS.md writes numbers: fixed decimals with "n/a" for missing values, percentages of
fractions, and a condition's per-round slowdown range."""

from __future__ import annotations

import math


def num(x, nd=2, suffix="", sign=False):
    """``x`` with ``nd`` decimals and ``suffix`` ("+" first when ``sign``); "n/a" for None or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:{'+' if sign else ''}.{nd}f}{suffix}"


def pct(x, nd=1):
    """A fraction as a percentage ("12.3 %"); "n/a" for None."""
    return num(None if x is None else 100 * x, nd, " %")


def spread(cond: dict) -> str:
    """A condition's smallest to largest per-round slowdown, from its ratio_max and ratio_min."""
    return f"{num(100 * (1 - cond['ratio_max']), 1)} to {num(100 * (1 - cond['ratio_min']), 1)} %"


def unit_word(work_unit: str) -> str:
    """A unit of work in the singular where it reads better ("step" for "steps")."""
    return work_unit.rstrip("s") if work_unit == "steps" else work_unit
