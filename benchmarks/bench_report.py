#!/usr/bin/env python3
"""Benchmark ``dpuprof report`` on the long fixture (target < 3 s) and ``dpuprof --help``
(target < 0.3 s: the CLI imports only click until a subcommand runs).

Runs are interleaved (help, report, help, report, ...) so that a noisy neighbour slows both
alike, and the median of each is reported with min and max:

    python3 benchmarks/bench_report.py                 # 5 runs each, a table
    python3 benchmarks/bench_report.py --runs 9 --json # machine-readable, for the benchmark suite
    python3 benchmarks/bench_report.py --check         # exit 1 when a median misses its target

Wall-clock time of a fresh process each run, as a user sees it (interpreter start included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FIXTURE = ROOT / "fixtures" / "long" / "recording.rec"
DPUPROF = [sys.executable, "-m", "dpuprof"]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"bench_report: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[:300]}")
    return elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    ap.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="recording to report on")
    ap.add_argument("--format", default="html", help="report format (default html)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--check", action="store_true", help="exit 1 if a median misses its target")
    args = ap.parse_args(argv)
    if not args.fixture.is_file():
        sys.exit(f"bench_report: no recording at {args.fixture} (the long fixture); pass --fixture PATH")

    with tempfile.TemporaryDirectory(prefix="dpuprof-bench-") as tmp:
        out = Path(tmp) / f"x.{ 'md' if args.format == 'markdown' else args.format}"
        cases = {
            "dpuprof --help": (DPUPROF + ["--help"], 0.3),
            f"dpuprof report {args.fixture.parent.name} -o x.{out.suffix[1:]}":
                (DPUPROF + ["report", str(args.fixture), "-q", "-o", str(out), "--format", args.format], 3.0),
        }
        for cmd, _ in cases.values():  # warm the page cache and .pyc files; not counted
            timed(cmd)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (cmd, _) in cases.items():
                times[name].append(timed(cmd))

    rows = []
    for name, (_, target) in cases.items():
        t = times[name]
        med = statistics.median(t)
        rows.append({"command": name, "runs": len(t), "median_s": round(med, 3), "min_s": round(min(t), 3),
                     "max_s": round(max(t), 3), "target_s": target, "ok": med < target})
    if args.json:
        print(json.dumps({"benchmark": "report", "fixture": str(args.fixture), "results": rows}, indent=2))
    else:
        width = max(len(r["command"]) for r in rows)
        print(f"{'command':<{width}}  runs  median    min    max  target  ok")
        for r in rows:
            print(f"{r['command']:<{width}}  {r['runs']:>4}  {r['median_s']:5.3f}s {r['min_s']:5.3f}s "
                  f"{r['max_s']:5.3f}s  <{r['target_s']:g}s   {'yes' if r['ok'] else 'NO'}")
    return 1 if args.check and not all(r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
