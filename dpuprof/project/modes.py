"""The execution mode a projection assumes, and the other one it is compared with.

A job's speedup rests most on each mechanism's Accelerometer mode (dpuprof.project.accelerometer):
``async`` (the host hands the work off and goes on), ``sync_os`` (the thread sleeps while the DPU
works) or ``sync`` (the host thread waits, busy, for each offload: work on Arm cores slower than the
host's, ``A < 1``, then costs more than it removes). The same recording can give 2.5x in one and
1.01x in the other, so a projection carries both: the modes its freed CPU came from
(:func:`assumed`) and the speedup under the other assumption (:func:`other_override`; computed by
dpuprof.project.assemble with the whole model, not scaled from this one).

Pure: no I/O, no printing.
"""

from __future__ import annotations

import pandas as pd

from dpuprof.project.profiles import Profile


def assumed(rows: pd.DataFrame) -> dict[str, list[str]]:
    """``{mode: [mechanism, ...]}`` of the evaluated ``rows`` (offload_rows.evaluate) that are
    enabled and free CPU: the modes the projected speedup rests on (empty when nothing pays)."""
    out: dict[str, list[str]] = {}
    if rows.empty:
        return out
    live = rows[rows["enabled"].astype(bool) & (rows["freed_s"] > 0)]
    for mode, mech in zip(live["mode"], live["mechanism"]):
        if isinstance(mech, str) and mech not in out.setdefault(mode, []):
            out[mode].append(mech)
    return {m: sorted(v) for m, v in sorted(out.items())}


def other_override(given: Profile, mode: str | None) -> tuple[str | None, str]:
    """(the ``mode`` override of the comparison run, or None for each mechanism's own mode; the
    command line that gives it).

    The comparison is ``sync`` (the host waits for every offload: the least an offload can give)
    unless every mechanism is already sync; then it is the profile's own modes when ``--mode sync``
    forced them, else ``async`` (the most). ``given``: the profile before ``--mode``.
    """
    own = {m.mode.value for m in given.mechanisms}
    now = {mode} if mode else own
    if now != {"sync"}:
        return "sync", "--mode sync"
    if mode is not None and own != {"sync"}:
        return None, "each mechanism's own mode (no --mode)"
    return "async", "--mode async"
