"""``--format folded``: collapsed stacks for flamegraph.pl, difffolded.pl and friends.

One line per distinct stack, ``frame;frame;frame count``: root first, the process name as the
root frame (like stackcollapse-perf.pl), the count in samples. Idle is left out. A cluster puts
the node before the process; a comparison puts ``A: name`` / ``B: name`` first.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.render.view import Report, require_stacks
from dpuprof.render.output import Rendered


def _frame(text: str) -> str:
    """Frames cannot hold line breaks (a line is a stack)."""
    return " ".join(str(text).splitlines())


def folded_lines(stacks: pd.DataFrame, prefix: str = "") -> list[str]:
    agg = stacks.groupby("folded")["samples"].sum()
    return [f"{prefix}{_frame(stack)} {int(round(n))}" for stack, n in sorted(agg.items()) if n > 0]


def parse_folded(text: str) -> dict[str, int]:
    """Parse folded stacks (what flamegraph.pl reads): {stack: count}; repeated stacks add up."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep or not stack or not count.isdigit():
            raise ValueError(f"line {n}: not 'frame;frame count': {line[:80]!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    require_stacks(report, "folded")
    if report.kind == "compare":
        lines = []
        for tag, v in zip("AB", report.runs):
            lines += folded_lines(v.stacks, f"{tag}: {v.name.replace(';', ':')};")
    else:
        lines = folded_lines(report.main.stacks)
    return Rendered(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
