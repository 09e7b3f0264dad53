#!/usr/bin/env python3
"""What recording costs on packet-, thread- and I/O-heavy loads (issue 32), side by side with perf.

    sudo python3 benchmarks/hot_loads.py [--duration S] [--rounds N] [--tree [LABEL=]PATH ...]
                                         [--loads iperf3,wake-4x128,wake-2x8,fio] [--json OUT]

Loads (each lasts --duration seconds; --loads picks some; commands in hot_workloads.py):

    iperf3      iperf3 loopback TCP flood through benchmarks/together.py, the same command as the
                suite's overhead run: server pinned to the last CPU, client to the first (iperf3 -A),
                because where the scheduler puts the pair moves loopback throughput more than
                anything measured here; throughput in GB/s received
    wake-PxT    P processes of benchmarks/wake_threads.py, T threads each hashing 64 KiB (sha256 over
                a reused buffer) and sleeping 1 ms in a loop, started together through together.py;
                (P, T) = (4, 128) and (2, 8), 32x the threads; throughput in hashes/s
    fio         fio 4 KiB random reads, O_DIRECT, ioengine libaio, iodepth 32, one job (--thread),
                through together.py, of a loop device over a 256 MiB file on a tmpfs: no disk
                behind it, so the block layer runs as fast as the CPUs let it (issue 32: ~200k
                IOPS). The tmpfs (mounted in the scratch dir), its file and the loop device
                (``losetup --find --show``) are set up once per script run and torn down at the end,
                also on Ctrl-C or an error (the devices over that file, found with ``losetup -j``,
                detached; the tmpfs unmounted); throughput in IOPS (fio's JSON jobs[0].read.iops)

Each load runs bare, under ``python3 -m dpuprof record -q -o X.rec -- LOAD`` (once per --tree,
default this checkout; with --light LABEL also ``record --light``) and under ``perf record -a -g
-F 99 -o perf.data -- LOAD``. Every round runs every load under every condition, the conditions in
an order rotated by one each round (the trees interleave within a round). --tree runs dpuprof from
another checkout (cwd and PYTHONPATH = PATH), e.g. the old commit beside this one: ``git worktree
add /tmp/old 89a65ae`` and ``--tree old=/tmp/old --tree new=.``.

Measured, in CPU seconds, per run (kernel.bpf_stats_enabled=1 for the whole script, the old value
restored at the end):

- the workload's own CPU: utime + stime of each of its processes from ``wait4`` in together.py (the
  kernel's accounting, complete to the processes' last instruction);
- the machine's busy CPU over the workload's run: /proc/stat's user + nice + system + irq + softirq
  of every CPU, read by together.py just before the first tool starts and after the last is reaped;
- BPF: each of the recorder's programs' run_time_ns and run_cnt from /proc/RECORDER/fdinfo (names
  from ``bpftool prog show``), sampled every --period s while the command runs; the deltas from the
  first to the last sample that saw the command give ns per event, events per second and % of one
  core, and the BPF seconds of the run are that rate over the command's whole wall time;
- the recorder's own CPU: utime + stime of the recorder process (every thread, not the children it
  reaped) from /proc/PID/stat read after it exited and before it is reaped (suite/runner.py's
  run_cmd ``exit_stat``), less its CPU when the command started (start-up: loading the probes,
  reported apart); the drain and the final write after the command ended (tail) are included;
- perf's own CPU the same way (its user-space process; its sampling in the kernel is charged to the
  interrupted tasks and is not in this number);
- the recording's size (X.rec and its side files; perf.data for perf) per minute of the command;
- counts, under dpuprof: what the recording counted of the load against the tool's own count, read
  from X.rec's tables (SQLite, read-only) before it is removed. iperf3: ``net_io`` rx bytes on
  ``lo`` against the bytes its client sent (its JSON intervals, the omitted first second included:
  that second crossed ``lo`` too; end.sum_received.bytes, which leaves it out, is kept in the JSON
  as iperf3_received_bytes); ``lo`` also carries the packets' headers, the control connection and
  any other loopback traffic. fio: ``block_io`` reads on the loop device against fio's
  jobs[0].read.total_ios.

Cost = (BPF + recorder) / the workload's own CPU, where the workload's own CPU is its processes'
CPU less the BPF seconds (the kernel charges a program's run to the task it interrupted, mostly the
workload's: taking it all out is the conservative side, as the suite's workload_share does). On fio
the denominator is the machine's busy CPU instead, because most of the work of a read is done by
the loop device's kernel workers, charged to no fio process: the busy CPU over the workload's run
less the recorder's CPU in that window (its CPU less the tail), this script's own CPU during the run
(its /proc sampler thread) and the BPF seconds; what remains is fio, the loop workers, interrupts
and whatever else ran (nothing much, on a quiet machine). perf's cost is its own CPU over the same
denominator (BPF = 0). Medians over rounds.

Targets (issue 32): cost <= 1 % on iperf3 and wake-4x128 (of the workload's CPU) and on fio (of the
machine's busy CPU), ``--light`` <= 0.3 % on the same; recording MB/min at wake-4x128 <= 3x that at
wake-2x8; bytes and I/Os counted within 1 % of the tools' own counts.

Prints Markdown to stdout (progress on stderr); --json writes every run and the summary. Scratch
files (and fio's tmpfs) go to a temp dir (--scratch), removed at the end; nothing is written inside
the repository. Run it as root on a quiet machine: the load average before and after is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # dpuprof from this checkout (the suite's statistics)
sys.path.insert(0, str(BENCH))  # suite

from suite.config import ROOT, log  # noqa: E402
from suite.runner import PROG_TYPES, bpf_stats, condition_cmd, record_cmd, run_cmd  # noqa: E402
from suite.stats import median  # noqa: E402
from hot_loads_md import _f, _thr, render  # noqa: E402
from hot_workloads import Load, loop_device, make_loads, recorded_count  # noqa: E402

LOADS = ("iperf3", "wake-4x128", "wake-2x8", "fio")
TARGET_COST_PCT = 1.0        # dpuprof record, % of the workload's CPU (fio: of the machine's busy CPU)
TARGET_LIGHT_COST_PCT = 0.3  # record --light, the same
TARGET_COST_LOADS = ("iperf3", "wake-4x128", "fio")
TARGET_SIZE_RATIO = 3.0
TARGET_COUNT_PCT = 1.0       # bytes, packets and I/Os the recording counts, against the tools' own
SIZE_PAIR = ("wake-2x8", "wake-4x128")  # 32x the threads
MACHINE_COST_LOADS = ("fio",)  # cost over the machine's busy CPU (machine_cost_pct)


# --- pure helpers (tests/test_benchmarks_hot_loads.py) -------------------------------------------

def parse_trees(specs: list[str] | None, default: Path = ROOT) -> dict[str, Path]:
    """--tree values (``LABEL=PATH`` or ``PATH``, labelled by the directory's name) as {label: path};
    this checkout as ``dpuprof`` when there are none. Labels must differ."""
    if not specs:
        return {"dpuprof": default}
    out: dict[str, Path] = {}
    for spec in specs:
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        p = Path(path).resolve()
        label = label or p.name
        if label in out:
            raise ValueError(f"--tree label {label!r} given twice (use LABEL=PATH)")
        out[label] = p
    return out


def rotated(items: list, r: int) -> list:
    """``items`` rotated left by ``r`` (round r's order)."""
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def program_rows(first: dict, last: dict, names: dict, span_s: float) -> dict[str, dict]:
    """Per BPF program name (programs of one name summed): run_time_ns and run_cnt from ``first`` to
    ``last`` (RssSampler.bpf_first/bpf_last: {prog_id: {"type", "run_time_ns", "run_cnt"}}; a program
    absent from ``first`` counts from 0), ns per event, events per second and % of one core over
    ``span_s``. ``names``: {prog_id: name} (bpftool), else ``prog<ID>``."""
    out: dict[str, dict] = {}
    for pid, now in last.items():
        was = first.get(pid, {"run_time_ns": 0, "run_cnt": 0})
        name = names.get(pid) or f"prog{pid}"
        row = out.setdefault(name, {"type": PROG_TYPES.get(now["type"], str(now["type"])),
                                    "run_time_ns": 0, "run_cnt": 0})
        row["run_time_ns"] += now["run_time_ns"] - was["run_time_ns"]
        row["run_cnt"] += now["run_cnt"] - was["run_cnt"]
    for row in out.values():
        row["ns_per_event"] = row["run_time_ns"] / row["run_cnt"] if row["run_cnt"] else None
        row["events_per_s"] = row["run_cnt"] / span_s if span_s > 0 else None
        row["core_pct"] = 100 * row["run_time_ns"] / 1e9 / span_s if span_s > 0 else None
    return out


def cost_pct(bpf_s: float | None, recorder_s: float | None, workload_cpu_s: float | None) -> float | None:
    """(BPF + recorder) / (the workload's CPU less the BPF seconds), %; perf: bpf_s = 0."""
    if recorder_s is None or not workload_cpu_s:
        return None
    own = workload_cpu_s - (bpf_s or 0.0)
    return 100 * ((bpf_s or 0.0) + recorder_s) / own if own > 0 else None


def machine_cost_pct(bpf_s: float | None, recorder_s: float | None, recorder_in_run_s: float | None,
                     busy_s: float | None, bench_s: float = 0.0) -> float | None:
    """(BPF + recorder) / the rest of the machine's busy CPU over the workload's run, %: ``busy_s``
    (together.py's /proc/stat busy seconds from the first tool's start to the last one's end) less
    the recorder's CPU in that window (``recorder_in_run_s``; its whole CPU where unknown), this
    script's own (``bench_s``: its /proc sampler) and the BPF seconds (charged to whatever task
    they interrupted). For fio, whose reads are served by the loop device's kernel workers, CPU
    charged to no fio process. perf: bpf_s = 0."""
    if recorder_s is None or not busy_s:
        return None
    rest = busy_s - (recorder_s if recorder_in_run_s is None else recorder_in_run_s) - bench_s - (bpf_s or 0.0)
    return 100 * ((bpf_s or 0.0) + recorder_s) / rest if rest > 0 else None


def count_ratio(recorded: int | None, tool: int | None) -> float | None:
    """What the recording counted over what the tool counted (None where either is missing)."""
    return recorded / tool if recorded is not None and tool else None


def summarize(runs: list[dict]) -> dict:
    """Medians over rounds per load and condition, each program's medians, the throughput against
    the same round's bare run, and the targets' verdicts."""
    loads: dict[str, dict] = {}
    bare = {(r["load"], r["round"]): r.get("throughput") for r in runs if r["condition"] == "bare"}
    for r in runs:
        cell = loads.setdefault(r["load"], {}).setdefault(r["condition"], {"runs": []})
        cell["runs"].append(r)
    keys = ("throughput", "workload_cpu_s", "wall_s", "bpf_s", "profiler_s", "tail_s", "startup_s", "cost_pct",
            "mb_per_min", "bpf_core_pct", "host_busy_s", "tool_count", "recorded_count", "count_ratio")
    for per_cond in loads.values():
        for cond, cell in per_cond.items():
            rs = [r for r in cell.pop("runs") if "error" not in r]
            cell["rounds"] = len(rs)
            for k in keys:
                cell[k] = median([r.get(k) for r in rs])
            b = [(r.get("throughput"), bare.get((r["load"], r["round"]))) for r in rs]
            cell["vs_bare"] = median([t / x for t, x in b if t and x])
            progs: dict[str, dict] = {}
            for r in rs:
                for name, p in (r.get("programs") or {}).items():
                    acc = progs.setdefault(name, {"type": p["type"], "events_per_s": [], "ns_per_event": [],
                                                  "core_pct": []})
                    for k in ("events_per_s", "ns_per_event", "core_pct"):
                        acc[k].append(p.get(k))
            cell["programs"] = {n: {"type": p["type"], **{k: median(v) for k, v in p.items() if k != "type"}}
                                for n, p in progs.items()}
    return {"loads": loads, "verdicts": verdicts(loads)}


def _recorder(cond: str) -> bool:
    return cond.startswith(("dpuprof:", "dpuprof-light:"))


def verdicts(loads: dict) -> list[dict]:
    """Issue 32's targets over summarize's cells: cost (record <= 1 %, --light <= 0.3 %) on iperf3,
    wake-4x128 (of the workload's CPU) and fio (of the machine's busy CPU); MB/min at wake-4x128
    <= 3x that at wake-2x8; what the recording counted within 1 % of the tool's own count."""
    out = []
    for load in TARGET_COST_LOADS:
        of = "the machine's busy CPU" if load in MACHINE_COST_LOADS else "the workload's CPU"
        for cond, cell in sorted(loads.get(load, {}).items()):
            if _recorder(cond):
                target = TARGET_LIGHT_COST_PCT if cond.startswith("dpuprof-light:") else TARGET_COST_PCT
                c = cell.get("cost_pct")
                out.append({"target": f"{load} cost <= {target:g} % of {of}", "condition": cond, "value": c,
                            "met": None if c is None else c <= target})
    small, big = (loads.get(n, {}) for n in SIZE_PAIR)
    for cond in sorted(set(small) & set(big)):
        if _recorder(cond):
            a, b = small[cond].get("mb_per_min"), big[cond].get("mb_per_min")
            ratio = b / a if a and b else None
            out.append({"target": f"MB/min at {SIZE_PAIR[1]} <= {TARGET_SIZE_RATIO:g}x that at {SIZE_PAIR[0]}",
                        "condition": cond, "value": ratio,
                        "met": None if ratio is None else ratio <= TARGET_SIZE_RATIO})
    for load, per_cond in loads.items():
        for cond, cell in sorted(per_cond.items()):
            if _recorder(cond) and cell.get("tool_count") is not None:
                r = cell.get("count_ratio")
                out.append({"target": f"{load}: counted / the tool's own within {TARGET_COUNT_PCT:g} %",
                            "condition": cond, "value": r,
                            "met": None if r is None else abs(r - 1) * 100 <= TARGET_COUNT_PCT})
    return out


# --- measuring -----------------------------------------------------------------------------------

def run_once(load: Load, cond: str, trees: dict[str, Path], scratch: Path, rnd: int, period: float,
             timeout: float) -> dict:
    """One run of ``load`` under ``cond`` (bare, perf, dpuprof:LABEL): its row (see the docstring)."""
    work = Path(tempfile.mkdtemp(prefix=f"{load.name}-{cond.replace(':', '-')}-", dir=scratch))
    row: dict = {"load": load.name, "condition": cond, "round": rnd}
    try:
        cmd, result = load.make(work)
        dp = _recorder(cond)
        cwd, env = ROOT, None
        if dp:
            tree = trees[cond.split(":", 1)[1]]
            full, cwd = record_cmd(work / "x.rec", cmd), tree
            if cond.startswith("dpuprof-light:"):
                full.insert(full.index("--"), "--light")
            env = {**os.environ, "PYTHONPATH": str(tree)}
        else:
            full = condition_cmd(cond, cmd, work)
        self0 = _self_cpu()
        res, sampler = run_cmd(full, timeout=timeout, rss=cond != "bare", period=period, bpf=dp, cwd=cwd,
                               env=env, exit_stat=True)
        row["bench_s"] = _self_cpu() - self0  # this script's sampler thread: busy CPU that is no one's load
        if res.returncode != 0:
            raise RuntimeError(f"exit {res.returncode}: {res.stderr[-600:]}")
        row.update(result())
        if sampler is not None:
            _profiler(row, load, work, sampler, res.own_cpu_s, dp)
    except Exception as exc:  # noqa: BLE001 -- one failed run is reported, the rest go on
        row["error"] = f"{type(exc).__name__}: {exc}"
        log(f"{load.name} under {cond} failed: {row['error']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _profiler(row: dict, load: Load, work: Path, sampler, own_cpu_s: float | None, dp: bool) -> None:
    """Add to ``row`` the recorder's (perf's) CPU, BPF seconds, cost, recording size and, for dpuprof,
    what the recording counted of the load (read before ``work`` is removed)."""
    before = sampler.cpu_before_child()
    row["startup_s"] = before
    row["profiler_s"] = own_cpu_s - before if own_cpu_s is not None else None
    seen = [x for x in sampler.samples if x[4]]  # samples that saw the command running
    if seen and own_cpu_s is not None:
        row["tail_s"] = own_cpu_s - seen[-1][3]  # after the command ended: drain, final write
    bpf_s = 0.0
    if dp:
        span = sampler.bpf_span[1] - sampler.bpf_span[0]
        progs = program_rows(sampler.bpf_first or {}, sampler.bpf_last, sampler.prog_names, span)
        row["programs"] = progs
        row["bpf_span_s"] = span
        if span > 0:
            ns = sum(p["run_time_ns"] for p in progs.values())
            row["bpf_core_pct"] = 100 * ns / 1e9 / span
            row["bpf_s"] = ns / 1e9 * row["wall_s"] / span  # the rate over the command's whole run
        bpf_s = row.get("bpf_s")
        size = sum(p.stat().st_size for p in work.glob("x.rec*"))
        if load.counted:
            row["recorded_count"] = recorded_count(work / "x.rec", *load.counted[1:])
            row["count_ratio"] = count_ratio(row["recorded_count"], row.get("tool_count"))
    else:
        size = (work / "perf.data").stat().st_size
    if load.name in MACHINE_COST_LOADS:
        in_run = None if row["profiler_s"] is None or "tail_s" not in row else row["profiler_s"] - row["tail_s"]
        row["cost_pct"] = machine_cost_pct(bpf_s, row["profiler_s"], in_run, row.get("host_busy_s"),
                                           row.get("bench_s", 0.0))
    else:
        row["cost_pct"] = cost_pct(bpf_s, row["profiler_s"], row["workload_cpu_s"])
    row["bytes"] = size
    row["mb_per_min"] = size / 1e6 / (row["wall_s"] / 60)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--duration", type=int, default=20, help="seconds per load (default 20)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each every load x condition (default 3)")
    ap.add_argument("--tree", action="append", metavar="[LABEL=]PATH",
                    help="run dpuprof from this checkout (repeatable; default: this one)")
    ap.add_argument("--loads", default=",".join(LOADS), help=f"comma-separated (default {','.join(LOADS)})")
    ap.add_argument("--light", action="append", metavar="LABEL", default=[],
                    help="also run that --tree's dpuprof with `record --light` (condition dpuprof-light:LABEL)")
    ap.add_argument("--no-perf", action="store_true", help="leave out the perf record condition")
    ap.add_argument("--period", type=float, default=0.1, help="/proc sampling period of the profiler, s")
    ap.add_argument("--json", type=Path, help="write every run and the summary here")
    ap.add_argument("--scratch", type=Path, default=None, help="parent of the temp dir (default: $TMPDIR)")
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if os.geteuid() != 0:
        print("hot_loads.py needs root (dpuprof record, perf record -a, BPF statistics, fio's loop device): "
              "run it with sudo", file=sys.stderr)
        return 2
    names = [x for x in args.loads.split(",") if x]
    loads = make_loads(names, args.duration)  # names checked before anything is set up
    try:
        trees = parse_trees(args.tree)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    problem = _problem(args, names, trees)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not shutil.which("bpftool"):
        log("bpftool not found (apt-get install bpftool): BPF programs are named by id")
    conds = ["bare", *(f"dpuprof:{label}" for label in trees), *(f"dpuprof-light:{label}" for label in args.light),
             *(["perf"] * (not args.no_perf))]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: restore bpf_stats_enabled, tear down
    scratch = Path(tempfile.mkdtemp(prefix="dpuprof-hot-", dir=args.scratch))
    meta = {"command": " ".join(["sudo python3 benchmarks/hot_loads.py", *(argv if argv is not None else sys.argv[1:])]),
            "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "duration_s": args.duration, "rounds": args.rounds, "cpus": os.cpu_count(),
            "kernel": platform.release(), "load_before": os.getloadavg()[0],
            "trees": {label: f"{p} ({_commit(p)})" for label, p in trees.items()}, "conditions": conds}
    runs: list[dict] = []
    try:
        with contextlib.ExitStack() as stack:
            dev = stack.enter_context(loop_device(scratch)) if "fio" in names else None
            loads = make_loads(names, args.duration, fio_device=dev)
            meta.update({"commands": {x.name: x.what for x in loads}, "units": {x.name: x.unit for x in loads},
                         "counted": {x.name: x.counted[0] for x in loads if x.counted}})
            _measure(loads, conds, trees, scratch, args, runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    meta["load_after"] = os.getloadavg()[0]
    summary = summarize(runs)
    print(render(summary, meta), end="")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1, default=str))
        log(f"wrote {args.json}")
    return 1 if any("error" in r for r in runs) else 0


def _problem(args, names: list[str], trees: dict[str, Path]) -> str | None:
    """Why the run cannot start (a missing tool, a --tree that is no checkout, an unknown --light)."""
    need = (["perf"] * (not args.no_perf) + ["iperf3"] * ("iperf3" in names)
            + ["fio", "losetup", "mount", "umount"] * ("fio" in names))
    missing = [t for t in need if not shutil.which(t)]
    bad = [str(p) for p in trees.values() if not (p / "dpuprof" / "__init__.py").is_file()]
    if missing or bad:
        return (f"missing tools: {missing} (apt-get install linux-perf iperf3 fio mount); "
                f"not dpuprof checkouts: {bad}")
    unknown = [label for label in args.light if label not in trees]
    if unknown:
        return f"--light {unknown[0]}: no --tree with that label ({', '.join(trees)})"
    return None


def _measure(loads: list[Load], conds: list[str], trees: dict[str, Path], scratch: Path, args, runs: list) -> None:
    """Every round: every load under every condition (rotated by the round), rows appended to ``runs``
    as they come (a Ctrl-C keeps those measured), with kernel.bpf_stats_enabled=1 meanwhile."""
    timeout = 4 * args.duration + 300
    with bpf_stats() as enabled:
        if not enabled:
            log("kernel.bpf_stats_enabled could not be set: no BPF run times")
        for r in range(args.rounds):
            for load in loads:
                for cond in rotated(conds, r):
                    t0 = time.time()
                    row = run_once(load, cond, trees, scratch, r, args.period, timeout)
                    runs.append(row)
                    count = (f", counted/tool {_f(row.get('count_ratio'), '{:.4f}')}"
                             if row.get("recorded_count") is not None else "")
                    log(f"round {r + 1}/{args.rounds} {load.name} {cond}: {time.time() - t0:.1f} s, "
                        f"cost {_f(row.get('cost_pct'))} %, throughput {_thr(row.get('throughput'))} "
                        f"{load.unit}{count}")


def _commit(path: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "no git"
    except (OSError, subprocess.SubprocessError):
        return "no git"


if __name__ == "__main__":
    sys.exit(main())
