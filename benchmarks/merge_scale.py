#!/usr/bin/env python3
"""Scale of the job view: ``dpuprof report`` over N node recordings (target: 64 nodes in <= 30 s).

The nodes are copies of one real fixture, each with its host renamed in the meta table (sqlite3),
in a temporary directory; ``--projected K`` runs the real ``dpuprof project`` on the first K of
them (not timed), so the job view reads K stored projections and says that the others have none.
Each timed run is a fresh ``python -m dpuprof report node-*.rec`` process, measured with
``os.wait4``: wall time, CPU seconds (user + system of the report process and its worker
processes) and the peak RSS of the largest of them (Linux's ru_maxrss over the waited-for tree).
One untimed run first warms the page cache and the .pyc files.

    python3 benchmarks/merge_scale.py                       # 16 and 64 nodes, terminal output
    python3 benchmarks/merge_scale.py --nodes 64 --projected 8 --md benchmarks/MERGE_SCALE.md

The machine may be shared: the load average before and after each run is printed beside the
times, and CPU seconds, which a busy neighbour hardly changes, are the number to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "ddp-plain" / "recording.rec"
TARGET_S = 30.0
DPUPROF = [sys.executable, "-m", "dpuprof"]


def make_nodes(src: Path, tmp: Path, n: int) -> list[Path]:
    """``n`` copies of ``src`` as node-NN.rec, each with meta host ``node-NN``."""
    out = []
    for i in range(1, n + 1):
        dst = tmp / f"node-{i:02d}.rec"
        shutil.copyfile(src, dst)
        db = sqlite3.connect(dst)
        with db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'host'", (json.dumps(f"node-{i:02d}"),))
        db.close()
        out.append(dst)
    return out


def project(rec: Path) -> None:
    res = subprocess.run(DPUPROF + ["project", str(rec), "--dpu", "bluefield", "-o",
                                    str(rec.with_name(rec.stem + ".proj.json"))],
                         capture_output=True, text=True, cwd=rec.parent)
    if res.returncode != 0:
        sys.exit(f"merge_scale: dpuprof project {rec.name} failed: {res.stderr.strip()[:300]}")


def timed_report(recs: list[Path], fmt: str, out: Path, extra: list[str]) -> dict:
    """Run one report; return wall_s, cpu_s, user_s, sys_s, max_rss_mb, load before/after."""
    cmd = DPUPROF + ["report", *map(str, recs), "-q", "--format", fmt, "-o", str(out), *extra]
    load0 = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=recs[0].parent)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"merge_scale: report failed ({proc.returncode}): {err.strip()[:500]}")
    return {"nodes": len(recs), "wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
            "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2),
            "max_rss_mb": round(ru.ru_maxrss / 1024, 1), "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()], "output_bytes": out.stat().st_size}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def markdown(results: list[dict], args, command: str, fixture: Path) -> str:
    top = max(results, key=lambda r: r["nodes"])
    verdict = "met" if top["wall_s"] <= TARGET_S else "missed"
    lines = [
        "# Merge scale: the job view over many node recordings",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with:",
        "",
        f"    {command}",
        "",
        f"Nodes: copies of `{fixture.relative_to(ROOT) if fixture.is_relative_to(ROOT) else fixture}` "
        f"({fixture.stat().st_size / 1e6:.2f} MB, {args.fmt} output), host renamed per copy with sqlite3; "
        f"{args.projected} of them projected with `dpuprof project --dpu bluefield` before the timing. "
        "Each run is a fresh `python3 -m dpuprof report node-*.rec` process (interpreter start and "
        "imports included), after one untimed warm-up run. CPU = user + system seconds of the report and its worker processes "
        "(`os.wait4`); max RSS = the largest of those processes.",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, Linux "
        f"{platform.release()}, Python {platform.python_version()}. It is shared with other work: the "
        "load average (1, 5, 15 min) is given before and after each run, and CPU seconds are the "
        "number a neighbour hardly moves.",
        "",
        "| Nodes | Wall s | CPU s (user + sys) | Max RSS MB | Load before | Load after |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['nodes']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} ({r['user_s']:.1f} + {r['sys_s']:.1f}) "
                     f"| {r['max_rss_mb']:.0f} | {', '.join(f'{x:.1f}' for x in r['load_before'])} "
                     f"| {', '.join(f'{x:.1f}' for x in r['load_after'])} |")
    per_node = [r for r in results if r["nodes"] > 1]
    if len(per_node) >= 2:
        a, b = per_node[0], per_node[-1]
        slope = (b["max_rss_mb"] - a["max_rss_mb"]) / (b["nodes"] - a["nodes"])
        lines += ["", f"Memory grows with the data merged: {slope:.1f} MB per node between {a['nodes']} and "
                      f"{b['nodes']} nodes (each node's tables are held once, plus the combined tables the "
                      "job summary reads)."]
    lines += ["", f"Target: the {top['nodes']}-node job view in <= {TARGET_S:g} s wall: **{verdict}** "
                  f"({top['wall_s']:.1f} s wall, {top['cpu_s']:.1f} CPU s, load {top['load_before'][0]:.1f} "
                  "at the start)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 64], help="node counts to time (default 16 64)")
    ap.add_argument("--fixture", type=Path, default=FIXTURE, help="recording to copy (default ddp-plain)")
    ap.add_argument("--projected", type=int, default=8, help="nodes to project before timing (default 8)")
    ap.add_argument("--format", dest="fmt", default="terminal", help="report format (default terminal)")
    ap.add_argument("--jobs", type=int, default=None, help="report -j N (default: one per CPU)")
    ap.add_argument("--md", type=Path, default=None, help="write the results as markdown here")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    if not args.fixture.is_file():
        sys.exit(f"merge_scale: no recording at {args.fixture}")
    extra = ["-j", str(args.jobs)] if args.jobs else []
    results = []
    with tempfile.TemporaryDirectory(prefix="dpuprof-merge-") as tmp:
        tmp = Path(tmp)
        recs = make_nodes(args.fixture, tmp, max(args.nodes))
        for rec in recs[:args.projected]:
            project(rec)
        # warm the page cache and the .pyc files once, untimed, as a second run by the user would find them
        timed_report(recs[:min(args.nodes)], args.fmt, tmp / "warm-up.out", extra)
        for n in args.nodes:
            r = timed_report(recs[:n], args.fmt, tmp / f"job-{n}.out", extra)
            results.append(r)
            print(f"{n:3d} nodes: {r['wall_s']:6.1f} s wall, {r['cpu_s']:6.1f} CPU s "
                  f"({r['user_s']:.1f} user + {r['sys_s']:.1f} sys), max RSS {r['max_rss_mb']:.0f} MB, "
                  f"load {r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    if args.md:
        command = "python3 benchmarks/merge_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.md.write_text(markdown(results, args, command.strip(), args.fixture))
        print(f"merge_scale: wrote {args.md}")
    top = max(results, key=lambda r: r["nodes"])
    return 0 if top["wall_s"] <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
