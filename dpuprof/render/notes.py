"""The report's notes on a run: one line each for what the reader must know before reading its
numbers (a window or duty cycle, a cut-short or failed run, probes unavailable or stopped early,
losses, the recorder's own cost, the self-check of the workload's CPU). Pure: text from a loaded
Recording and its summary."""

from __future__ import annotations

from dpuprof.render.losses import from_recording as losses_of
from dpuprof.render.losses import warning as loss_warning
from dpuprof.render.observer import line as observer_line

#: the recorder's own process, as host CPU shows it (left out of the stacks)
RECORDER_LABEL = "dpuprof recorder"
#: how far the categorised workload CPU may be from the kernel's count before the report says so
SELF_CHECK_PCT = 2.0


def run_notes(rec, summary: dict) -> list[str]:
    """The report's notes on one recording, in the order a reader needs them: what part of the run it
    covers, how it ended, what is missing or partial, what the recorder cost, the self-check.
    ``summary``: the run's JSON summary with build_view's additions (observer_cost, recorder)."""
    out = []
    win = rec.info.window
    if win is not None:
        out.append(f"time window {win.start_s}-{win.end_s} s of the recording ({win.intervals} intervals): {win.how}")
    duty = rec.info.duty
    if duty is not None:
        out.append(f"duty cycle: {duty.on_s:g} s recorded of every {duty.period_s:g} s, the probes "
                   f"detached in between; {rec.duration_s:.1f} s recorded in all: shares and rates are per "
                   f"recorded second, totals of the recorded time only")
    if not rec.complete:
        out.append(f"recording was cut short (the recorder did not finish: killed?); "
                   f"data covers {rec.duration_s:.1f} s up to the last complete interval")
    code = rec.info.exit_code
    if code is not None and code != 0:
        out.append(f"the workload exited with status {code}")
    for probe, why in sorted(rec.info.probes_unavailable.items()):
        out.append(f"probe {probe} unavailable: {why}")
    out += [p["warning"] for p in summary.get("probes_stopped_early") or ()]
    line = loss_warning(losses_of(rec))
    if line:
        out.append(line)
    line = observer_line(summary.get("observer_cost"))
    if line:
        out.append(line)
    own = (summary.get("recorder") or {}).get("cpu_s", 0.0)
    if rec.category_split and own > 0 and rec.duration_s:
        out.append(f"the recorder itself used {own / rec.duration_s:.2f} cores ({own:.1f} CPU s), "
                   f"counted in host CPU as {RECORDER_LABEL!r} and left out of the stacks")
    line = self_check_line(summary["workload_cpu"], rec.category_split)
    if line:
        out.append(line)
    if not rec.category_split:
        out.append("no category split (psutil mode): CPU is shown as user/system/softirq time; "
                   "record as root without --probes psutil to split it into network, storage, crypto ...")
    return out


def self_check_line(wl: dict, split: bool) -> str | None:
    """A note when the workload's categorised CPU (with its observer share) and the kernel's count
    of the command tree's CPU (``kernel_s``) differ by more than SELF_CHECK_PCT; None otherwise."""
    kernel = wl.get("kernel_s")
    if not split or not kernel:
        return None
    recorded = wl["total_s"] + wl["observer_s"]
    pct = 100 * (recorded - kernel) / kernel
    if abs(pct) <= SELF_CHECK_PCT:
        return None
    return (f"self-check: the workload's categorised CPU ({recorded:.2f} s) is {pct:+.1f} % off the kernel's "
            f"count for the command's processes ({kernel:.2f} s, reaped); categories and shares carry that error "
            f"(a process outside the command's tree, or one not reaped by it, is one cause)")


def with_projection(own: list[str], projection_warnings) -> list[str]:
    """The recording's warnings, then the projection's; a recording line that a projection line
    repeats and extends (a probe that stopped early, and what the projection did about it) is said
    once, by the projection's."""
    proj = list(projection_warnings)
    return [w for w in own if not any(p.startswith(f"projection: {w}") for p in proj)] + proj


__all__ = ["RECORDER_LABEL", "SELF_CHECK_PCT", "run_notes", "self_check_line", "with_projection"]
