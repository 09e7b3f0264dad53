"""The machine the suite ran on: host, kernel, CPU, memory, versions of dpuprof and the tools, and
how busy it was before and after (RESULTS.md states it beside every number)."""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import socket
import subprocess
import time
from pathlib import Path

from dpuprof import __version__
from dpuprof.record.metadata import cpu_model

from .config import ROOT


def machine_info() -> dict:
    """Host, kernel, CPU model and count, memory (GiB), Python, dpuprof version and git commit, the
    tools' versions and the date (UTC)."""
    def cmd_out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    mem = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    versions = {
        "iperf3": cmd_out(["iperf3", "--version"]).splitlines()[0:1],
        "fio": cmd_out(["fio", "--version"]).splitlines()[0:1],
        "openssl": cmd_out(["openssl", "version"]).splitlines()[0:1],
        "pigz": cmd_out(["pigz", "--version"]).splitlines()[0:1],
        "zstd": cmd_out(["zstd", "--version"]).splitlines()[0:1],
        "perf": cmd_out(["perf", "--version"]).splitlines()[0:1],
    }
    return {
        "host": socket.gethostname(), "kernel": platform.release(), "cpu_model": cpu_model(),
        "cpus": os.cpu_count(), "memory_gib": round(mem, 1), "python": platform.python_version(),
        "dpuprof_version": __version__, "git_commit": cmd_out(["git", "rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(cmd_out(["git", "status", "--porcelain", "--untracked-files=no"])),
        "tool_versions": {k: (v[0].strip("* ") if v else "?") for k, v in versions.items()},
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def loadavg() -> list[float]:
    """The 1, 5 and 15-minute load averages."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def busy_fraction(seconds: float = 2.0) -> float:
    """Host CPU busy fraction over ``seconds`` (from /proc/stat), before the suite starts."""
    def read():
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(f), f[3] + f[4]
    t1, i1 = read()
    time.sleep(seconds)
    t2, i2 = read()
    return 1 - (i2 - i1) / max(1, t2 - t1)

