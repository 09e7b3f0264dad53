"""Probes that stopped early: which uprobes the recorder detached, and how much of the run they covered.

The recorder detaches a uprobe target hit more often than its limit (dpuprof/record/drain/uprobes.py):
its rows in ``codec_calls`` / ``collectives`` then count the calls up to the detach only. Meta key
``uprobes_detached`` ({target: {from, detached_at, calls_per_s, limit_per_s}}, unix seconds; written
since this module) says when; older recordings only say ``uprobes[target] = "detached: ..."``, and
their coverage is unknown.

``detached(meta, intervals)`` gives one ``DetachedProbe`` per such target, its ``covered_s`` and
``span_s`` measured against the intervals present (a ``report --time`` window included):
``covered_s`` the seconds of those intervals from ``from`` (attach, or the recording's start) to the
detach, ``span_s`` those from ``from`` to the end. ``weight`` = covered_s / span_s is the share of
the time the target could be called in which its calls were counted; None when not known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DETACHED_KEY = "uprobes_detached"
_RATE = re.compile(r"detached: (\d+(?:\.\d+)?) calls/s, over the limit of (\d+(?:\.\d+)?)/s")


@dataclass(frozen=True)
class DetachedProbe:
    """One uprobe target detached during the run. Times in seconds; None where not recorded."""

    target: str              # e.g. "libcrypto:EVP_EncryptUpdate" (= codec_calls lib:func)
    calls_per_s: float | None
    limit_per_s: float | None
    covered_s: float | None  # counted part of the run (intervals present), from attach to detach
    span_s: float | None     # the part of the run it could have been called in: from attach to the end

    @property
    def weight(self) -> float | None:
        """covered_s / span_s (0..1]: the share of the target's calls the recording holds, if the
        rate was steady; None when the detach time is not known or nothing was covered."""
        if self.covered_s is None or not self.span_s or self.covered_s <= 0:
            return None
        return min(1.0, self.covered_s / self.span_s)

    def line(self) -> str:
        """The one warning line every command gives for it."""
        rate = "" if self.calls_per_s is None else f" at {self.calls_per_s:.0f} calls/s"
        limit = "" if self.limit_per_s is None else f" (over the limit of {self.limit_per_s:.0f}/s, " \
                                                    "DPUPROF_UPROBE_MAX_HZ)"
        when = "" if self.covered_s is None else f" after {self.covered_s:.1f} s of {self.span_s:.1f} s"
        counted = "the calls up to then" if self.covered_s is not None else "an unknown part of the calls"
        return (f"uprobe {self.target} stopped early: detached{when}{rate}{limit}; the recording counts "
                f"{counted} only (partial codec_calls/collectives)")


def detached(meta: dict, intervals=None) -> list[DetachedProbe]:
    """The targets the recorder detached, sorted by name (``meta``: the raw meta dict;
    ``intervals``: a DataFrame with t_start and t_end in unix s, or None for no coverage)."""
    status = meta.get("uprobes") if isinstance(meta.get("uprobes"), dict) else {}
    times = meta.get(DETACHED_KEY) if isinstance(meta.get(DETACHED_KEY), dict) else {}
    names = sorted({t for t, s in status.items() if isinstance(s, str) and s.startswith("detached")}
                   | {t for t, v in times.items() if isinstance(v, dict)})
    spans = _spans(intervals)
    out = []
    for name in names:
        info = times.get(name) if isinstance(times.get(name), dict) else {}
        m = _RATE.search(status.get(name) or "")
        rate = _num(info.get("calls_per_s")) or (float(m.group(1)) if m else None)
        limit = _num(info.get("limit_per_s")) or (float(m.group(2)) if m else None)
        start, stop = _num(info.get("from")), _num(info.get("detached_at"))
        covered = span = None
        if stop is not None and spans:
            start = spans[0][0] if start is None else start
            covered, span = _overlap(spans, start, stop), _overlap(spans, start, float("inf"))
        out.append(DetachedProbe(name, rate, limit, covered, span))
    return out


def _spans(intervals) -> list[tuple[float, float]]:
    if intervals is None or len(intervals) == 0:
        return []
    return sorted((float(a), float(b)) for a, b in zip(intervals["t_start"], intervals["t_end"]))


def _overlap(spans, start: float, stop: float) -> float:
    """Seconds of ``spans`` inside [start, stop]."""
    return sum(max(0.0, min(b, stop) - max(a, start)) for a, b in spans)


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["DETACHED_KEY", "DetachedProbe", "detached"]
