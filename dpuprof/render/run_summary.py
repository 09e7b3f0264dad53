"""A run's summary, typed: the figures the report's tables read, derived once from the summary
contract (``dpuprof.recording.summary.summarize`` plus the report's additions, render/view.py
``build_view`` and render/merge.py ``job_summary``), beside the contract itself, which
``--format json`` prints unchanged (``contract``).

Units: bytes, IOs, CPU seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpuprof.categories import INFRASTRUCTURE
from dpuprof.recording.summary import ReportSummary


@dataclass(frozen=True)
class ProcessRow:
    """One of the workload's processes: CPU seconds busy, of which in infrastructure categories
    (None without a category split); ``node`` names the job's node it ran on (a job total)."""

    pid: int
    comm: str
    cpu_s: float
    infra_s: float | None
    node: str | None = None


@dataclass(frozen=True)
class RunSummary:
    #: the JSON contract (what ``--format json`` prints for the run)
    contract: ReportSummary
    #: network bytes sent and received, and who counted them ("bpf" or "procfs")
    tx_bytes: int
    rx_bytes: int
    net_source: str
    #: block-device bytes and IOs, and who counted them
    read_bytes: int
    write_bytes: int
    read_ios: int
    write_ios: int
    io_source: str
    #: the workload's processes, busiest first
    processes: tuple[ProcessRow, ...]

    @property
    def net_bytes(self) -> int:
        return self.tx_bytes + self.rx_bytes

    @property
    def disk_bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def ios(self) -> int:
        return self.read_ios + self.write_ios

    @property
    def window(self) -> dict | None:
        """--time: {start_s, end_s, intervals, how}, or None for the whole recording."""
        return self.contract.get("window")

    @property
    def lost_shares(self) -> list[dict]:
        return self.contract.get("lost_shares", [])

    @classmethod
    def of(cls, contract: ReportSummary) -> "RunSummary":
        """The typed summary of ``contract`` (a dict from ``summarize``, which always writes the
        ``net``, ``io`` and ``processes`` keys; the process rows' ``node`` only in a job's)."""
        net, io = contract["net"], contract["io"]
        rows = tuple(ProcessRow(pid=int(p["pid"]), comm=str(p["comm"] or ""), cpu_s=float(p["cpu_s"]),
                                infra_s=None if p["by_category"] is None else
                                sum(float(p["by_category"][c]) for c in INFRASTRUCTURE),
                                node=p.get("node"))  # only a job's processes carry a node
                     for p in contract["processes"])
        return cls(contract=contract, tx_bytes=net["tx_bytes"], rx_bytes=net["rx_bytes"], net_source=net["source"],
                   read_bytes=io["read_bytes"], write_bytes=io["write_bytes"], read_ios=io["read_ios"],
                   write_ios=io["write_ios"], io_source=io["source"], processes=rows)
