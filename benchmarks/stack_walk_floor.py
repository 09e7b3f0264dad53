#!/usr/bin/env python3
"""What a sample's stack walk costs: the part of probes/cpu_sample.bpf.c's on_sample that no
handler change can remove.

Loads one-program variants of a cpu-clock sampler at -F (99 Hz, the recorder's default) on every
CPU, with bcc, one at a time and then all at once, and reads their ns a run from the kernel's BPF
statistics (``bpftool prog show``; the sysctl is on only while this runs) beside an iperf3 loopback
flood (server on the last CPU, client on the first, as benchmarks/hot_loads.py pins them):

    empty      return at once
    k_stackid  the kernel stack into a stack map (bpf_get_stackid), as on_sample does
    k_buffer   the same walk into a per-CPU buffer (bpf_get_stack): no stack map
    ku_stackid the kernel and the user stack into a stack map, as on_sample does
    u_stackid  the user stack only

2026-12-07, 2-vCPU VM, --rounds 2 (8-s floods), medians in us a run: alone, empty 0.27, k_stackid
15.79, k_buffer 12.87, ku_stackid 18.04, u_stackid 2.52; all five at once, k_stackid 13.97, then
k_buffer 7.22, ku_stackid 7.92, u_stackid 1.69 (walks that follow another walk find the caches
warm). The stack map adds 0-3 us; the kernel walk is most of a sample's cost, and nearly half of
it is its cold caches at 99 Hz. perf record -g walks with the same kernel code
(get_perf_callchain).

    sudo python3 benchmarks/stack_walk_floor.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # suite

from dpuprof.record.load.bcc_loader import import_bcc  # noqa: E402
from suite.runner import bpf_stats  # noqa: E402

HEADER = """
#include <uapi/linux/ptrace.h>
struct bpf_perf_event_data { struct pt_regs regs; u64 sample_period; u64 addr; };
"""
VARIANTS = {
    "empty": "int empty(struct bpf_perf_event_data *ctx) { return 0; }",
    "k_stackid": """BPF_STACK_TRACE(sk, 16384);
    int k_stackid(struct bpf_perf_event_data *ctx) { sk.get_stackid(&ctx->regs, 0); return 0; }""",
    "k_buffer": """struct walk { u64 ip[127]; };
    BPF_PERCPU_ARRAY(kbuf, struct walk, 1);
    int k_buffer(struct bpf_perf_event_data *ctx) {
        int zero = 0;
        struct walk *w = kbuf.lookup(&zero);
        if (w)
            bpf_get_stack(ctx, w->ip, sizeof(w->ip), 0);
        return 0;
    }""",
    "ku_stackid": """BPF_STACK_TRACE(sku, 16384);
    int ku_stackid(struct bpf_perf_event_data *ctx) {
        sku.get_stackid(&ctx->regs, 0);
        sku.get_stackid(&ctx->regs, BPF_F_USER_STACK);
        return 0;
    }""",
    "u_stackid": """BPF_STACK_TRACE(su, 16384);
    int u_stackid(struct bpf_perf_event_data *ctx) { su.get_stackid(&ctx->regs, BPF_F_USER_STACK); return 0; }""",
}


def prog_stats(names) -> dict[str, tuple[int, int]]:
    """{program name: (runs, ns)} of the loaded programs named ``names``."""
    out = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                    check=True).stdout)
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0)) for p in out if p.get("name") in names}


def flood(seconds: int) -> None:
    """iperf3 over loopback, the server pinned to the last CPU and the client to the first."""
    port = str(5300 + random.randrange(500))
    last = str(os.cpu_count() - 1)
    server = subprocess.Popen(["iperf3", "-s", "-1", "-A", last, "-p", port], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # the server listening
        subprocess.run(["iperf3", "-c", "127.0.0.1", "-A", "0", "-p", port, "-t", str(seconds)],
                       stdout=subprocess.DEVNULL, check=True, timeout=seconds + 30)
    finally:
        server.kill()
        server.wait()


def measure(bcc, names: list[str], freq: int, seconds: int) -> dict[str, float]:
    """ns a run of each of ``names``, loaded together, over one flood."""
    bpf = bcc.BPF(text=HEADER + "\n".join(VARIANTS[n] for n in names))
    try:
        for name in names:
            bpf.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                                  fn_name=name, sample_freq=freq, cpu=-1)
        before = prog_stats(names)
        flood(seconds)
        after = prog_stats(names)
    finally:
        bpf.cleanup()
    return {n: (after[n][1] - before[n][1]) / max(1, after[n][0] - before[n][0]) for n in names}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=8, help="seconds of flood per measurement")
    ap.add_argument("-F", "--freq", type=int, default=99, help="samples a second per CPU")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("stack_walk_floor.py needs root (BPF programs, BPF statistics): run it with sudo", file=sys.stderr)
        return 2
    bcc = import_bcc()
    alone: dict[str, list[float]] = {n: [] for n in VARIANTS}
    together: dict[str, list[float]] = {n: [] for n in VARIANTS}
    with bpf_stats() as enabled:
        if not enabled:
            print("stack_walk_floor.py: kernel.bpf_stats_enabled could not be set", file=sys.stderr)
            return 2
        for _ in range(args.rounds):
            for name in VARIANTS:
                alone[name] += measure(bcc, [name], args.freq, args.duration).values()
                print(f"alone    {name:10s} {alone[name][-1] / 1e3:6.2f} us a run", flush=True)
            for name, ns in measure(bcc, list(VARIANTS), args.freq, args.duration).items():
                together[name].append(ns)
                print(f"together {name:10s} {ns / 1e3:6.2f} us a run", flush=True)
    for label, got in (("alone", alone), ("together", together)):
        print(f"median us a run, {label}: " + ", ".join(f"{n} {statistics.median(v) / 1e3:.2f}" for n, v in got.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
