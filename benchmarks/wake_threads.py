#!/usr/bin/env python3
"""A wake-heavy load: THREADS threads, each hashing 64 KiB (hashlib.sha256 over one reused buffer)
and sleeping 1 ms, in a loop, for SECONDS; prints one JSON line {"threads", "hashes", "wall_s"}.

    python3 benchmarks/wake_threads.py --threads 128 --duration 20

Every loop is a sleep and a wake-up (a context switch, a timer, sched tracepoints) for a few tens
of microseconds of computing (sha256 releases the GIL over buffers this large), so the events per
CPU second are many: the load a profiler's per-event cost shows on. benchmarks/hot_loads.py runs
several of these processes at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time

BUF = bytes(64 * 1024)


def spin(deadline: float, counts: list, i: int) -> None:
    n = 0
    sha, sleep, now = hashlib.sha256, time.sleep, time.monotonic
    while now() < deadline:
        sha(BUF).digest()
        n += 1
        sleep(0.001)
    counts[i] = n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=128)
    ap.add_argument("--duration", type=float, default=20.0)
    args = ap.parse_args()
    counts = [0] * args.threads
    t0 = time.monotonic()
    deadline = t0 + args.duration
    threads = [threading.Thread(target=spin, args=(deadline, counts, i)) for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"threads": args.threads, "hashes": sum(counts), "wall_s": time.monotonic() - t0}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
