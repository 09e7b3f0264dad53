"""Kernel symbols from /proc/kallsyms, for a recorder that is not uid 0.

bcc 0.26 resolves kernel addresses only when euid is 0: ``bcc_procutils_each_ksym`` (bcc
src/cc/bcc_proc.c) returns before opening /proc/kallsyms otherwise, so every kernel frame of a
recorder running with capabilities alone would be ``[unknown]`` and the network/storage split
(made from kernel frames) would be lost. The kernel shows real addresses in /proc/kallsyms to a
reader with CAP_SYSLOG (or to everyone when kernel.kptr_restrict is 0 and
kernel.perf_event_paranoid <= 1); this module reads them itself. See docs/kernel-notes.md.
"""

from __future__ import annotations

import bisect

KALLSYMS = "/proc/kallsyms"
TEXT_TYPES = frozenset("tTwW")  # code symbols (w/W: weak); data symbols never hold a sampled ip


def addresses_visible(path: str = KALLSYMS) -> bool:
    """Whether this process sees real addresses in /proc/kallsyms (not all zeros)."""
    try:
        with open(path) as fh:
            for _, line in zip(range(64), fh):
                if int(line.split(" ", 1)[0], 16) != 0:
                    return True
    except (OSError, ValueError):
        pass
    return False


class KernelSymbols:
    """Address -> name of the kernel (or module) function holding it, read once from ``path``."""

    def __init__(self, path: str = KALLSYMS):
        pairs = []
        try:
            with open(path) as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) >= 3 and parts[1] in TEXT_TYPES:
                        addr = int(parts[0], 16)
                        if addr:
                            pairs.append((addr, parts[2]))
        except (OSError, ValueError):
            pairs = []
        pairs.sort()
        self.starts = [a for a, _ in pairs]
        self.names = [n for _, n in pairs]

    def __len__(self) -> int:
        return len(self.starts)

    def name(self, addr: int) -> str:
        """The function at or below ``addr``, as bcc's ``BPF.ksym`` names it; ``[unknown]`` when
        ``addr`` lies below every symbol or no symbols were readable."""
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.names[i] if i >= 0 else "[unknown]"
