#!/usr/bin/env python3
"""The floor of a program on sched_waking: what a wake-up costs before the program does anything.

probes/sched_wait.bpf.c runs on every wake-up on the host, and on the loads of
benchmarks/HOT_LOADS.md most wake-ups are of tasks whose waits it does not measure (under fio,
ksoftirqd's: 81 %). So what it pays before it can tell is most of its cost. This loads three
one-program variants of it in turn, with bcc, and reads their ns a run from the kernel's BPF
statistics (``bpftool prog show``; the sysctl is on only while this runs) over a fio flood of 4 KiB
random O_DIRECT reads on a loop device over a tmpfs file (benchmarks/hot_workloads.py):

    empty       return at once
    read        one kernel read (the wakee's pid and tgid), then return
    last_task   compare the wakee with this CPU's last one, skipped; the read only on a miss
    last_two    the same with two slots (by a bit of the task's address)

2026-12-06, --rounds 2: 64.6, 103.1, 74.7 and 69.0 ns a run (a second slot saves 6 ns more, 0.1 %
of a core at 174k wake-ups a second: probes/sched_wait.bpf.c keeps one).

The task_struct offset of pid comes from the kernel's BTF. Run as root on a quiet machine:

    sudo python3 benchmarks/sched_waking_floor.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dpuprof.record.load.bcc_loader import import_bcc  # noqa: E402
from dpuprof.record.load.btf import Btf  # noqa: E402
from hot_workloads import loop_device  # noqa: E402
from suite.runner import bpf_stats  # noqa: E402

VARIANTS = {
    "empty": "RAW_TRACEPOINT_PROBE(sched_waking) { return 0; }",
    "read": """RAW_TRACEPOINT_PROBE(sched_waking) {
        u64 ids = 0;
        bpf_probe_read_kernel(&ids, 8, (void *)(ctx->args[0] + PID_OFF));
        return (u32)ids == (u32)(ids >> 32);
    }""",
    "last_task": """BPF_PERCPU_ARRAY(last, u64, 1);
    RAW_TRACEPOINT_PROBE(sched_waking) {
        int zero = 0;
        u64 *seen = last.lookup(&zero);
        if (!seen || *seen == ctx->args[0])
            return 0;
        *seen = ctx->args[0];
        u64 ids = 0;
        bpf_probe_read_kernel(&ids, 8, (void *)(ctx->args[0] + PID_OFF));
        return (u32)ids == (u32)(ids >> 32);
    }""",
    "last_two": """struct two { u64 task[2]; };
    BPF_PERCPU_ARRAY(last, struct two, 1);
    RAW_TRACEPOINT_PROBE(sched_waking) {
        int zero = 0;
        struct two *seen = last.lookup(&zero);
        u64 task = ctx->args[0];
        u32 slot = (task >> 12) & 1;
        if (!seen || seen->task[slot] == task)
            return 0;
        seen->task[slot] = task;
        u64 ids = 0;
        bpf_probe_read_kernel(&ids, 8, (void *)(task + PID_OFF));
        return (u32)ids == (u32)(ids >> 32);
    }""",
}


def prog_stats() -> tuple[int, int]:
    """(runs, ns) of the loaded program named sched_waking."""
    out = subprocess.run(["bpftool", "-j", "prog", "show", "name", "sched_waking"], capture_output=True,
                         text=True, check=True).stdout
    info = json.loads(out)
    info = info[0] if isinstance(info, list) else info
    return info.get("run_cnt", 0), info.get("run_time_ns", 0)


def fio(dev: str, seconds: int) -> None:
    subprocess.run(["fio", "--name=floor", f"--filename={dev}", "--rw=randread", "--bs=4k", "--direct=1",
                    "--ioengine=libaio", "--iodepth=32", "--time_based", f"--runtime={seconds}", "--thread",
                    "--output=/dev/null"], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds of fio per variant and round")
    args = ap.parse_args()
    bpf_cls = import_bcc().BPF
    pid_off = Btf.load().member("task_struct", "pid").offset
    ns: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with bpf_stats() as enabled, tempfile.TemporaryDirectory() as scratch, loop_device(Path(scratch)) as dev:
        if not enabled:
            print("sched_waking_floor.py: kernel.bpf_stats_enabled could not be set", file=sys.stderr)
            return 2
        for _ in range(args.rounds):
            for name, text in VARIANTS.items():
                bpf = bpf_cls(text=text.replace("PID_OFF", str(pid_off)))
                try:
                    runs0, ns0 = prog_stats()
                    fio(dev, args.duration)
                    runs1, ns1 = prog_stats()
                finally:
                    bpf.cleanup()
                ns[name].append((ns1 - ns0) / max(1, runs1 - runs0))
                print(f"{name:10s} {runs1 - runs0:>10,} runs  {ns[name][-1]:6.1f} ns a run", flush=True)
    print("median ns a run over rounds: " + ", ".join(f"{n} {statistics.median(v):.1f}" for n, v in ns.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
