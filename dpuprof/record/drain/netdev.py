"""Bytes and packets per network device, and TCP retransmits, from /proc: no program per packet.

The network offload model needs each device's bytes and packets per interval (its n and the bytes
moved: dpuprof/project/features.py), and the kernel already counts both per device. A program on
net_dev_xmit and netif_receive_skb cost two runs per packet (5 % of a core on a loopback flood
of 270,000 packets a second each way); reading ``/proc/PID/net/dev`` once per interval costs
nothing per packet and gives the same counts.

``/proc/PID/net/dev`` lists the devices of PID's network namespace; every namespace the workload's
processes live in is read (netns.py). Devices of the same name in two namespaces are summed under
that name. A namespace first seen during the recording starts from its counters then (what it
moved before is not in the recording). Packets are what each driver counts: ``lo`` and veth count
one per skb (a GSO segment of up to 64 KiB), as the tracepoints did; a physical NIC's driver
usually counts frames on the wire.

TCP retransmits: ``RetransSegs`` of each namespace's ``/proc/PID/net/snmp``.
"""

from __future__ import annotations

from dpuprof.record.drain.netns import Namespaces

# Fields of a /proc/net/dev line after "name:": rx bytes, packets, errs, drop, fifo, frame,
# compressed, multicast, then tx bytes, packets, ...
_RX_BYTES, _RX_PACKETS, _TX_BYTES, _TX_PACKETS = 0, 1, 8, 9


def parse_net_dev(text: str) -> dict[str, tuple[int, int, int, int]]:
    """{device: (tx_bytes, tx_packets, rx_bytes, rx_packets)} from /proc/net/dev text."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 10:
            continue
        try:
            out[name.strip()] = (int(fields[_TX_BYTES]), int(fields[_TX_PACKETS]),
                                 int(fields[_RX_BYTES]), int(fields[_RX_PACKETS]))
        except ValueError:
            continue
    return out


def parse_retrans(text: str) -> int:
    """``Tcp: RetransSegs`` from /proc/net/snmp text (0 when absent)."""
    lines = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
    if len(lines) >= 2 and "RetransSegs" in lines[0]:
        try:
            return int(lines[1][lines[0].index("RetransSegs")])
        except (ValueError, IndexError):
            return 0
    return 0


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


class NetDevTelemetry:
    """Per-interval ``net_io`` rows and the TCP retransmit count, as deltas since the last call."""

    def __init__(self):
        self.netns = Namespaces()
        self.prev: dict[tuple[str, str], tuple[int, int, int, int]] = {}  # (netns, dev) -> counters
        self.prev_retrans: dict[str, int] = {}
        self.quiet: set[str] = set()  # namespaces whose devices moved no byte in the last sample

    def sample(self, pids) -> tuple[list[tuple], int]:
        """(net_io rows (dev, direction, bytes, packets), TCP retransmits) since the previous call,
        over the namespaces of ``pids`` (live or not: an exited one is skipped) and this process's."""
        reps = self.netns.reps(pids)
        sums: dict[tuple[str, str], list[int]] = {}
        retrans = 0
        self.quiet = set()
        for ns, pid in reps.items():
            dev_text = _read(f"/proc/{pid}/net/dev")
            if dev_text is None:
                continue
            moved = False
            for dev, now in parse_net_dev(dev_text).items():
                before = self.prev.get((ns, dev))
                self.prev[(ns, dev)] = now
                if before is None:
                    moved = True  # a device new to us: not known to be quiet
                    continue
                d = [max(0, a - b) for a, b in zip(now, before)]
                moved = moved or d[0] > 0 or d[2] > 0
                for direction, nbytes, npackets in (("tx", d[0], d[1]), ("rx", d[2], d[3])):
                    if nbytes or npackets:
                        acc = sums.setdefault((dev, direction), [0, 0])
                        acc[0] += nbytes
                        acc[1] += npackets
            if not moved:
                self.quiet.add(ns)
            total = parse_retrans(_read(f"/proc/{pid}/net/snmp") or "")
            if ns in self.prev_retrans:
                retrans += max(0, total - self.prev_retrans[ns])
            self.prev_retrans[ns] = total
        rows = [(dev, d, b, p) for (dev, d), (b, p) in sorted(sums.items())]
        return rows, retrans


__all__ = ["NetDevTelemetry", "parse_net_dev", "parse_retrans"]
