"""The suite's configuration: paths, the commands it launches, the full and --quick settings."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]  # benchmarks/
ROOT = BENCH.parent

PYTHON = os.path.realpath(sys.executable)  # the real interpreter, not a pyenv shim
DPUPROF = [PYTHON, "-m", "dpuprof"]
TOGETHER = [PYTHON, str(BENCH / "together.py")]
PERF_RECORD = ["perf", "record", "-a", "-g", "-F", "99"]
TOOLS = {"iperf3": "iperf3", "fio": "fio", "openssl": "openssl", "pigz": "pigz", "zstd": "zstd",
         "perf": "linux-perf"}
MINIMAL = "cpu_sample,proc_tree"  # always loaded; the other probes are measured on top of these
# Which probe each workload exercises, for the per-probe cost (a probe costs per event it handles).
PROBE_WORKLOAD = {"softirq": "iperf3", "net_dev": "iperf3", "sock_io": "iperf3", "block_io": "fio"}


@dataclass
class Config:
    quick: bool
    acc_reps: int
    acc_alone_s: int
    acc_together_s: int
    acc_alone: bool
    iperf_rounds: int
    iperf_s: int
    fio_rounds: int
    fio_s: int
    ddp_rounds: int
    ddp_s: int
    long_s: int
    startup_reps: int
    report_runs: int
    pigz_mb: int = 256
    ddp_extra: list = field(default_factory=list)


FULL = Config(quick=False, acc_reps=3, acc_alone_s=6, acc_together_s=10, acc_alone=True,
              iperf_rounds=5, iperf_s=4, fio_rounds=4, fio_s=4, ddp_rounds=4, ddp_s=20, long_s=600,
              startup_reps=5, report_runs=5)
QUICK = Config(quick=True, acc_reps=1, acc_alone_s=2, acc_together_s=4, acc_alone=False,
               iperf_rounds=1, iperf_s=1, fio_rounds=1, fio_s=1, ddp_rounds=1, ddp_s=3, long_s=6,
               startup_reps=1, report_runs=1, pigz_mb=64, ddp_extra=["--shards", "4"])


def log(msg: str) -> None:
    """A time-stamped progress line on stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

