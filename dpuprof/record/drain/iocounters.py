"""The ``net_io`` and ``block_io`` tables from the kernel's counters, for whichever of them no
opt-in per-event probe (net_dev, block_io) counts: /proc/PID/net/dev of the workload's network
namespaces (netdev.py) and /proc/diskstats (diskstats.py), read once per interval."""

from __future__ import annotations

from dpuprof.record.drain.diskstats import DiskStats
from dpuprof.record.drain.netdev import NetDevTelemetry

#: meta ``io_sources``: who counted each table (absent in older recordings: their probes did)
SOURCES = {"net_io": "/proc/PID/net/dev", "block_io": "/proc/diskstats"}


class IoCounters:
    """``sample(pids)`` returns {table: rows} (and ``events`` with the TCP retransmits) for the
    tables in ``tables``, as deltas since the previous call; construction takes the baselines."""

    def __init__(self, tables, pids=()):
        self.net = NetDevTelemetry() if "net_io" in tables else None
        self.disk = DiskStats() if "block_io" in tables else None
        self.sample(pids)

    @property
    def sources(self) -> dict[str, str]:
        """{table: counter} for meta ``io_sources``."""
        return {t: SOURCES[t] for t, c in (("net_io", self.net), ("block_io", self.disk)) if c is not None}

    def sample(self, pids) -> dict[str, list]:
        out = {}
        if self.net is not None:
            out["net_io"], retrans = self.net.sample(pids)
            out["events"] = [("tcp_retransmit", retrans)] if retrans else []
        if self.disk is not None:
            out["block_io"] = self.disk.sample()
        return out


__all__ = ["IoCounters", "SOURCES"]
