"""Data lost in the kernel, as a share of what each loss affects (worst first).

The ``lost`` table counts what the probes could not record. A bare count says little ("x 76,427"):
this module puts each kind beside the number of things of the same sort that were recorded, so a
reader sees whether 0.01 % or 15 % of the softirq events are missing.

Which denominator each kind gets:

- ``samples_*`` and ``run_map_full``: the CPU samples taken (``cpu_category.samples``, idle
  included) plus the lost ones (a lost sample is not in the table);
- ``kernel_stack_lost``, ``user_stack_lost`` and the other ``*_stack_*`` kinds (``*_stack_collision``):
  the samples taken (the sample was kept, with a fallback leaf frame; only its stack is missing);
- ``missed_<program>``: the events that program records, where the recording counts them
  (``PROGRAM_EVENTS``), plus the missed ones; other programs' totals are unknown and the loss is
  shown as a count alone;
- ``block_start_map_full``: the block IOs completed plus the lost ones.
"""

from __future__ import annotations

from dataclasses import dataclass

#: missed_<program> -> (what its events are, a function of the recording's tables -> events recorded)
PROGRAM_EVENTS = {
    "softirq_entry": ("softirq events", lambda t: t["softirq"]["count"].sum()),
    "softirq_exit": ("softirq events", lambda t: t["softirq"]["count"].sum()),
    "net_dev_xmit": ("transmitted packets", lambda t: _dir(t["net_io"], "tx")),
    "netif_receive_skb": ("received packets", lambda t: _dir(t["net_io"], "rx")),
    "block_rq_complete": ("block IOs", lambda t: t["block_io"]["ios"].sum()),
    "tcp_retransmit_skb": ("TCP retransmits",
                           lambda t: t["events"].loc[t["events"]["event"] == "tcp_retransmit", "count"].sum()),
}


def _dir(net, direction: str) -> float:
    return net.loc[net["direction"] == direction, "packets"].sum()


@dataclass(frozen=True)
class Loss:
    """One loss kind: ``count`` lost out of ``of`` (``None``: not known) ``what``."""

    kind: str
    count: int
    of: int | None
    what: str

    @property
    def share(self) -> float | None:
        return self.count / self.of if self.of else None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "count": self.count, "of": self.of, "what": self.what,
                "share": None if self.share is None else round(self.share, 6)}

    def text(self) -> str:
        if self.share is None:
            return f"{self.kind} {self.count:,} {self.what} (total not recorded)"
        return f"{self.kind} {100 * self.share:.2f} % of {self.of:,} {self.what}"


def _denominator(kind: str, count: int, tables: dict) -> tuple[int | None, str]:
    samples = int(tables["cpu_category"]["samples"].sum())
    if "_stack_" in kind:  # kernel_/user_stack_lost, *_stack_collision: the sample kept, its stack not
        return samples, "samples (stack missing)"
    if kind.startswith("samples") or kind == "run_map_full":
        return samples + count, "samples"
    if kind == "block_start_map_full":
        return int(tables["block_io"]["ios"].sum()) + count, "block IOs"
    if kind.startswith("missed_") and kind[7:] in PROGRAM_EVENTS:
        what, total = PROGRAM_EVENTS[kind[7:]]
        return int(total(tables)) + count, what
    return None, "events" if kind.startswith("missed_") else "lost"


def losses(tables: dict) -> list[Loss]:
    """Every loss kind with a count > 0, worst first: largest share first, then the kinds whose
    total is unknown by count. ``tables``: recording table name -> DataFrame (``Recording.table``).
    """
    lost = tables["lost"]
    if lost.empty:
        return []
    out = []
    for kind, count in lost.groupby("kind")["count"].sum().items():
        if count <= 0:
            continue
        of, what = _denominator(str(kind), int(count), tables)
        out.append(Loss(str(kind), int(count), of or None, what))
    return sorted(out, key=lambda x: (x.share is None, -(x.share or 0.0), -x.count, x.kind))


def from_recording(rec) -> list[Loss]:
    """:func:`losses` of a loaded Recording."""
    names = ("lost", "cpu_category", "softirq", "net_io", "block_io", "events")
    return losses({n: rec.table(n) for n in names})


def warning(found: list[Loss]) -> str | None:
    """One line naming every loss kind, worst first, or None when nothing was lost."""
    if not found:
        return None
    return "data lost in the kernel (the lost table), worst first: " + "; ".join(x.text() for x in found)
