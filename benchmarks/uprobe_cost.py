#!/usr/bin/env python3
"""Cost of one uprobe hit as dpuprof's probes/uprobes.bpf.c takes it (root, bcc).

Calls libz's zlibVersion() (a trivial function) LOOP times through ctypes and times the loop in
this thread's CPU time (time.thread_time_ns: the trap and the BPF program run on the calling
thread, and other load on the machine does not inflate it), in four set-ups:

    none        no probe
    foreign     uprobe + uretprobe attached, this process not in the workload (what every other
                process that calls the function pays: the trap and a map lookup)
    entry       uprobe only, this process in the workload
    entry+ret   uprobe + uretprobe, this process in the workload (what a probed codec call pays)

The uprobe runs the inflate handlers (on_inflate_0 / on_inflate_ret_0), which read a z_stream
argument; zlibVersion has none, so those reads fail, which costs about what a successful read
does. Prints one JSON object: median ns per call over REPEAT rounds for each set-up, and the
added cost per call (set-up minus none).

Usage: sudo python3 benchmarks/uprobe_cost.py [LOOP] [REPEAT]
"""
from __future__ import annotations

import ctypes
import ctypes as ct
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dpuprof.record.load.bcc_loader import import_bcc  # noqa: E402
from dpuprof.record.load.probes import probe_dir  # noqa: E402


def libz_path() -> str:
    import zlib  # noqa: F401, PLC0415  (maps libz here, before /proc/self/maps is read)
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "libz.so.1" in line:
                return line.split()[-1]
    raise SystemExit("libz.so.1 is not mapped")


def per_call_ns(fn, loop: int) -> float:
    t0 = time.thread_time_ns()
    for _ in range(loop):
        fn()
    return (time.thread_time_ns() - t0) / loop


def main():
    loop = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    path = libz_path()
    fn = ctypes.CDLL(path).zlibVersion
    bcc = import_bcc()
    bpf = bcc.BPF(text=(probe_dir() / "uprobes.bpf.c").read_text(), cflags=["-w"])
    wl = bpf["wl"]
    me = ct.c_uint32(os.getpid())

    def attach(ret: bool):
        bpf.attach_uprobe(name=path, sym="zlibVersion", fn_name="on_inflate_0")
        if ret:
            bpf.attach_uretprobe(name=path, sym="zlibVersion", fn_name="on_inflate_ret_0")

    def detach():
        bpf.detach_uprobe(name=path, sym="zlibVersion")
        try:
            bpf.detach_uretprobe(name=path, sym="zlibVersion")
        except Exception:
            pass

    setups = {
        "none": (None, False),
        "foreign": (True, False),
        "entry": (False, True),
        "entry+ret": (True, True),
    }
    rounds = {name: [] for name in setups}
    per_call_ns(fn, loop // 10)  # warm up
    for _ in range(repeat):
        for name, (ret, member) in setups.items():
            if ret is not None:
                attach(ret)
            if member:
                wl[me] = ct.c_uint32(1)
            elif me in wl:
                del wl[me]
            rounds[name].append(per_call_ns(fn, loop))
            if ret is not None:
                detach()
    med = {name: statistics.median(v) for name, v in rounds.items()}
    calls = sum(v.calls for v in bpf["codec_stats"].values())
    print(json.dumps({
        "loop": loop, "repeat": repeat, "library": path, "kernel": os.uname().release,
        "median_ns_per_call": {k: round(v, 1) for k, v in med.items()},
        "added_ns_per_call": {k: round(v - med["none"], 1) for k, v in med.items() if k != "none"},
        "range_ns_per_call": {k: [round(min(v), 1), round(max(v), 1)] for k, v in rounds.items()},
        "returns_counted": calls,
    }, indent=1))


if __name__ == "__main__":
    main()
