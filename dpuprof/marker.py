"""``dpuprof.mark_step()``: mark a training step from the workload, recorder or not.

The marker is a syscall that fails at once: ``getpgid`` of a pid that cannot exist (negative).
``dpuprof record`` sees it through the syscalls:sys_enter_getpgid tracepoint, filtered in BPF by
this magic argument (probes/uprobes.bpf.c); without a recorder it costs one failing syscall
(about a microsecond) and needs nothing else. This module imports nothing but ``os``.
"""

from __future__ import annotations

import os

MARK_MAGIC = -1685091696  # -0x64707570 ("dpup"); keep in step with probes/uprobes.bpf.c


def mark_step() -> None:
    """Record that a training step begins now (markers kind "step"); never raises."""
    try:
        os.getpgid(MARK_MAGIC)
    except OSError:
        pass
