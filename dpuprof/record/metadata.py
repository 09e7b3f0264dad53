"""Host metadata stored in every Recording (see recording/schema.py for the keys)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from dpuprof import __version__


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def nic_speeds_mbps() -> dict[str, int | None]:
    """Link speed per interface from sysfs (None where the driver does not say, e.g. virtio)."""
    out = {}
    for dev in sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []:
        try:
            speed = int(Path(f"/sys/class/net/{dev}/speed").read_text().strip())
            out[dev] = speed if speed > 0 else None
        except (OSError, ValueError):
            out[dev] = None
    return out


def host_metadata() -> dict:
    return {
        "dpuprof_version": __version__,
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "nic_speeds_mbps": nic_speeds_mbps(),
        "python": platform.python_version(),
    }
