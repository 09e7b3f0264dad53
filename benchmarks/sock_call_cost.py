#!/usr/bin/env python3
"""What the socket probes cost a socket call or a connection in all, measured from the caller's side.

The kernel's BPF statistics (``kernel.bpf_stats_enabled``, what benchmarks/hot_loads.py reads) time
the program only. A classic tracepoint also builds its trace record before the program runs, and
that time is in no statistic: it shows only in the calling thread's CPU. So this times a loop of
32-byte UDP send + receive calls over loopback (one thread, pinned to CPU 0; CPU time per call
pair, ``time.thread_time``, the median of 7 repetitions of 100,000 pairs) under three conditions,
in random order each round:

    bare       no recorder
    without    dpuprof record --probes proc_tree,cpu_sample
    with       dpuprof record --probes proc_tree,cpu_sample,sock_io

with - without is what sock_io's two programs (one on send, one on receive) cost a call pair; the
per-round differences are printed with their median and range. With ``--connections`` the loop
is a TCP connection's life instead (connect, accept, 1 KiB each way, close both ends: 20,000 a
repetition, in the same thread, so the loopback's softirq work is in its CPU time too) and the
probe is sock_close (one program per TCP state change). With ``--stats`` it times what the
kernel's BPF run-time statistics (``kernel.bpf_stats_enabled``) add to every program run: the
UDP loop under a bpftrace counter on the same two tracepoints, with the sysctl 0 and 1 in turn
(restored at the end); the difference per pair is two runs' worth. Run as root on a quiet machine:

    sudo python3 benchmarks/sock_call_cost.py --rounds 5
    sudo python3 benchmarks/sock_call_cost.py --rounds 5 --connections
    sudo python3 benchmarks/sock_call_cost.py --rounds 5 --stats
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS, CONNECTIONS, REPS = 100_000, 20_000, 7
BASE = "proc_tree,cpu_sample"


def conditions(probe: str) -> dict[str, str | None]:
    return {"bare": None, "without": BASE, "with": f"{BASE},{probe}"}


def loop() -> float:
    """ns of this thread's CPU per UDP send + receive pair (the median of REPS repetitions)."""
    os.sched_setaffinity(0, {0})
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    buf, msg = bytearray(64), b"x" * 32
    send, recv = tx.send, rx.recv_into
    reps = []
    for _ in range(REPS):
        t0 = time.thread_time()
        for _ in range(PAIRS):
            send(msg)
            recv(buf)
        reps.append((time.thread_time() - t0) / PAIRS * 1e9)
    return statistics.median(reps)


def connect_loop() -> float:
    """ns of this thread's CPU per TCP connection's life (the median of REPS repetitions)."""
    os.sched_setaffinity(0, {0})
    srv = socket.create_server(("127.0.0.1", 0), backlog=64)
    addr, msg, buf = srv.getsockname(), b"x" * 1024, bytearray(2048)
    reps = []
    for _ in range(REPS):
        t0 = time.thread_time()
        for _ in range(CONNECTIONS):
            c = socket.create_connection(addr)
            s, _ = srv.accept()
            c.sendall(msg)
            s.recv_into(buf)
            s.sendall(msg)
            c.recv_into(buf)
            c.close()
            s.close()
        reps.append((time.thread_time() - t0) / CONNECTIONS * 1e9)
    return statistics.median(reps)


def run(probes: str | None, out: str, connections: bool) -> float:
    """The loop's ns per pair or connection under ``probes`` (a fresh process each time)."""
    child = [sys.executable, __file__, "--loop"] + (["--connections"] if connections else [])
    cmd = child if probes is None else \
        [sys.executable, "-m", "dpuprof", "record", "-q", "--probes", probes, "-o", out, "--", *child]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return float(res.stdout.split()[-1])


STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
BPFTRACE = "tracepoint:sock:sock_send_length, tracepoint:sock:sock_recv_length { @[tid] = count(); }"


def stats_cost(rounds: int) -> int:
    """--stats: the loop with statistics off and on, in turn, under one bpftrace."""
    with open(STATS_SYSCTL) as fh:
        before = fh.read().strip()
    tracer = subprocess.Popen(["bpftrace", "-e", BPFTRACE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    got: dict[str, list[float]] = {"0": [], "1": []}
    try:
        if not tracer.stdout.readline().startswith("Attaching"):
            print("sock_call_cost: bpftrace did not attach", file=sys.stderr)
            return 2
        for r in range(rounds):
            for value in ("0", "1"):
                with open(STATS_SYSCTL, "w") as fh:
                    fh.write(value)
                child = subprocess.run([sys.executable, __file__, "--loop"], capture_output=True, text=True,
                                       check=True, cwd=ROOT)
                got[value].append(float(child.stdout.split()[-1]))
            print(f"round {r + 1}: statistics off {got['0'][-1]:.0f}  on {got['1'][-1]:.0f} ns per pair", flush=True)
    finally:
        with open(STATS_SYSCTL, "w") as fh:
            fh.write(before)
        tracer.terminate()
        tracer.wait()
    diffs = [on - off for off, on in zip(got["0"], got["1"])]
    print(f"the statistics' cost per program run (on - off per round, / 2 runs a pair): median "
          f"{statistics.median(diffs) / 2:.0f} ns, range {min(diffs) / 2:.0f} to {max(diffs) / 2:.0f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each condition once (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", action="store_true",
                    help="time TCP connections under sock_close instead of calls under sock_io")
    ap.add_argument("--stats", action="store_true",
                    help="time what the kernel's BPF statistics add to a program run (needs bpftrace)")
    ap.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)  # the timed child
    args = ap.parse_args()
    if args.loop:
        print(f"{(connect_loop() if args.connections else loop()):.1f}")
        return 0
    if os.geteuid() != 0:
        print("sock_call_cost: run as root (dpuprof record loads BPF programs)", file=sys.stderr)
        return 2
    if args.stats:
        return stats_cost(args.rounds)
    probe, unit = ("sock_close", "connection") if args.connections else ("sock_io", "send + receive pair")
    conds = conditions(probe)
    rng = random.Random(args.seed)
    got: dict[str, list[float]] = {c: [] for c in conds}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(conds)
            rng.shuffle(order)
            for cond in order:
                got[cond].append(run(conds[cond], os.path.join(tmp, "x.rec"), args.connections))
            print(f"round {r + 1}: " + "  ".join(f"{c} {got[c][-1]:.0f}" for c in conds), flush=True)
    for cond, values in got.items():
        print(f"{cond:7} median {statistics.median(values):.0f} ns per {unit}")
    diffs = [w - n for w, n in zip(got["with"], got["without"])]
    print(f"{probe}'s cost per {unit} (with - without, per round): median {statistics.median(diffs):.0f} ns, "
          f"range {min(diffs):.0f} to {max(diffs):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
