"""Which part of a recording the speedup model looks at: the steady window.

Model policy, kept beside the Projection it describes (the projection's ``window``): ``dpuprof
project`` chooses it, and the renderers apply the same rule where a report is cut to ``--time
steady`` and in the projection check's facts (render may import the projection package, not
project).

Start-up (interpreter start, imports, rank spawn, the first steps' allocations) is not what an
offload changes, and on a short recording it is a large part of the CPU. The window is chosen, in
this order of preference:

1. an explicit ``START:END`` (seconds from the recording's start) given by the user;
2. step markers (``markers`` rows of kind ``step``, else ``ddp_step``): from the first step after warm-up (after
   ``WARMUP_STEPS`` steps, or a quarter of the steps when there are fewer than 12) to the last;
3. the data: the first interval whose workload CPU reaches ``PLATEAU`` of the median workload CPU
   of the second half of the recording, to the last interval that still does.

Intervals are the recording's own (``intervals`` rows); an interval belongs to the window when its
midpoint lies in [start, end) (a window that ends at the recording's end keeps its last interval).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dpuprof.categories import NOT_WORK
from dpuprof.errors import UserError

WARMUP_STEPS = 3
#: Marker kinds that mark a training step: dpuprof.mark_step(), then DDP's prepare_for_backward.
STEP_KINDS = ("step", "ddp_step")
PLATEAU = 0.8


@dataclass(frozen=True)
class Window:
    """A time window of a recording.

    ``start``/``end``: seconds from the recording's first interval start; ``intervals``: the
    interval ids inside it; ``how``: one sentence on how it was chosen (shown to the user).
    """

    start: float
    end: float
    intervals: tuple[int, ...]
    how: str

    @property
    def length_s(self) -> float:
        return max(0.0, self.end - self.start)

    def as_dict(self) -> dict:
        return {"start_s": round(self.start, 3), "end_s": round(self.end, 3), "intervals": len(self.intervals),
                "how": self.how}


def parse_range(text: str) -> tuple[float, float] | str:
    """``"START:END"`` -> (start, end) seconds; ``"steady"`` -> "steady". UserError on bad input."""
    if text.strip() == "steady":
        return "steady"
    parts = text.split(":")
    if len(parts) != 2:
        raise UserError(f"--time {text!r}: expected START:END in seconds from the start, or 'steady'")
    try:
        start = float(parts[0]) if parts[0].strip() else 0.0
        end = float(parts[1]) if parts[1].strip() else float("inf")
    except ValueError:
        raise UserError(f"--time {text!r}: START and END must be numbers of seconds") from None
    if not (start >= 0 and end > start):
        raise UserError(f"--time {text!r}: need 0 <= START < END")
    return start, end


def _inside(intervals: pd.DataFrame, t0: float, start: float, end: float) -> tuple[int, ...]:
    """Intervals whose midpoint is in [start, end): adjacent windows never share an interval."""
    mid = (intervals["t_start"] + intervals["t_end"]) / 2 - t0
    return tuple(int(i) for i in intervals.loc[(mid >= start) & (mid < end), "interval"])


def choose(intervals: pd.DataFrame, cpu: pd.DataFrame, workload_pids: set, markers: pd.DataFrame,
           requested: tuple[float, float] | str = "steady") -> Window:
    """The window for ``requested`` (a (start, end) pair or ``"steady"``).

    ``intervals``: [interval, t_start, t_end] (unix s); ``cpu``: cpu_category rows [interval, pid,
    category, cpu_s]; ``markers``: [pid, tid, kind, t] (unix s). Raises UserError when an explicit
    range holds no interval.
    """
    if intervals.empty:
        return Window(0.0, 0.0, (), "the recording has no intervals")
    iv = intervals.sort_values("interval")
    t0, t_last = float(iv["t_start"].min()), float(iv["t_end"].max())
    if requested != "steady":
        start, asked_end = requested
        end = min(asked_end, t_last - t0 + 1e-9)
        ids = _inside(iv, t0, start, end)
        if not ids:
            raise UserError(f"--time {start:g}:{asked_end:g} holds no interval of this recording "
                            f"(it lasts {t_last - t0:.1f} s)")
        return Window(start, end, ids, f"--time {start:g}:{end:g} as given")
    steps = markers.iloc[0:0]
    for kind in STEP_KINDS:  # the job's own marker first, else DDP's per-iteration entry
        steps = markers[markers["kind"] == kind].sort_values("t") if not markers.empty else markers
        if len(steps) >= 2:
            break
    if len(steps) >= 2:
        skip = min(WARMUP_STEPS, max(1, len(steps) // 4))
        start, end = float(steps["t"].iloc[skip if skip < len(steps) - 1 else 0]) - t0, float(steps["t"].iloc[-1]) - t0
        ids = _inside(iv, t0, start, end)
        if ids:
            return Window(start, end, ids, f"step markers: from step {skip + 1} (after {skip} warm-up steps) "
                                           f"to the last of {len(steps)} steps")
    return _from_data(iv, t0, cpu, workload_pids)


def _from_data(iv: pd.DataFrame, t0: float, cpu: pd.DataFrame, workload_pids: set) -> Window:
    wl = cpu[cpu["pid"].isin(workload_pids) & ~cpu["category"].isin(NOT_WORK)] if not cpu.empty else cpu
    per = wl.groupby("interval")["cpu_s"].sum().reindex(iv["interval"], fill_value=0.0) if not wl.empty \
        else pd.Series(0.0, index=iv["interval"])
    rate = per.to_numpy() / (iv["t_end"] - iv["t_start"]).clip(lower=1e-9).to_numpy()
    n = len(rate)
    level = float(pd.Series(rate[n // 2:]).median()) if n else 0.0
    if n < 3 or level <= 0:
        return Window(0.0, float(iv["t_end"].max()) - t0, tuple(int(i) for i in iv["interval"]),
                      "the whole recording (too short, or no workload CPU, to tell start-up apart)")
    ok = [i for i in range(n) if rate[i] >= PLATEAU * level]
    first, last = ok[0], ok[-1]
    sel = iv.iloc[first:last + 1]
    return Window(float(sel["t_start"].min()) - t0, float(sel["t_end"].max()) - t0,
                  tuple(int(i) for i in sel["interval"]),
                  f"from the data (no step markers): intervals {first}-{last} of {n}, where the workload's CPU "
                  f"rate is at least {PLATEAU:.0%} of its steady level ({level:.2f} CPUs)")
