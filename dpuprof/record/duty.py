"""The duty cycle's schedule (``dpuprof agent --duty W/P``): record ``W`` seconds of every ``P``.

Periods are counted from the recording's start, so the schedule never drifts: period k is
[start + k P, start + (k+1) P), its on part the first ``W`` seconds of it (from when the probes are
attached again: ``off_at``). In the off part the recorder detaches every probe (record/sources.py
``pause``): nothing runs on the host's events, and nothing is recorded; the intervals of the
recording cover the on parts only, and the metadata ``duty`` ({on_s, period_s}) says so. Each recorded second then stands for ``P / W``
seconds of the run (``weight``): a rate over recorded time (CPU seconds per recorded second, a
share) estimates the whole run's as it is, and a total times the weight estimates the whole run's
total (Google-Wide Profiling's sampling of time windows, for the lowest cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpuprof.errors import UserError


@dataclass(frozen=True)
class DutyCycle:
    """Record ``on_s`` seconds of every ``period_s`` (0 < on_s < period_s), periods counted from
    ``start`` (unix s)."""

    on_s: float
    period_s: float
    start: float = 0.0

    def __post_init__(self):
        if not 0 < self.on_s < self.period_s:
            raise UserError(f"--duty: the recorded part must be shorter than the period, got "
                            f"{self.on_s:g}s/{self.period_s:g}s")

    @property
    def weight(self) -> float:
        """How many seconds of the run each recorded second stands for: period_s / on_s."""
        return self.period_s / self.on_s

    def _period(self, t: float) -> int:
        # A hair of tolerance: a deadline computed as start + k P and read back from the clock
        # can land a rounding error below the boundary it was computed for.
        return math.floor((t - self.start) / self.period_s + 1e-9)

    def off_at(self, on_since: float, recorded_s: float = 0.0, parts: int = 0) -> float:
        """Unix s at which the on part that began at ``on_since`` ends: when the recording will
        hold ``parts + 1`` times ``on_s``, given ``recorded_s`` seconds recorded by the ``parts``
        on parts before it. So every on part records ``on_s`` from when it began, however late in
        its period (attaching the probes again and taking the baselines took 30-120 ms on the
        2-vCPU development VM), and one that ran long (an interval's drain that ended past its
        time: 0.9 s once, the first drain on a loaded machine) is made up by the next: the recorded
        time stays within one drain of ``on_s`` per period, and ``weight`` stays right."""
        return on_since + max(0.0, (parts + 1) * self.on_s - recorded_s)

    def next_on(self, t: float) -> float:
        """Unix s at which the period after the one holding ``t`` begins (its on part)."""
        return self.start + (self._period(t) + 1) * self.period_s


__all__ = ["DutyCycle"]
