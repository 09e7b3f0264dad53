"""Host metadata stored in every Recording (see recording/schema.py for the keys), and the job
identity that lets ``dpuprof report node-*.rec`` tell the nodes of one job from unrelated runs."""

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


#: Where a job id comes from, in order of precedence (the first one set wins). torchrun sets
#: TORCHELASTIC_RUN_ID to its --rdzv-id, whose default "none" names no job: it is skipped.
JOB_ID_VARS = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
#: Rank variables kept beside the job id where the launcher set them (strings, as in the environment).
RANK_VARS = ("SLURM_PROCID", "SLURM_NODEID", "RANK", "NODE_RANK")


def job_identity(job_id: str | None = None, env=None, host: str | None = None) -> dict:
    """The meta ``job`` object: ``job_id`` (``--job-id``, else the first of JOB_ID_VARS set, else
    None), ``job_id_source`` ("--job-id", the variable's name, or None), ``host``, and each of
    RANK_VARS that is set. Pure: ``env`` defaults to ``os.environ``."""
    env = os.environ if env is None else env
    out = {"job_id": None, "job_id_source": None}
    if job_id:
        out = {"job_id": str(job_id), "job_id_source": "--job-id"}
    else:
        for var in JOB_ID_VARS:
            value = (env.get(var) or "").strip()
            if value and not (var == "TORCHELASTIC_RUN_ID" and value == "none"):
                out = {"job_id": value, "job_id_source": var}
                break
    out["host"] = host if host is not None else socket.gethostname()
    out.update({var: env[var] for var in RANK_VARS if env.get(var)})
    return out


def host_metadata(job_id: str | None = None) -> dict:
    """The host's metadata keys (schema.py), with ``job`` from :func:`job_identity`."""
    host = socket.gethostname()
    return {
        "dpuprof_version": __version__,
        "host": host,
        "job": job_identity(job_id, host=host),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "nic_speeds_mbps": nic_speeds_mbps(),
        "python": platform.python_version(),
    }
