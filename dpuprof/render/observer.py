"""The recorder's own cost, shown beside the losses: what measuring cost, as shares of the job's CPU.

Three figures, each in CPU seconds and as a share of the workload's CPU (``workload_cpu.total_s``
of the summary: the job's busy CPU, idle and observer excluded):

- ``observer_s``: CPU of samples whose kernel stack ran one of dpuprof's BPF programs (category
  ``observer``, docs/taxonomy.md), in every process: the programs run in the context of whatever
  task or softirq hit the event, so this is where the probes' cost shows in the samples;
- ``bpf_run_s``: the programs' own run time as the kernel counts it (``probe_cost``, schema v5;
  null when not measured: an older recording, or meta ``probe_cost`` "unavailable: ..."). Where
  the statistics were on for one interval in N (meta ``probe_cost_every``), it and ``bpf_runs``
  and ``by_program`` are those intervals' counts scaled to the whole recording by time, and
  ``bpf_run_measured_share`` is the share of the recorded time they cover (1 when all of it);
- ``recorder_process_s``: the recorder process's own user + system CPU (``recorder_cpu``, schema
  v5; null for older recordings).

The JSON key is ``observer_cost`` (stable; docs/api.md):
``{workload_cpu_s, observer_s, observer_share, bpf_run_s, bpf_run_share, bpf_runs,
bpf_run_measured_share, probe_cost, recorder_process_s, recorder_process_share, by_program:
[{program, runs, run_s}]}``; shares are
fractions (0.066 = 6.6 %), null where the figure or the workload's CPU is unknown or zero.
"""

from __future__ import annotations

from dpuprof.categories import OBSERVER


def _share(part: float | None, whole: float) -> float | None:
    return None if part is None or whole <= 0 else round(part / whole, 6)


def _measured_share(rec) -> float:
    """The share of the recorded time the kernel's statistics were on: 1 with meta
    ``probe_cost_every`` 1 (every interval), else the time of the intervals that hold probe_cost
    rows (each window's: the cpu-clock sampler runs in every interval, so a window always has a
    row; an agent's file numbers its intervals from 0, so the number alone cannot tell)."""
    if rec.info.probe_cost_every <= 1:
        return 1.0
    iv = rec.table("intervals")
    dur = (iv["t_end"] - iv["t_start"]).clip(lower=0)
    total = float(dur.sum())
    windows = iv["interval"].isin(rec.table("probe_cost")["interval"])
    return float(dur[windows].sum()) / total if total > 0 else 0.0


def cost(rec, workload_cpu_s: float) -> dict:
    """The ``observer_cost`` dict of a loaded Recording (module docstring); ``workload_cpu_s`` is
    the denominator, the workload's busy CPU seconds."""
    cat = rec.table("cpu_category")
    observer_s = float(cat.loc[cat["category"] == OBSERVER, "cpu_s"].sum()) if not cat.empty else 0.0
    pc = rec.table("probe_cost")
    covered = _measured_share(rec)
    scale = 1.0 / covered if covered else 0.0
    by_program = []
    if not pc.empty:
        per = pc.groupby("program")[["runs", "run_ns"]].sum().sort_values("run_ns", ascending=False)
        by_program = [{"program": str(p), "runs": round(int(r.runs) * scale),
                       "run_s": round(float(r.run_ns) * scale / 1e9, 6)} for p, r in per.iterrows()]
    status = rec.info.probe_cost
    measured = (not pc.empty or status == "measured") and covered > 0
    bpf_s = round(float(pc["run_ns"].sum()) * scale / 1e9, 6) if measured else None
    rc = rec.table("recorder_cpu")
    own_s = round(float((rc["user_s"] + rc["system_s"]).sum()), 6) if not rc.empty else None
    return {
        "workload_cpu_s": round(workload_cpu_s, 6),
        "observer_s": round(observer_s, 6), "observer_share": _share(observer_s, workload_cpu_s),
        "bpf_run_s": bpf_s, "bpf_run_share": _share(bpf_s, workload_cpu_s),
        "bpf_runs": round(int(pc["runs"].sum()) * scale) if measured else None,
        "bpf_run_measured_share": round(covered, 6) if measured else None,
        "probe_cost": status,
        "recorder_process_s": own_s, "recorder_process_share": _share(own_s, workload_cpu_s),
        "by_program": by_program,
    }


def _pct(share: float | None) -> str:
    return "" if share is None else f" ({100 * share:.2f} % of the workload's CPU)"


def line(c: dict | None) -> str | None:
    """One line for the report's notes, beside the losses; None when the recording has none of the
    three figures (an older recording without observer samples)."""
    if not c:
        return None
    parts = []
    if c["observer_s"] > 0:
        parts.append(f"samples in its BPF programs {c['observer_s']:.2f} CPU s{_pct(c['observer_share'])}, "
                     "filed as 'observer', not as the job's")
    if c["bpf_run_s"] is not None:
        measured = c.get("bpf_run_measured_share")
        est = (f", from the {100 * measured:.0f} % of the time the kernel's statistics were on" if measured is not None
               and measured < 1 else "")
        parts.append(f"BPF program run time {c['bpf_run_s']:.2f} s{_pct(c['bpf_run_share'])}{est}")
    elif isinstance(c.get("probe_cost"), str) and c["probe_cost"].startswith("unavailable"):
        parts.append(f"BPF program run time not measured ({c['probe_cost'][len('unavailable: '):]})")
    if c["recorder_process_s"] is not None:
        parts.append(f"recorder process {c['recorder_process_s']:.2f} CPU s{_pct(c['recorder_process_share'])}")
    return "the recorder's own cost: " + "; ".join(parts) if parts else None


__all__ = ["cost", "line"]
