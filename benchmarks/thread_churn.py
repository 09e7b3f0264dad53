#!/usr/bin/env python3
"""Does the recorder's cost follow the live threads, or every thread the workload ever started?

A workload that starts a short-lived thread every few milliseconds (a pool per request, a
loader per batch) is recorded by each --tree's dpuprof in turn; the recorder's own CPU per
interval (the recording's recorder_cpu table) is compared between the run's first and last ten
seconds. Flat: the work follows what is alive; growing: it follows every id ever seen.

    sudo python3 benchmarks/thread_churn.py [--duration 60] [--tree [LABEL=]PATH ...]

Prints a Markdown table (--json FILE: the numbers). Run it on a quiet machine; it takes
--duration seconds per tree (the default tree: this checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpuprof.recording.reader import load  # noqa: E402  (this checkout's: every tree writes schema v4)

BIN_S = 10.0  # the first and the last bin compared


def churn(duration_s: float, pause_s: float) -> int:
    """The workload: a thread that hashes 4 KiB and ends, started every ``pause_s``; returns how
    many were started."""
    end, buf, n = time.time() + duration_s, b"x" * 4096, 0
    while time.time() < end:
        t = threading.Thread(target=hashlib.sha256, args=(buf,))
        t.start()
        t.join()
        n += 1
        time.sleep(pause_s)
    return n


def run_tree(label: str, tree: Path, duration_s: float, pause_s: float, scratch: Path) -> dict:
    rec = scratch / f"{label}.rec"
    cmd = [sys.executable, "-m", "dpuprof", "record", "-q", "-o", str(rec), "--",
           sys.executable, str(Path(__file__).resolve()), "--child", str(duration_s), "--pause", str(pause_s)]
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=duration_s + 300)
    if proc.returncode != 0:
        raise SystemExit(f"thread_churn: {label}: dpuprof record failed: {proc.stderr.strip()[-500:]}")
    rc = load(rec).table("recorder_cpu")
    ms = (rc["user_s"] + rc["system_s"]) * 1e3
    first = ms[rc["interval"] < BIN_S].mean()
    last = ms[rc["interval"] >= rc["interval"].max() - BIN_S].mean()
    return {"tree": label, "path": str(tree), "threads": int(proc.stdout.strip() or 0),
            "intervals": int(rc["interval"].max()) + 1, "first_ms": round(float(first), 2),
            "last_ms": round(float(last), 2), "last_over_first": round(float(last / first), 3)}


def parse_trees(values: list[str]) -> dict[str, Path]:
    trees = {}
    for v in values or [str(ROOT)]:
        label, _, path = v.rpartition("=") if "=" in v else (Path(v).resolve().name, "", v)
        trees[label] = Path(path).resolve()
    return trees


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--pause", type=float, default=0.005, help="seconds between threads (default 0.005)")
    ap.add_argument("--tree", action="append", metavar="[LABEL=]PATH")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child is not None:
        print(churn(a.child, a.pause))
        return 0
    with tempfile.TemporaryDirectory(prefix="dpuprof-churn-") as scratch:
        rows = [run_tree(label, path, a.duration, a.pause, Path(scratch)) for label, path in parse_trees(a.tree).items()]
    print(f"{a.duration:.0f}-s runs, a thread every {a.pause * 1e3:g} ms; recorder CPU per interval (ms), "
          f"mean of the first and the last {BIN_S:.0f} s\n")
    print("| tree | threads started | intervals | first 10 s | last 10 s | last / first |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['tree']} | {r['threads']:,} | {r['intervals']} | {r['first_ms']:.1f} | {r['last_ms']:.1f} | "
              f"{r['last_over_first']:.2f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
