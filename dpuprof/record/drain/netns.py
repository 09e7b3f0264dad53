"""The network namespaces a workload lives in, each with one live process to read it through.

A device (/proc/PID/net/dev: netdev.py) and a TCP socket (sock_diag: sockdiag.py) belong to a
network namespace, so the kernel's network counters are read once per namespace that the workload's
processes live in, and the recorder's own (the host's). A job in a container or a netns (a veth,
its own ``lo``) is counted as the kernel's tracepoints counted it.
"""

from __future__ import annotations

import os


def netns_of(pid: int) -> str | None:
    """``pid``'s network namespace as the kernel names it ("net:[inode]"), or None when gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


class Namespaces:
    """``reps(pids)``: {netns: a live pid in it}, this process's namespace first; each pid's
    namespace is read once (a process rarely moves), and a pid gone from ``pids`` is forgotten."""

    def __init__(self):
        self.ns_of: dict[int, str | None] = {}

    def reps(self, pids) -> dict[str, int]:
        me = os.getpid()
        out = {}
        ns = netns_of(me)
        if ns is not None:
            out[ns] = me
        live = set(pids)
        for pid in [p for p in self.ns_of if p not in live]:
            del self.ns_of[pid]
        for pid in live:
            if pid not in self.ns_of:
                self.ns_of[pid] = netns_of(pid)
            ns = self.ns_of[pid]
            if ns is not None and ns not in out and os.path.exists(f"/proc/{pid}/net/dev"):
                out[ns] = pid
        return out


__all__ = ["Namespaces", "netns_of"]
