"""dpuprof's benchmark suite: accuracy against ground truth and against perf, overhead, output size,
start-up, memory and report time. One command, as root:

    sudo python3 benchmarks/run.py            # the full suite (about 30 minutes)
    sudo python3 benchmarks/run.py --quick    # the CI smoke run (about 2 minutes)

It writes RESULTS.md and results.json into ``--out`` (default: benchmarks/). Every number in
RESULTS.md comes from this run's measurements. Workloads are real tools (openssl speed, fio,
pigz, zstd; iperf3 in the overhead runs), a loopback TCP stream of blocking calls
(benchmarks/tcp_stream.py) and examples/train_ddp.py; missing Debian packages are installed with
apt-get unless ``--no-install``. Timed comparisons are interleaved (each round runs every condition once, in a
rotated order) and reported as the median of per-round ratios, since the machine may be noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .accuracy import bench_accuracy
from .config import BENCH, FULL, QUICK, TOOLS, Config, log
from .footprint import bench_long, bench_report, bench_startup
from .machine import busy_fraction, loadavg, machine_info
from .overhead import bench_overhead
from .report import render
from .setup import ddp_data, ensure_tools, make_fio_file, make_text_file
from .verdicts import evaluate
from .workloads import commands

import short_helpers  # benchmarks/ is on sys.path (run.py)


def parser() -> argparse.ArgumentParser:
    """benchmarks/run.py's options."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run for CI (about 2 minutes); asserts no timings")
    ap.add_argument("--out", type=Path, default=BENCH, help="where RESULTS.md and results.json go (default: benchmarks/)")
    ap.add_argument("--scratch", type=Path, default=Path("/var/tmp/dpuprof-bench"),
                    help="scratch directory on a real disk (O_DIRECT); the DDP shards are kept here for reuse")
    ap.add_argument("--long-s", type=int, default=None,
                    help="length of the long run: size, memory, stack loss, recursion misses (full: 600 s)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install missing tools")
    ap.add_argument("--check-accuracy", action="store_true",
                    help="exit 1 when an accuracy target (CPU-second ratios, not timings) is missed")
    return ap


def main(argv=None) -> int:
    """Run the suite; write results.json and RESULTS.md into --out. Exit 2 without root or tools, 1
    with --check-accuracy when an accuracy target is missed, else 0."""
    args = parser().parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.long_s:
        cfg.long_s = args.long_s
    if os.geteuid() != 0:
        print("benchmarks/run.py needs root (dpuprof record and perf record -a): run it with sudo", file=sys.stderr)
        return 2
    missing = ensure_tools(not args.no_install)
    if missing:
        print(f"benchmarks/run.py: missing tools: {', '.join(missing)} "
              f"(apt-get install {' '.join(sorted({TOOLS[m] for m in missing}))})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.scratch.mkdir(parents=True, exist_ok=True)
    results = measure(cfg, args.scratch)
    results["targets"] = evaluate(results)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    (args.out / "RESULTS.md").write_text(render(results))
    log(f"wrote {args.out / 'RESULTS.md'} and results.json in {results['wall_s'] / 60:.1f} min")
    if args.check_accuracy:
        bad = [t for t in results["targets"] if t["id"].startswith("accuracy") and t["met"] is False]
        if bad:
            print("accuracy targets missed: " + "; ".join(f"{t['name']}: {t['measured']}" for t in bad),
                  file=sys.stderr)
            return 1
    return 0


def measure(cfg: Config, scratch: Path) -> dict:
    """Every section's measurements, with the machine and the commands (results.json less targets)."""
    t_start = time.time()
    machine = machine_info()
    machine["load_before"] = loadavg()
    machine["busy_before"] = busy_fraction()
    log(f"mode {'quick' if cfg.quick else 'full'}; load average {machine['load_before']}")

    make_fio_file(scratch / "fio.dat")
    make_text_file(scratch / f"pigz-{cfg.pigz_mb}M.txt", cfg.pigz_mb << 20)
    data = ddp_data(scratch, cfg)

    results = {"mode": "quick" if cfg.quick else "full", "config": cfg.__dict__, "machine": machine,
               "command": "sudo python3 benchmarks/run.py" + (" --quick" if cfg.quick else "")}
    results["accuracy"] = bench_accuracy(cfg, scratch)
    results["overhead"] = bench_overhead(cfg, scratch, data)
    results["long"] = bench_long(cfg, scratch, data)
    results["startup"] = bench_startup(cfg, scratch)
    results["report"] = bench_report(cfg)
    results["short_helpers"] = short_helpers.measure([("this", str(BENCH.parent))], *((2, 2, 4) if cfg.quick else (8, 4, 24)))
    machine["load_after"] = loadavg()
    results["wall_s"] = time.time() - t_start
    results["commands"] = commands(cfg, scratch)
    return results
