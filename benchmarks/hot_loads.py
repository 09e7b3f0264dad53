#!/usr/bin/env python3
"""What recording costs on packet- and thread-heavy loads (issue 20), side by side with perf.

    sudo python3 benchmarks/hot_loads.py [--duration S] [--rounds N] [--tree [LABEL=]PATH ...]
                                         [--loads iperf3,wake-4x128,wake-2x8] [--json OUT]

Loads (each lasts --duration seconds; --loads picks some):

    iperf3      iperf3 loopback TCP flood through benchmarks/together.py, the same command as the
                suite's overhead run: server pinned to the last CPU, client to the first (iperf3 -A),
                because where the scheduler puts the pair moves loopback throughput more than
                anything measured here; throughput in GB/s received
    wake-PxT    P processes of benchmarks/wake_threads.py, T threads each hashing 64 KiB (sha256 over
                a reused buffer) and sleeping 1 ms in a loop, started together through together.py;
                (P, T) = (4, 128) and (2, 8), 32x the threads; throughput in hashes/s

Each load runs bare, under ``python3 -m dpuprof record -q -o X.rec -- LOAD`` (once per --tree,
default this checkout) and under ``perf record -a -g -F 99 -o perf.data -- LOAD``. Every round runs
every load under every condition, the conditions in an order rotated by one each round (the trees
interleave within a round). --tree runs dpuprof from another checkout (cwd and PYTHONPATH = PATH),
e.g. the old commit beside this one: ``git worktree add /tmp/old 89a65ae`` and
``--tree old=/tmp/old --tree new=.``.

Measured, in CPU seconds, per run (kernel.bpf_stats_enabled=1 for the whole script, the old value
restored at the end):

- the workload's own CPU: utime + stime of each of its processes from ``wait4`` in together.py (the
  kernel's accounting, complete to the processes' last instruction);
- BPF: each of the recorder's programs' run_time_ns and run_cnt from /proc/RECORDER/fdinfo (names
  from ``bpftool prog show``), sampled every --period s while the command runs; the deltas from the
  first to the last sample that saw the command give ns per event, events per second and % of one
  core, and the BPF seconds of the run are that rate over the command's whole wall time;
- the recorder's own CPU: utime + stime of the recorder process (every thread, not the children it
  reaped) from /proc/PID/stat read after it exited and before it is reaped (suite/runner.py's
  run_cmd ``exit_stat``), less its CPU when the command started (start-up: loading the probes,
  reported apart); the drain and the final write after the command ended are included;
- perf's own CPU the same way (its user-space process; its sampling in the kernel is charged to the
  interrupted tasks and is not in this number);
- the recording's size (X.rec and its side files; perf.data for perf) per minute of the command.

Cost = (BPF + recorder) / the workload's own CPU, where the workload's own CPU is its processes'
CPU less the BPF seconds (the kernel charges a program's run to the task it interrupted, mostly the
workload's: taking it all out is the conservative side, as the suite's workload_share does). perf's
cost is its own CPU over the workload's. Medians over rounds. Targets (issue 20): cost <= 2 % on
iperf3 and on wake-4x128; recording MB/min at wake-4x128 <= 4x that at wake-2x8.

Prints Markdown to stdout (progress on stderr); --json writes every run and the summary. Scratch
files go to a temp dir (--scratch), removed at the end; nothing is written inside the repository.
Run it as root on a quiet machine: the load average before and after is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # dpuprof from this checkout (the suite's statistics)
sys.path.insert(0, str(BENCH))  # suite

from suite.config import PYTHON, ROOT, TOGETHER, log  # noqa: E402
from suite.runner import PROG_TYPES, bpf_stats, condition_cmd, record_cmd, run_cmd  # noqa: E402
from suite.stats import median  # noqa: E402
from suite.workloads import iperf3_workload, iperf3_pinning  # noqa: E402

WAKE = BENCH / "wake_threads.py"
LOADS = ("iperf3", "wake-4x128", "wake-2x8")
TARGET_COST_PCT = 2.0
TARGET_SIZE_RATIO = 4.0
SIZE_PAIR = ("wake-2x8", "wake-4x128")  # 32x the threads


@dataclass
class Load:
    name: str
    unit: str        # throughput's unit
    what: str        # the command, for the report
    make: Callable   # (work dir) -> (cmd, parse() -> {"throughput", "workload_cpu_s", "wall_s"})


def _tools(work: Path) -> list[dict]:
    return json.loads((work / "truth.json").read_text())["tools"]


def iperf3_load(seconds: int) -> Load:
    """The suite's iperf3 workload (suite/workloads.py); throughput in GB/s received."""
    workload = iperf3_workload(seconds)

    def make(work: Path):
        cmd, parse = workload.make(work)

        def result() -> dict:
            gbit_s, _gb = parse("")
            tools = _tools(work)
            return {"throughput": gbit_s / 8, "workload_cpu_s": sum(t["cpu_s"] for t in tools),
                    "wall_s": max(t["wall_s"] for t in tools)}
        return cmd, result
    pin_s, pin_c = iperf3_pinning()
    what = (f"iperf3 -s -1 {' '.join(pin_s)} & iperf3 -c 127.0.0.1 {' '.join(pin_c)} -J -O 1 -t {seconds + 1}"
            .replace("  ", " "))
    return Load("iperf3", "GB/s", what, make)


def wake_load(procs: int, threads: int, seconds: int) -> Load:
    """``procs`` wake_threads.py processes of ``threads`` threads; throughput in hashes/s."""
    def make(work: Path):
        spec = {"tools": [{"name": f"wake{i}", "cmd": [PYTHON, str(WAKE), "--threads", str(threads),
                                                       "--duration", str(seconds)]} for i in range(procs)]}
        (work / "spec.json").write_text(json.dumps(spec))

        def result() -> dict:
            tools = _tools(work)
            outs = [json.loads([ln for ln in t["stdout"].splitlines() if ln.startswith("{")][-1]) for t in tools]
            wall = max(t["wall_s"] for t in tools)
            return {"throughput": sum(o["hashes"] for o in outs) / wall,
                    "workload_cpu_s": sum(t["cpu_s"] for t in tools), "wall_s": wall}
        return [*TOGETHER, str(work / "spec.json"), str(work / "truth.json")], result
    return Load(f"wake-{procs}x{threads}", "hashes/s",
                f"{procs} x python3 benchmarks/wake_threads.py --threads {threads} --duration {seconds}", make)


def make_loads(names: list[str], seconds: int) -> list[Load]:
    out = []
    for name in names:
        if name == "iperf3":
            out.append(iperf3_load(seconds))
        elif name.startswith("wake-") and "x" in name:
            p, t = name[5:].split("x", 1)
            out.append(wake_load(int(p), int(t), seconds))
        else:
            raise SystemExit(f"unknown load {name!r} (iperf3, wake-PxT)")
    return out


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


def summarize(runs: list[dict]) -> dict:
    """Medians over rounds per load and condition, each program's medians, the throughput against
    the same round's bare run, and the targets' verdicts."""
    loads: dict[str, dict] = {}
    bare = {(r["load"], r["round"]): r.get("throughput") for r in runs if r["condition"] == "bare"}
    for r in runs:
        cell = loads.setdefault(r["load"], {}).setdefault(r["condition"], {"runs": []})
        cell["runs"].append(r)
    keys = ("throughput", "workload_cpu_s", "wall_s", "bpf_s", "profiler_s", "tail_s", "startup_s", "cost_pct",
            "mb_per_min", "bpf_core_pct")
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
    verdicts = []
    for load in ("iperf3", "wake-4x128"):
        for cond, cell in sorted(loads.get(load, {}).items()):
            if cond.startswith(("dpuprof:", "dpuprof-light:")):
                c = cell.get("cost_pct")
                verdicts.append({"target": f"{load} cost <= {TARGET_COST_PCT:g} % of the workload's CPU",
                                 "condition": cond, "value": c,
                                 "met": None if c is None else c <= TARGET_COST_PCT})
    small, big = (loads.get(n, {}) for n in SIZE_PAIR)
    for cond in sorted(set(small) & set(big)):
        if cond.startswith(("dpuprof:", "dpuprof-light:")):
            a, b = small[cond].get("mb_per_min"), big[cond].get("mb_per_min")
            ratio = b / a if a and b else None
            verdicts.append({"target": f"MB/min at {SIZE_PAIR[1]} <= {TARGET_SIZE_RATIO:g}x that at {SIZE_PAIR[0]}",
                             "condition": cond, "value": ratio,
                             "met": None if ratio is None else ratio <= TARGET_SIZE_RATIO})
    return {"loads": loads, "verdicts": verdicts}


def _f(x, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _thr(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def render(summary: dict, meta: dict) -> str:
    """The Markdown report of ``summary`` (summarize) and ``meta`` (machine, trees, loads, options)."""
    L = ["# Recording cost on hot loads (issue 20)", "",
         f"{meta.get('rounds')} round(s) of {meta.get('duration_s')} s per load and condition; "
         f"{meta.get('cpus')} CPUs, kernel {meta.get('kernel')}; load average "
         f"{_f(meta.get('load_before'))} before, {_f(meta.get('load_after'))} after. Medians over rounds.", ""]
    if meta.get("command"):
        L[-1:-1] = ["", f"Measured on {meta.get('date_utc')} by `{meta['command']}`."]
    for label, tree in (meta.get("trees") or {}).items():
        L.append(f"- `dpuprof:{label}`: {tree}")
    for name, what in (meta.get("commands") or {}).items():
        L.append(f"- {name}: `{what}`")
    L += ["", "## Cost", "",
          "CPU seconds per run. Cost = (BPF + recorder) / (workload - BPF) for dpuprof; perf's own CPU / "
          "workload for perf (its in-kernel sampling is not in it). Tail: the part of the recorder's "
          "(perf's) CPU after the command ended (final drain and write), in the cost. Start-up: its CPU "
          "before the command started, not in the cost.", "",
          "| load | condition | throughput | vs bare | workload CPU s | BPF s | recorder / perf s | tail s "
          "| cost % | start-up s | MB/min |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for load, per_cond in summary["loads"].items():
        unit = (meta.get("units") or {}).get(load, "")
        for cond, c in per_cond.items():
            L.append(f"| {load} | {cond} | {_thr(c['throughput'])} {unit} | {_f(c['vs_bare'], '{:.3f}')} "
                     f"| {_f(c['workload_cpu_s'])} | {_f(c['bpf_s'], '{:.3f}')} | {_f(c['profiler_s'], '{:.3f}')} "
                     f"| {_f(c['tail_s'], '{:.3f}')} | {_f(c['cost_pct'])} | {_f(c['startup_s'])} | {_f(c['mb_per_min'], '{:.3f}')} |")
    L += ["", "## BPF programs", "",
          "Per program, while the command ran: ns per event and events per second (the numbers the "
          "probes' header comments quote), % of one core. Programs that did not run are left out "
          "(they are in the JSON).", "",
          "| load | condition | program | type | events/s | ns/event | % of a core |",
          "|---|---|---|---|---:|---:|---:|"]
    for load, per_cond in summary["loads"].items():
        for cond, c in per_cond.items():
            progs = [(n, p) for n, p in c.get("programs", {}).items() if p["events_per_s"]]
            for name, p in sorted(progs, key=lambda kv: -(kv[1]["core_pct"] or 0)):
                L.append(f"| {load} | {cond} | {name} | {p['type']} | {_thr(p['events_per_s'])} "
                         f"| {_f(p['ns_per_event'], '{:.0f}')} | {_f(p['core_pct'])} |")
    L += ["", "## Targets", "", "| target | condition | value | met |", "|---|---|---:|---|"]
    for v in summary["verdicts"]:
        met = "not measured" if v["met"] is None else ("yes" if v["met"] else "**no**")
        L.append(f"| {v['target']} | {v['condition']} | {_f(v['value'])} | {met} |")
    return "\n".join(L) + "\n"


# --- measuring -----------------------------------------------------------------------------------

def run_once(load: Load, cond: str, trees: dict[str, Path], scratch: Path, rnd: int, period: float,
             timeout: float) -> dict:
    """One run of ``load`` under ``cond`` (bare, perf, dpuprof:LABEL): its row (see the docstring)."""
    work = Path(tempfile.mkdtemp(prefix=f"{load.name}-{cond.replace(':', '-')}-", dir=scratch))
    row: dict = {"load": load.name, "condition": cond, "round": rnd}
    try:
        cmd, result = load.make(work)
        dp = cond.startswith(("dpuprof:", "dpuprof-light:"))
        cwd, env = ROOT, None
        if dp:
            tree = trees[cond.split(":", 1)[1]]
            full, cwd = record_cmd(work / "x.rec", cmd), tree
            if cond.startswith("dpuprof-light:"):
                full.insert(full.index("--"), "--light")
            env = {**os.environ, "PYTHONPATH": str(tree)}
        else:
            full = condition_cmd(cond, cmd, work)
        res, sampler = run_cmd(full, timeout=timeout, rss=cond != "bare", period=period, bpf=dp, cwd=cwd,
                               env=env, exit_stat=True)
        if res.returncode != 0:
            raise RuntimeError(f"exit {res.returncode}: {res.stderr[-600:]}")
        row.update(result())
        if sampler is None:
            return row
        before = sampler.cpu_before_child()
        row["startup_s"] = before
        row["profiler_s"] = res.own_cpu_s - before if res.own_cpu_s is not None else None
        seen = [x for x in sampler.samples if x[4]]  # samples that saw the command running
        if seen and res.own_cpu_s is not None:
            row["tail_s"] = res.own_cpu_s - seen[-1][3]  # after the command ended: drain, final write
        if dp:
            span = sampler.bpf_span[1] - sampler.bpf_span[0]
            progs = program_rows(sampler.bpf_first or {}, sampler.bpf_last, sampler.prog_names, span)
            row["programs"] = progs
            row["bpf_span_s"] = span
            if span > 0:
                ns = sum(p["run_time_ns"] for p in progs.values())
                row["bpf_core_pct"] = 100 * ns / 1e9 / span
                row["bpf_s"] = ns / 1e9 * row["wall_s"] / span  # the rate over the command's whole run
            size = sum(p.stat().st_size for p in work.glob("x.rec*"))
            row["cost_pct"] = cost_pct(row.get("bpf_s"), row["profiler_s"], row["workload_cpu_s"])
        else:
            size = (work / "perf.data").stat().st_size
            row["cost_pct"] = cost_pct(0.0, row["profiler_s"], row["workload_cpu_s"])
        row["bytes"] = size
        row["mb_per_min"] = size / 1e6 / (row["wall_s"] / 60)
    except Exception as exc:  # noqa: BLE001 -- one failed run is reported, the rest go on
        row["error"] = f"{type(exc).__name__}: {exc}"
        log(f"{load.name} under {cond} failed: {row['error']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


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
        print("hot_loads.py needs root (dpuprof record, perf record -a, BPF statistics): run it with sudo",
              file=sys.stderr)
        return 2
    loads = make_loads([x for x in args.loads.split(",") if x], args.duration)
    try:
        trees = parse_trees(args.tree)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    need = ["perf"] * (not args.no_perf) + ["iperf3"] * any(x.name == "iperf3" for x in loads)
    missing = [t for t in need if not shutil.which(t)]
    bad = [str(p) for p in trees.values() if not (p / "dpuprof" / "__init__.py").is_file()]
    if missing or bad:
        print(f"missing tools: {missing} (apt-get install linux-perf iperf3); not dpuprof checkouts: {bad}",
              file=sys.stderr)
        return 2
    if not shutil.which("bpftool"):
        log("bpftool not found (apt-get install bpftool): BPF programs are named by id")
    unknown = [label for label in args.light if label not in trees]
    if unknown:
        print(f"--light {unknown[0]}: no --tree with that label ({', '.join(trees)})", file=sys.stderr)
        return 2
    conds = ["bare", *(f"dpuprof:{label}" for label in trees), *(f"dpuprof-light:{label}" for label in args.light),
             *(["perf"] * (not args.no_perf))]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: restore bpf_stats_enabled
    scratch = Path(tempfile.mkdtemp(prefix="dpuprof-hot-", dir=args.scratch))
    meta = {"command": " ".join(["sudo python3 benchmarks/hot_loads.py", *(argv if argv is not None else sys.argv[1:])]),
            "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "duration_s": args.duration, "rounds": args.rounds, "cpus": os.cpu_count(),
            "kernel": platform.release(), "load_before": os.getloadavg()[0],
            "trees": {label: f"{p} ({_commit(p)})" for label, p in trees.items()},
            "commands": {x.name: x.what for x in loads}, "units": {x.name: x.unit for x in loads},
            "conditions": conds}
    runs = []
    timeout = 4 * args.duration + 300
    try:
        with bpf_stats() as enabled:
            if not enabled:
                log("kernel.bpf_stats_enabled could not be set: no BPF run times")
            for r in range(args.rounds):
                for load in loads:
                    for cond in rotated(conds, r):
                        t0 = time.time()
                        row = run_once(load, cond, trees, scratch, r, args.period, timeout)
                        runs.append(row)
                        log(f"round {r + 1}/{args.rounds} {load.name} {cond}: {time.time() - t0:.1f} s, "
                            f"cost {_f(row.get('cost_pct'))} %, throughput {_thr(row.get('throughput'))} {load.unit}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    meta["load_after"] = os.getloadavg()[0]
    summary = summarize(runs)
    print(render(summary, meta), end="")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1, default=str))
        log(f"wrote {args.json}")
    return 1 if any("error" in r for r in runs) else 0


def _commit(path: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "no git"
    except (OSError, subprocess.SubprocessError):
        return "no git"


if __name__ == "__main__":
    sys.exit(main())
