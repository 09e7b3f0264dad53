#!/usr/bin/env python3
"""Start several tools together, wait for each, and write each tool's own CPU time as ground truth.

    together.py SPEC.json RESULT.json

SPEC is ``{"tools": [{"name", "cmd": [...], "delay_s": 0, "stop_after_s": null}, ...]}``: tools
start in order, each ``delay_s`` after the previous one (an iperf3 server before its client);
``stop_after_s`` sends SIGINT that long after the tool started (for tools without a duration flag).
Each tool's output goes to a file whose text lands in RESULT (``"stdout": "null"`` discards stdout).

The ground truth is the kernel's own CPU accounting of each tool, read with ``os.wait4`` when it
exits: ``ru_utime`` and ``ru_stime`` are the values /proc/PID/stat shows as utime and stime (plus
those of the tool's children it reaped), complete up to the tool's last instruction. This wrapper is
small on purpose: it runs under ``dpuprof record`` and ``perf record`` like the tools, and its own
CPU (a few ms) belongs to no tool.

RESULT also has ``host_busy_s``: the whole machine's busy CPU seconds (/proc/stat, every CPU: user,
nice, system, irq, softirq; not idle, iowait or steal) from just before the first tool started to
just after the last one was reaped, over ``host_window_s`` seconds: the work the tools caused that
is charged to no tool (a loop device's kernel workers, interrupts), and anything else running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


# The end of each tool's output kept in RESULT. iperf3 -J writes ~1 KB a second, all of it needed
# to parse (20,000 characters, the bound until 2026-12-08, cut a 31-s run's JSON).
STDOUT_KEPT = 1 << 20


def main(spec_path: str, result_path: str) -> int:
    with open(spec_path) as fh:
        spec = json.load(fh)
    procs: dict[int, dict] = {}
    outdir = tempfile.mkdtemp(prefix="together-")
    timers = []
    busy0, t0 = busy_seconds(), time.time()
    for i, tool in enumerate(spec["tools"]):
        time.sleep(float(tool.get("delay_s", 0)))
        out = open(os.path.join(outdir, f"{i}.out"), "w+")
        sink = subprocess.DEVNULL if tool.get("stdout") == "null" else out
        popen = subprocess.Popen(tool["cmd"], stdout=sink, stderr=out, stdin=subprocess.DEVNULL)
        # Keep the Popen object: a collected one could be reaped by subprocess's clean-up before wait4.
        procs[popen.pid] = {"name": tool["name"], "pid": popen.pid, "start": time.time(), "out": out,
                            "popen": popen, "stopped": bool(tool.get("stop_after_s"))}
        if tool.get("stop_after_s"):
            t = threading.Timer(float(tool["stop_after_s"]), _signal, (popen.pid, signal.SIGINT))
            t.daemon = True
            t.start()
            timers.append(t)
    results = []
    left = set(procs)
    while left:
        pid, status, ru = os.wait4(-1, 0)
        if pid not in left:
            continue
        left.discard(pid)
        info = procs[pid]
        info["out"].seek(0)
        text = info["out"].read()
        info["out"].close()
        results.append({
            "name": info["name"], "pid": pid,
            "utime_s": ru.ru_utime, "stime_s": ru.ru_stime, "cpu_s": ru.ru_utime + ru.ru_stime,
            "wall_s": time.time() - info["start"],
            "rc": os.waitstatus_to_exitcode(status), "stopped": info["stopped"], "stdout": text[-STDOUT_KEPT:],
        })
    busy1, t1 = busy_seconds(), time.time()
    for t in timers:
        t.cancel()
    shutil.rmtree(outdir, ignore_errors=True)
    with open(result_path, "w") as fh:
        json.dump({"tools": results, "host_busy_s": busy1 - busy0, "host_window_s": t1 - t0}, fh)
    # A tool we stopped with SIGINT may exit with any status.
    return 0 if all(r["rc"] == 0 or r["stopped"] for r in results) else 1


def busy_ticks(stat_text: str) -> int:
    """Busy clock ticks of all CPUs in /proc/stat's text: user + nice + system + irq + softirq of
    the ``cpu`` line (guest time is inside user; idle, iowait and steal are not busy)."""
    line = next(ln for ln in stat_text.splitlines() if ln.startswith("cpu "))
    v = [int(x) for x in line.split()[1:]] + [0] * 10
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    return user + nice + system + irq + softirq


def busy_seconds() -> float:
    with open("/proc/stat") as fh:
        return busy_ticks(fh.read()) / os.sysconf("SC_CLK_TCK")


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
