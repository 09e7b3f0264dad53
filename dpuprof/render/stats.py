"""Sampling statistics for CPU samples.

A category's CPU time is estimated from ``k`` of ``n`` samples landing in it. Treating samples as
independent Bernoulli draws gives a binomial standard error; that is optimistic for bursty work
(samples 10 ms apart are correlated), so the report calls these "sampling" intervals and nothing
more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054


def share_ci(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for the proportion k/n (0..1); (0, 0) when n is 0."""
    if n <= 0:
        return 0.0, 0.0
    p = min(max(k / n, 0.0), 1.0)  # more samples than capacity (clock skew, damaged input) clamps
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def scaled_share_ci(point: float, k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson interval of k/n, moved onto ``point``: the relative error comes from the sample
    counts, the estimate may come from elsewhere (CPU time scaled to exact on-CPU time)."""
    lo, hi = share_ci(k, n, z)
    if k <= 0 or n <= 0:
        return 0.0, hi
    p = k / n
    return max(0.0, point * lo / p), min(1.0, point * hi / p)


def count_ci(k: float, z: float = Z95) -> tuple[float, float]:
    """Approximate 95 % interval for a Poisson count k: normal approximation, floored at 0, and
    the rule of three (0..3) when nothing was counted."""
    if k <= 0:
        return 0.0, 3.0
    half = z * math.sqrt(k)
    return max(0.0, k - half), k + half


def two_proportion_z(k1: float, n1: float, k2: float, n2: float) -> tuple[float, float]:
    """Two-sided two-proportion z-test of k1/n1 against k2/n2: returns (z, p).

    Identical proportions give (0.0, 1.0); an undefined test (no samples, or a pooled proportion of
    0 or 1) gives (nan, nan) -- except when both proportions are equal, which is (0.0, 1.0).
    """
    if n1 <= 0 or n2 <= 0:
        return math.nan, math.nan
    p1, p2 = k1 / n1, k2 / n2
    if p1 == p2:
        return 0.0, 1.0
    pooled = (k1 + k2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if var <= 0:
        return math.nan, math.nan
    z = (p2 - p1) / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2))


def ratio_of_means_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0, n_boot: int = 4000,
                      level: float = 0.95) -> tuple[float, float, float]:
    """mean(a) / mean(b) and its percentile-bootstrap interval: ``(point, low, high)``.

    a and b (positive values, e.g. the per-step wall times of a before- and an after-run: the
    ratio is then B's speedup) are resampled with replacement, each on its own, ``n_boot`` times
    with numpy's default_rng(seed), so the same values give the same interval. Steps are taken
    as independent draws; consecutive steps that are correlated make the interval too narrow.
    Raises ValueError when either is empty or its mean is not positive."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0 or xa.mean() <= 0 or xb.mean() <= 0:
        raise ValueError("need values with a positive mean on both sides")
    point = float(xa.mean() / xb.mean())
    rng = np.random.default_rng(seed)
    ma = xa[rng.integers(0, xa.size, size=(n_boot, xa.size))].mean(axis=1)
    mb = xb[rng.integers(0, xb.size, size=(n_boot, xb.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = (float(x) for x in np.percentile(ma / mb, [tail, 100.0 - tail]))
    return point, lo, hi
