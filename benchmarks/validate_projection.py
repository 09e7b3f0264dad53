#!/usr/bin/env python3
"""Validate ``dpuprof project`` against offloads emulated on this machine (issue 10, section 3).

For each cell of the matrix (benchmarks/validation/cells.py) it runs examples/train_ddp.py in
interleaved pairs, A = the baseline and B = the same job with one offload emulated (crypto removed,
storage removed, the all-reduce replaced by a local reduction, an engine's latency), and takes the
median of the per-pair speedups B/A in steady steps/s with a bootstrap 95 % CI. It then records the
baseline once with ``dpuprof record`` (root) and projects it with a one-category ideal profile, and
judges the model's expected/low/high against the measurement. Writes VALIDATION.md and
validation.json (default: benchmarks/; ``--quick`` or ``--cells``: a temp dir unless ``--out`` is
given).

    sudo python3 benchmarks/validate_projection.py             # the full matrix, about 30 minutes
    sudo python3 benchmarks/validate_projection.py --quick     # two cells, 3 short pairs, 2 shards (CI)

Run it on a quiet machine: it refuses to start when the 1-minute load average is above --max-load
(--force runs anyway and says so in the report). Scratch files (shards, recordings, profiles) go to
a temp dir that is removed at the end (--keep-scratch keeps it).
"""

from __future__ import annotations

import argparse
import datetime
import random
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import json

from validation import cells, report, runner, session  # noqa: E402

BENCH = Path(__file__).resolve().parent
QUICK_SHARDS = 2  # --quick's shard count: 0.4 GB of shards to write instead of 1.6 GB


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two cells, 3 pairs of short runs (CI smoke)")
    p.add_argument("--pairs", type=int, default=None, help="pairs per cell (default 5; --quick 3)")
    p.add_argument("--duration", type=float, default=None,
                   help="seconds per run (default 9.5; --quick 4)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds excluded at the start of each run (default 1.5; --quick 1)")
    p.add_argument("--shards", type=int, default=None,
                   help="shard files per data set (default: the cells' 8; --quick 2, a quarter of the data "
                        "to write: each step reads one whole shard either way)")
    p.add_argument("--cells", default=None, help="comma-separated cell ids (default: the matrix)")
    p.add_argument("--engine-cells", action="store_true",
                   help="add the sync/async engine-latency cells (j) to the full matrix")
    p.add_argument("--max-load", type=float, default=0.5, help="refuse above this 1-minute load average")
    p.add_argument("--force", action="store_true", help="run above --max-load (the report says so)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pair order and the bootstrap")
    p.add_argument("--out", default=None, help="where VALIDATION.md and validation.json go (default: "
                   "benchmarks/ for the full matrix, else a temp dir)")
    p.add_argument("--keep-scratch", action="store_true", help="keep the temp dir (shards, recordings)")
    p.add_argument("--reproject", metavar="VALIDATION_JSON", default=None,
                   help="re-evaluate the model of a finished run on its kept baseline recordings "
                        "(run with --keep-scratch) with this checkout's dpuprof; the measurements stay")
    a = p.parse_args(argv)
    a.pairs = a.pairs or (3 if a.quick else 5)
    a.duration = a.duration or (4.0 if a.quick else 9.5)
    a.shards = a.shards or (QUICK_SHARDS if a.quick else None)
    a.warmup = a.warmup if a.warmup is not None else (1.0 if a.quick else 1.5)
    if a.pairs < 1 or a.duration <= a.warmup or a.warmup < 0:
        p.error("need --pairs >= 1 and 0 <= --warmup < --duration")
    try:
        a.selected = cells.select(a.quick, a.engine_cells, a.cells.split(",") if a.cells else None)
    except ValueError as err:
        p.error(str(err))
    return a


def say(msg: str) -> None:
    print(f"[validate] {msg}", file=sys.stderr, flush=True)


def load_verdict(args, load1: float) -> str | None:
    """None when the run may start; else why not. Above the threshold with --force (or --quick,
    which judges robust facts only), a warning that the report carries."""
    if load1 <= args.max_load:
        return f"quiet: {load1:.2f} <= {args.max_load:g}"
    if args.force or args.quick:
        why = "--force" if args.force else "--quick"
        say(f"warning: load average {load1:.2f} > {args.max_load:g}; running anyway ({why}): "
            "timings are noisy")
        return f"NOT quiet: {load1:.2f} > {args.max_load:g}, run anyway ({why})"
    return None


def reproject(args) -> int:
    """--reproject: the same measurements, the model of this checkout (see session.reproject)."""
    path = Path(args.reproject)
    doc = json.loads(path.read_text())
    by_id = {c.id: c for c in cells.CELLS + cells.ENGINE_CELLS}
    scratch = Path(doc["scratch"])
    opts = runner.RunOptions(doc["settings"]["duration_s"], doc["settings"]["warmup_s"], scratch / "data", scratch,
                             doc["settings"].get("shards"))
    for out in doc["cells"]:
        if out["id"] in by_id:
            say(f"re-projecting {out['id']}")
            session.reproject(by_id[out["id"]], out, opts, doc["settings"]["seed"])
    doc["reprojected"] = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                          "commit": session.machine()["commit"]}
    md, js = report.write(doc, path.parent)
    say(f"wrote {md} and {js}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.reproject:
        return reproject(args)
    before = runner.loadavg()
    verdict = load_verdict(args, before[0])
    if verdict is None:
        say(f"the 1-minute load average is {before[0]:.2f} > {args.max_load:g}: this machine is not "
            "quiet. Wait, or pass --force (the report will say so).")
        return 3
    # Only the full matrix replaces the committed benchmarks/VALIDATION.md by default.
    partial = args.quick or args.cells
    out_dir = Path(args.out) if args.out else (
        Path(tempfile.mkdtemp(prefix="dpuprof-validate-out-")) if partial else BENCH)
    scratch = Path(tempfile.mkdtemp(prefix="dpuprof-validate-"))
    opts = runner.RunOptions(args.duration, args.warmup, scratch / "data", scratch, args.shards)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rng = random.Random(args.seed)
    results = []
    try:
        for cell in args.selected:
            say(f"cell {cell.id}: {cell.title}")
            results.append(session.run_cell(cell, opts, args.pairs, rng, args.seed, say))
    finally:
        if args.keep_scratch:
            say(f"scratch kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    mach = session.machine()
    torch_v = next((p["a_run"].get("torch") for c in results for p in c.get("pairs", [])), None)
    mach["torch"] = torch_v or "?"
    doc = {"started": started,
           "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": "python3 benchmarks/validate_projection.py " + shlex.join(argv if argv is not None
                                                                              else sys.argv[1:]),
           "machine": mach, "load_before": before, "load_after": runner.loadavg(),
           "load_verdict": verdict, "scratch": str(scratch),
           "settings": {"pairs": args.pairs, "duration_s": args.duration, "warmup_s": args.warmup,
                        "seed": args.seed, "shards": args.shards, "n_boot": 10_000, "max_load": args.max_load,
                        "quick": args.quick},
           "cells": results}
    md, js = report.write(doc, out_dir)
    say(f"wrote {md} and {js}")
    return 1 if any("error" in c for c in results) else 0


if __name__ == "__main__":
    sys.exit(main())
