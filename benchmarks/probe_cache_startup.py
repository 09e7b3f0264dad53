#!/usr/bin/env python3
"""Start-up of `dpuprof record` with and without the probe cache (docs/probe-cache.md), side by side.

Each pair runs `dpuprof record -q -- date +%s.%N` once compiling (DPUPROF_PROBE_CACHE=off) and once
from a cache filled by one run before (the default), in random order; start-up is the time from the launch to
the child's exec (`date` prints it). Prints each pair, then the medians and the median of the
per-pair ratios with the range of the ratios (with 7 pairs, the range holds the median ratio with
98 % confidence). Run as root on a quiet machine:

    sudo python3 benchmarks/probe_cache_startup.py --pairs 7
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start_up(env: dict, out: str) -> float:
    """Seconds from launching the recorder to its command's exec."""
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "dpuprof", "record", "-q", "-o", out, "--", "date", "+%s.%N"],
                          env=env, capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1]) - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dpuprof-cache-startup-")
    try:
        envs = {"compiled": os.environ | {"DPUPROF_PROBE_CACHE": "off"},
                "cached": os.environ | {"DPUPROF_PROBE_CACHE": os.path.join(work, "cache")}}
        print(f"load average {os.getloadavg()[0]:.2f}; filling the cache", flush=True)
        start_up(envs["cached"], os.path.join(work, "fill.rec"))
        pairs = []
        for i in range(args.pairs):
            order = list(envs)
            random.shuffle(order)
            got = {name: start_up(envs[name], os.path.join(work, f"{name}{i}.rec")) for name in order}
            pairs.append(got)
            print(f"pair {i}: compiled {got['compiled']:.2f} s, cached {got['cached']:.2f} s", flush=True)
        ratios = sorted(p["cached"] / p["compiled"] for p in pairs)
        print(f"median start-up: compiled {statistics.median(p['compiled'] for p in pairs):.2f} s, "
              f"cached {statistics.median(p['cached'] for p in pairs):.2f} s; median cached/compiled ratio "
              f"{statistics.median(ratios):.3f} (pairs' range {ratios[0]:.3f}-{ratios[-1]:.3f}); "
              f"load average after {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
