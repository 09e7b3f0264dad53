"""Compare two runs (A = before, B = after): per category, the change in its share of busy CPU
samples and whether that change is more than sampling noise (two-proportion z-test).

Shares, not seconds, are tested: two runs rarely last equally long. Six categories are tested at
once, so a change counts as significant at p < 0.05 / 6 (Bonferroni).
"""

from __future__ import annotations

import pandas as pd

from dpuprof.categories import CATEGORIES
from dpuprof.render.view import RunView
from dpuprof.render.stats import two_proportion_z

ALPHA = 0.05
THRESHOLD = ALPHA / len(CATEGORIES)


def compare_views(a: RunView, b: RunView) -> pd.DataFrame:
    """One row per category: a_s, b_s (CPU s), a_cores, b_cores, a_samples, b_samples, a_share,
    b_share (of busy samples, 0..1), diff_pp (percentage points, B - A), z, p, significant."""
    rows = []
    na, nb = a.busy_samples, b.busy_samples
    for c in CATEGORIES:
        ka, kb = float(a.cats.loc[c, "samples"]), float(b.cats.loc[c, "samples"])
        sa, sb = (ka / na if na else 0.0), (kb / nb if nb else 0.0)
        z, p = two_proportion_z(ka, na, kb, nb)
        rows.append({"category": c, "a_s": float(a.cats.loc[c, "cpu_s"]), "b_s": float(b.cats.loc[c, "cpu_s"]),
                     "a_cores": a.cores(c), "b_cores": b.cores(c), "a_samples": ka, "b_samples": kb,
                     "a_share": sa, "b_share": sb, "diff_pp": 100.0 * (sb - sa), "z": z, "p": p,
                     "significant": bool(p == p and p < THRESHOLD)})
    return pd.DataFrame(rows).set_index("category")


def comparison_json(cmp: pd.DataFrame) -> dict:
    """The comparison table as JSON (NaN -> null)."""
    out = {}
    for cat, row in cmp.iterrows():
        out[cat] = {k: (None if isinstance(v, float) and v != v else
                        (bool(v) if k == "significant" else round(float(v), 6)))
                    for k, v in row.items()}
    return {"test": "two-proportion z-test on busy CPU samples per category, two-sided",
            "alpha": ALPHA, "threshold": THRESHOLD, "by_category": out}
