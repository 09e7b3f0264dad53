#!/usr/bin/env python3
"""Soak: ``dpuprof agent`` for an hour over a mixed load, per window of its rotation (issue 23).

    sudo python3 benchmarks/agent_soak.py                        # 60 minutes, 10-minute windows
    sudo python3 benchmarks/agent_soak.py --duration 300 --window 60 --out /tmp/soak.json

Runs ``python3 -m dpuprof agent -D DIR --rotate WINDOW --listen 127.0.0.1:0 -d DURATION`` (the
default light setting: -F 19, no sched_wait or uprobes, 1-s drains) from this checkout (``--tree``
for another) while this script keeps a mixed load going, started before the agent and stopped after
it (LOAD below; about 1-1.3 of this 2-CPU VM's cores, so the agent is never starved).

Each recording file the agent completes is one window (it rotates every WINDOW seconds). Per window:

- RSS: the agent's VmRSS at the window's end and its largest in the window (/proc/PID/status,
  sampled every --period s);
- agent CPU: utime + stime of the agent process (/proc/PID/stat, every thread), the samples
  interpolated to the window's start and end times;
- BPF: the window's ``probe_cost`` rows (the kernel's run_time_ns of the agent's programs,
  BPF_ENABLE_STATS, on for one interval in 10 and scaled to the window: render/observer.py; meta
  ``probe_cost`` says when it could not be measured);
- workload CPU: the window's ``cpu_category`` seconds outside ``idle`` and ``observer``, the
  agent's own pid left out;
- cost % = (agent CPU + BPF) / workload CPU;
- loss: the ``lost`` table's sum, and the part judged: every kind but ``user_stack_unwalkable``
  (code without frame pointers: a property of the load) and ``thread_exit_unaccounted`` (each
  thread that exits, counted so by design without the sched_wait probe), which grow with the
  load, not with the agent's age;
- the file's bytes; and each of these as a ratio to the first window.

Verdict (exit status 1 when missed): no window's RSS at its end, cost % or judged loss is more than
10 % above the first window's. Loss: 0 against 0 is flat, and a window with at most --loss-floor
judged losses (default 20) passes whatever the first had (a few events are noise, not growth).
A last window shorter than half a window is shown but not judged.

Prints Markdown to stdout (progress on stderr); --out writes every sample and window as JSON.
Scratch (recordings, fio's file) lives in a temp dir under /var/tmp, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))  # dpuprof from this checkout, installed or not
from soak_windows import judge, markdown, window_rows  # noqa: E402

from dpuprof.categories import NOT_WORK  # noqa: E402
from dpuprof.recording import load  # noqa: E402
from dpuprof.render.observer import cost as observer_cost  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PYTHON = sys.executable  # a real interpreter, not a pyenv shim: its pid is the agent's
IPERF_PORT = 5299

# The mixed load. Measured alone, without the agent (psutil: each load's process tree, children
# included, over 30 s, on this 2-vCPU VM while other work kept its load average at 4-6): iperf3
# at 2 Gbit/s 0.21 core (both ends), the hashing pool 0.38, the short-lived processes 0.27 (about
# 90 new pids a second), fio 0.06: 0.9 in all, more on a quiet machine.
HASH_POOL = ("import hashlib, threading, time\n"
             "buf = bytes(1 << 20)\n"
             "def work():\n"
             "    while True:\n"
             "        hashlib.sha256(buf).digest()\n"
             "        time.sleep(0.004)\n"
             "for _ in range(4):\n"
             "    threading.Thread(target=work, daemon=True).start()\n"
             "while True:\n"
             "    time.sleep(60)\n")
CHURN = ("while :; do sha256sum /etc/services >/dev/null; openssl rand -hex 16 >/dev/null; "
         "{py} -S -c pass; sleep 0.02; done")


def log(*args) -> None:
    print("soak:", *args, file=sys.stderr, flush=True)


def load_commands(scratch: Path, seconds: float, iperf_rate: str) -> list[list[str]]:
    """The load's commands: iperf3 server and rate-limited client over loopback, the hashing
    pool, the short-lived processes, and fio writing with fsync (a dd loop without fio)."""
    run_s = str(int(seconds) + 120)  # outlives the agent: stopped by stop_load
    cmds = [["iperf3", "-s", "-p", str(IPERF_PORT)],
            ["sh", "-c", f"sleep 1; exec iperf3 -c 127.0.0.1 -p {IPERF_PORT} -b {iperf_rate} -t {run_s} "
                         "--forceflush >/dev/null"],
            [PYTHON, "-c", HASH_POOL],
            ["sh", "-c", CHURN.format(py=PYTHON)]]
    target = scratch / "fio.dat"
    if shutil.which("fio"):
        cmds.append(["fio", "--name=soak", f"--filename={target}", "--rw=write", "--bs=64k", "--size=32m",
                     "--fsync=16", "--rate=4m", "--time_based", f"--runtime={run_s}", "--output=/dev/null"])
    else:
        cmds.append(["sh", "-c", f"while :; do dd if=/dev/zero of={target} bs=1M count=8 conv=fsync "
                                 "status=none; sleep 1; done"])
    return cmds


def start_load(cmds: list[list[str]]) -> list[subprocess.Popen]:
    """Each command in a process group of its own (stop_load ends the group: the loops' children)."""
    return [subprocess.Popen(c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
            for c in cmds]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def proc_sample(pid: int) -> tuple[float, float, int] | None:
    """(unix time, utime + stime in s, VmRSS in kB) of ``pid``, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as fh:
            rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return time.time(), (int(fields[11]) + int(fields[12])) / CLK_TCK, rss  # fields 14, 15


def run_agent(tree: Path, rec_dir: Path, args) -> tuple[list, int]:
    """Run the agent for ``args.duration`` s, sampling it every ``args.period`` s; returns the
    samples [(t, cpu_s, rss_kb)] and its exit status."""
    keep = int(args.duration // args.window) + 3
    cmd = [PYTHON, "-m", "dpuprof", "agent", "-D", str(rec_dir), "--rotate", f"{args.window:g}s",
           "--keep", str(keep), "--listen", "127.0.0.1:0", "-d", f"{args.duration:g}"]
    env = dict(os.environ, PYTHONPATH=str(tree))
    log(" ".join(cmd[1:]), f"(from {tree})")
    agent = subprocess.Popen(cmd, cwd=tree, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = []
    next_log = time.time() + args.window
    try:
        while agent.poll() is None:
            got = proc_sample(agent.pid)
            if got is not None:
                samples.append(got)
                if got[0] >= next_log:
                    log(f"{got[0] - samples[0][0]:.0f} s: agent RSS {got[2] / 1024:.1f} MB, CPU {got[1]:.1f} s")
                    next_log += args.window
            time.sleep(args.period)
    except BaseException:  # interrupted: the agent stops too (it flushes its file on SIGTERM)
        agent.terminate()
        agent.wait(timeout=60)
        raise
    err = agent.stderr.read()
    if agent.returncode != 0:
        log(f"the agent exited {agent.returncode}: {err.strip()[-2000:]}")
    return samples, agent.returncode


def file_window(path: Path) -> dict:
    """One recording file's numbers (soak_windows.window_rows takes these)."""
    rec = load(path)
    agent_pid = rec.meta.get("recorder_pid")
    cat = rec.table("cpu_category")
    work = cat[~cat["category"].isin(NOT_WORK) & (cat["pid"] != agent_pid)]
    lost = rec.table("lost")
    own = rec.table("recorder_cpu")
    return {"file": path.name, "start": float(rec.meta["start_time"]), "end": float(rec.meta["end_time"]),
            "intervals": len(rec.table("intervals")), "complete": bool(rec.complete),
            "workload_cpu_s": float(work["cpu_s"].sum()),
            "bpf_s": observer_cost(rec, 0.0)["bpf_run_s"],  # scaled: measured in one interval in N
            "recorder_cpu_s": float((own["user_s"] + own["system_s"]).sum()) if len(own) else None,
            "lost_by_kind": {k: int(n) for k, n in lost.groupby("kind")["count"].sum().items()},
            "bytes": path.stat().st_size}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="examples:\n  sudo python3 benchmarks/agent_soak.py\n"
                                        "  sudo python3 benchmarks/agent_soak.py --duration 300 --window 60 "
                                        "--out /tmp/soak.json")
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds the agent runs (3600)")
    ap.add_argument("--window", type=float, default=600.0, help="seconds per window: the agent's --rotate (600)")
    ap.add_argument("--period", type=float, default=2.0, help="seconds between /proc samples of the agent (2)")
    ap.add_argument("--iperf-rate", default="2G", help="iperf3 -b: the loopback stream's rate (2G)")
    ap.add_argument("--loss-floor", type=int, default=20, help="judged losses per window that always pass (20)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the dpuprof checkout to run (this one)")
    ap.add_argument("--out", type=Path, help="write the samples and windows as JSON here")
    args = ap.parse_args(argv)
    if args.duration < args.window or args.window < 10 or args.period <= 0:
        ap.error("--duration must be at least one --window, --window at least 10 s, --period above 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # Stopped by SIGTERM, or by SIGINT where the shell started it in the background with SIGINT
    # ignored (nohup ... &): unwind, so that the load and the agent stop with it instead of running on.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        print("agent_soak: run as root (dpuprof agent loads eBPF probes): sudo python3 benchmarks/agent_soak.py",
              file=sys.stderr)
        return 2
    missing = [t for t in ("iperf3", "openssl", "sha256sum") if shutil.which(t) is None]
    if missing:
        print(f"agent_soak: missing {', '.join(missing)} (apt-get install iperf3 openssl coreutils)", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="dpuprof-soak-", dir="/var/tmp"))
    load_before = os.getloadavg()
    procs = start_load(load_commands(scratch, args.duration, args.iperf_rate))
    try:
        time.sleep(3)  # the load runs before the agent starts
        samples, rc = run_agent(args.tree, scratch / "rec", args)
    finally:
        stop_load(procs)
    files = sorted((scratch / "rec").glob("*.rec"))
    windows = window_rows([file_window(p) for p in files], samples, args.window)
    verdict = judge(windows, loss_floor=args.loss_floor)
    print(markdown(windows, verdict, args, load_before, os.getloadavg()))
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "agent_rc": rc,
                                        "samples": samples, "windows": windows, "verdict": verdict}, indent=1))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0 if rc == 0 and verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
