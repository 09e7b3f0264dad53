"""The ``net_io``, ``block_io`` and ``sock_io`` tables from the kernel's counters, for whichever
of them no opt-in per-event probe (net_dev, block_io, sock_io) counts: /proc/PID/net/dev of the
workload's network namespaces (netdev.py), /proc/diskstats (diskstats.py) and the TCP sockets'
counters through sock_diag (sockdiag.py), read once per interval."""

from __future__ import annotations

from dpuprof.record.drain.diskstats import DiskStats
from dpuprof.record.drain.netdev import NetDevTelemetry
from dpuprof.record.drain.sockdiag import SockCounters

#: meta ``io_sources``: who counted each table (absent in older recordings: their probes did)
SOURCES = {"net_io": "/proc/PID/net/dev", "block_io": "/proc/diskstats",
           "sock_io": "sock_diag tcp_info (TCP bytes; calls not counted)"}
#: The tables a counter can fill.
TABLES = frozenset(SOURCES)


class IoCounters:
    """``sample(pids)`` returns {table: rows} (and ``events`` with the TCP retransmits) for the
    tables in ``tables``, as deltas since the previous call; construction takes the baselines."""

    def __init__(self, tables, pids=()):
        self.net = NetDevTelemetry() if "net_io" in tables else None
        self.disk = DiskStats() if "block_io" in tables else None
        self.sock = SockCounters() if "sock_io" in tables else None
        self.sample(pids)

    @property
    def sources(self) -> dict[str, str]:
        """{table: counter} for meta ``io_sources``."""
        return {t: SOURCES[t] for t, c in (("net_io", self.net), ("block_io", self.disk), ("sock_io", self.sock))
                if c is not None}

    def sample(self, pids, closed_sockets=(), sockets_opened: int | None = None) -> dict[str, list]:
        """``closed_sockets``, ``sockets_opened``: the probe sock_close's rows since the last call
        and its count of connections established (sockdiag.py)."""
        out = {}
        if self.net is not None:
            out["net_io"], retrans = self.net.sample(pids)
            out["events"] = [("tcp_retransmit", retrans)] if retrans else []
        if self.disk is not None:
            out["block_io"] = self.disk.sample()
        if self.sock is not None:
            # Where the device counters are read too, a namespace whose devices moved nothing is
            # not dumped (no socket in it moved payload).
            quiet = self.net.quiet if self.net is not None else frozenset()
            out["sock_io"] = self.sock.sample(pids, quiet, closed_sockets, sockets_opened)
        return out


__all__ = ["IoCounters", "SOURCES"]
