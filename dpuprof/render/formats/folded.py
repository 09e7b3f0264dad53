"""``--format folded``: collapsed stacks for flamegraph.pl, difffolded.pl and friends.

One line per distinct stack, ``frame;frame;frame count``: root first, the process name as the
root frame (like stackcollapse-perf.pl), the count in samples. Idle is left out. A cluster puts
the node before the process; a comparison puts ``A: name`` / ``B: name`` first.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.recording import folded
from dpuprof.recording.folded import parse as parse_folded  # noqa: F401 (re-exported for readers)
from dpuprof.render.output import Rendered
from dpuprof.render.view import Report, require_stacks


def folded_lines(stacks: pd.DataFrame, prefix: str = "") -> list[str]:
    """Folded file lines of a stacks frame (columns ``folded``, ``samples``), equal stacks summed."""
    return folded.lines(stacks.groupby("folded")["samples"].sum().items(), prefix)


def render(report: Report, *, stem: str | None = None, progress=None, color: bool = False) -> Rendered:
    require_stacks(report, "folded")
    if report.kind == "compare":
        lines = []
        for tag, v in zip("AB", report.runs):
            lines += folded_lines(v.stacks, folded.under(f"{tag}: {v.name}", ""))
    else:
        lines = folded_lines(report.main.stacks)
    return Rendered(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
