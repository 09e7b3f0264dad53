"""Words for the execution mode a projection's speedup assumes, and what the other mode gives.

The projection carries both (``speedup.modes`` and ``speedup.other_mode``, computed by
dpuprof.project.modes and assemble); these functions only say them, for the terminal, the report's
tables and the HTML headline. Older files and merged projections have neither: every function then
returns nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the report's tables import this without pydantic
    from dpuprof.projection.schema import Speedup

#: What each Accelerometer mode means for the host thread that offloads.
MEANING = {
    "async": "the host hands the work off and goes on",
    "sync_os": "the thread sleeps while the DPU works",
    "sync": "the host thread waits, busy, for each offload",
}


def _x(value, spec: str) -> str:
    return "unbounded" if value is None else format(value, spec)


def headline(sp: Speedup, override: str | None, spec: str = ".3f", unit: str = "") -> str | None:
    """What to put beside the headline number, or None without the fields:
    ``assumes the host does not wait for the DPU (async, sync_os); --mode sync: 1.003``.

    ``override``: the projection's ``mode_override`` (the --mode given)."""
    other = sp.other_mode
    if sp.modes is None or other is None:
        return None
    names = ", ".join(sp.modes)
    if not sp.modes:
        assumed = "no offload pays"
    elif "sync" not in sp.modes:
        assumed = f"the host does not wait for the DPU ({names})"
    elif set(sp.modes) == {"sync"}:
        assumed = "the host waits, busy, for the DPU (sync)"
    else:
        assumed = f"{names} offloads"
    if override:
        assumed += f" as --mode {override.replace('_', '-')} sets"
    return f"assumes {assumed}; {other.flag}: {_x(other.expected, spec)}{unit}"


def details(sp: Speedup, spec: str = ".3f") -> list[str]:
    """The lines under the headline: which mechanisms run in which mode and what that means, then
    the other mode's bounds and what it means. Empty without the fields."""
    other = sp.other_mode
    if sp.modes is None or other is None:
        return []
    said = "; ".join(f"{mode} for {', '.join(mechs)} ({MEANING.get(mode, mode)})" for mode, mechs in sp.modes.items())
    out = [f"modes: {said}" if said else "modes: no offload pays in the modes assumed"]
    mode = other.mode
    what = MEANING.get(mode, "") if mode else "each mechanism's own mode"
    bounds = "   ".join(f"{k} {_x(getattr(other, k), spec)}" for k in ("low", "expected", "high"))
    out.append(f"with {other.flag}" + (f" ({what})" if mode else "") + f": {bounds}")
    return out
