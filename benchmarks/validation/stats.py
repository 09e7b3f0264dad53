"""Statistics of a cell's interleaved pairs: the median of per-pair ratios B/A and its bootstrap CI."""

from __future__ import annotations

import numpy as np


def ratios(pairs: list[dict]) -> list[float]:
    """Per-pair speedups B/A from pairs of {"a": steps/s, "b": steps/s}."""
    return [p["b"] / p["a"] for p in pairs]


def median_ci(values: list[float], seed: int = 0, n_boot: int = 10_000, level: float = 0.95) -> dict:
    """Median of values and a percentile-bootstrap CI of the median (resampling the pairs with
    replacement, numpy's default_rng(seed), so the same values give the same interval).

    Returns {"median", "ci_low", "ci_high", "ci_half_width", "n", "n_boot", "level", "seed"}; with
    fewer than 2 values the CI is the point itself (half-width 0)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("no values")
    med = float(np.median(v))
    if v.size < 2:
        lo = hi = med
    else:
        rng = np.random.default_rng(seed)
        boots = np.median(v[rng.integers(0, v.size, size=(n_boot, v.size))], axis=1)
        tail = (1.0 - level) / 2.0 * 100.0
        lo, hi = (float(x) for x in np.percentile(boots, [tail, 100.0 - tail]))
    return {"median": med, "ci_low": lo, "ci_high": hi, "ci_half_width": (hi - lo) / 2.0,
            "n": int(v.size), "n_boot": n_boot, "level": level, "seed": seed}
