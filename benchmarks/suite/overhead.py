"""Section 2, overhead: each workload bare, under `dpuprof record`, under `perf record -a -g -F 99`
and under dpuprof with chosen probes, in interleaved rounds; and what each probe costs in CPU, from
BPF run-time statistics."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .config import MINIMAL, PROBE_WORKLOAD, Config, log
from .runner import bpf_stats, condition_cmd, run_cmd
from .stats import cost_pct, median, ratio_summary
from .workloads import Workload, ddp_workload, fio_workload, iperf3_workload


def timed_run(workload: Workload, cond: str, scratch: Path) -> tuple[float, float | None, float | None]:
    """One run of ``workload`` under ``cond``: its metric, the CPU seconds per unit of work (wait4 of
    the launched command and all it reaped, less the profiler's start-up) and the recorder's own CPU
    (% of one core; None bare)."""
    work = Path(tempfile.mkdtemp(prefix=f"{workload.name}-", dir=scratch))
    cmd, parse = workload.make(work)
    res, sampler = run_cmd(condition_cmd(cond, cmd, work), timeout=600, rss=cond != "bare", period=0.25)
    if res.returncode != 0:
        raise RuntimeError(f"{workload.name} under {cond} failed ({res.returncode}): {res.stderr[-600:]}")
    value, units = parse(res.stdout)
    # wait4 CPU of the launched process and all it reaped: the workload, plus the profiler
    # when there is one, less the profiler's start-up (compiling probes happens once).
    cpu = res.cpu_s - (sampler.cpu_before_child() if sampler is not None else 0.0)
    recorder = sampler.cpu_pct_while_child() if sampler is not None else None
    shutil.rmtree(work, ignore_errors=True)
    return value, (cpu / units if units else None), recorder


def interleaved(workload: Workload, conditions: list[str], rounds: int, scratch: Path) -> dict:
    """Each round runs every condition once, the order rotated by one each round; per-round ratios
    against the same round's bare run; medians over rounds."""
    metrics = {c: [] for c in conditions}
    costs = {c: [] for c in conditions}  # CPU s per unit of work, workload and profiler together
    recorder_cpu = {c: [] for c in conditions}  # the recorder's own CPU, % of one core
    for r in range(rounds):
        order = conditions[r % len(conditions):] + conditions[:r % len(conditions)]
        for cond in order:
            value, cost, recorder = timed_run(workload, cond, scratch)
            metrics[cond].append(value)
            costs[cond].append(cost)
            if cond != "bare":
                recorder_cpu[cond].append(recorder)
            log(f"overhead {workload.name} round {r + 1}/{rounds}: {cond}: {value:.3f} {workload.unit}")
    out = {"workload": workload.name, "unit": workload.unit, "rounds": rounds, "conditions": {}}
    for cond in conditions:
        out["conditions"][cond] = {
            "values": metrics[cond], "median": median(metrics[cond]),
            **ratio_summary(metrics[cond], metrics["bare"]),
            "recorder_cpu_pct": median(recorder_cpu[cond]),
            "cpu_per_unit": median(costs[cond]), "work_unit": workload.work_unit,
            "cpu_cost_pct": cost_pct(costs[cond], costs["bare"]),
        }
    minimal = f"probes:{MINIMAL}"
    if minimal in metrics:
        for cond in conditions:
            if cond.startswith(f"probes:{MINIMAL},"):
                inc = [v / m for v, m in zip(metrics[cond], metrics[minimal])]
                out["conditions"][cond]["incremental_pct"] = 100 * (1 - median(inc))
    return out


def bpf_cost_run(workload: Workload, cond: str, scratch: Path) -> dict:
    """One run of ``workload`` under dpuprof (``cond``) with BPF run-time statistics on: what the
    probes cost in the kernel and the recorder in user space, in CPU, independent of other load."""
    work = Path(tempfile.mkdtemp(prefix=f"bpf-{workload.name}-", dir=scratch))
    cmd, parse = workload.make(work)
    with bpf_stats() as enabled:
        res, sampler = run_cmd(condition_cmd(cond, cmd, work), timeout=600, rss=True, period=0.25, bpf=enabled)
    if res.returncode != 0:
        raise RuntimeError(f"{workload.name} under {cond} failed ({res.returncode}): {res.stderr[-600:]}")
    value, units = parse(res.stdout)
    shutil.rmtree(work, ignore_errors=True)
    cost = sampler.bpf_cost() or {}
    rec_pct = sampler.cpu_pct_while_child()
    span = cost.get("span_s")
    out = {"condition": cond, "metric": value, "units": units, "work_unit": workload.work_unit,
           "bpf": cost, "recorder_cpu_pct": rec_pct}
    if cost and rec_pct is not None:
        out["total_core_pct"] = cost["core_pct"] + rec_pct
        out["machine_pct"] = out["total_core_pct"] / (os.cpu_count() or 1)
        # BPF time per unit of work: the whole run's units over the span they were measured in
        out["bpf_us_per_unit"] = cost["core_pct"] / 100 * span * 1e6 / units if units and span else None
        # The command ran about one sampling period longer than the samples that saw it (half a
        # period missed at each end, on average).
        child_s = sampler.child_span_s()
        out.update(workload_share(res.cpu_s, sampler.cpu_s, cost["core_pct"] / 100 * span,
                                  child_s + sampler.period if child_s else None, out["total_core_pct"]))
    log(f"bpf cost {workload.name} {cond}: BPF {cost.get('core_pct', float('nan')):.2f} % of a core, "
        f"recorder {rec_pct if rec_pct is not None else float('nan'):.2f} %")
    return out


def workload_share(tree_cpu_s: float, recorder_cpu_s: float, bpf_s: float, child_s: float | None,
                   cost_core_pct: float) -> dict:
    """dpuprof's CPU cost as a share of the workload's own CPU, from one run under it.

    ``tree_cpu_s``: wait4 CPU of the recorder and all it reaped; ``recorder_cpu_s``: the recorder's
    own CPU (start-up included); ``bpf_s``: the BPF programs' run time while the command ran;
    ``child_s``: how long the command ran; ``cost_core_pct``: BPF plus recorder, % of one core over
    that time. The workload's own CPU is the tree's less the recorder's and less the BPF time (the
    kernel charges a program's run to the task it ran in, mostly the workload's; taking all of it
    out is the conservative side). Returns ``workload_cpu_s``, ``workload_core_pct`` (% of one
    core) and ``workload_pct`` (the cost, % of the workload's own CPU); {} when not measurable."""
    own = tree_cpu_s - recorder_cpu_s - bpf_s
    if not child_s or child_s <= 0 or own <= 0:
        return {}
    core = 100 * own / child_s
    return {"workload_cpu_s": own, "workload_core_pct": core, "workload_pct": 100 * cost_core_pct / core}


def bench_bpf_cost(cfg: Config, scratch: Path) -> dict:
    """Per workload (iperf3, fio) and condition: bpf_cost_run's row, and each added probe's BPF time
    over cpu_sample+proc_tree alone (``incremental_core_pct``, % of one core). --quick adds one probe
    per workload (the last of PROBE_WORKLOAD's), not each: every run is a recorder start-up."""
    minimal = f"probes:{MINIMAL}"
    out = {}
    for wl, workload in (("iperf3", iperf3_workload(cfg.iperf_s)), ("fio", fio_workload(cfg.fio_s, scratch))):
        added = [p for p, w in PROBE_WORKLOAD.items() if w == wl]
        conds = ["dpuprof", minimal, *(f"{minimal},{p}" for p in (added[-1:] if cfg.quick else added))]
        rows = {c: bpf_cost_run(workload, c, scratch) for c in conds}
        base = rows[minimal].get("bpf", {}).get("core_pct")
        for c, row in rows.items():
            if c.startswith(minimal + ",") and base is not None and row.get("bpf"):
                row["incremental_core_pct"] = row["bpf"]["core_pct"] - base
        out[wl] = rows
    return out


def bench_overhead(cfg: Config, scratch: Path, data: Path) -> dict:
    """Section 2: interleaved rounds of iperf3, fio and DDP training (``data``: its shards), and the
    BPF cost runs (``bpf_cost``)."""
    minimal = f"probes:{MINIMAL}"
    plus = lambda probe: f"probes:{MINIMAL},{probe}"  # noqa: E731
    # Per-probe throughput rounds only in the full suite; --quick measures one probe's CPU per
    # workload below.
    per_probe = (lambda wl: []) if cfg.quick else (  # noqa: E731
        lambda wl: [minimal, *(plus(p) for p, w in PROBE_WORKLOAD.items() if w == wl)])
    iperf_conds = ["bare", "dpuprof", "perf", *per_probe("iperf3")]
    fio_conds = ["bare", "dpuprof", "perf", *per_probe("fio")]
    out = {}
    log("overhead: iperf3 loopback")
    out["iperf3"] = interleaved(iperf3_workload(cfg.iperf_s), iperf_conds, cfg.iperf_rounds, scratch)
    log("overhead: fio 4 KiB O_DIRECT random reads")
    out["fio"] = interleaved(fio_workload(cfg.fio_s, scratch), fio_conds, cfg.fio_rounds, scratch)
    log("overhead: DDP training")
    ddp_conds = ["bare", "dpuprof"] if cfg.quick else ["bare", "dpuprof", "perf"]
    out["ddp"] = interleaved(ddp_workload(cfg.ddp_s, data, cfg), ddp_conds, cfg.ddp_rounds, scratch)
    log("overhead: BPF program run time per probe (kernel.bpf_stats_enabled)")
    out["bpf_cost"] = bench_bpf_cost(cfg, scratch)
    return out

