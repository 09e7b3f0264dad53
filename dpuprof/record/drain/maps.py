"""Drain the BPF maps once per interval into rows for the Recording.

Counters in the maps are cumulative (lossless under concurrent updates); each drainer keeps the
previous reading and returns deltas. The CPU samples are drained by samples.py.
"""

from __future__ import annotations

import ctypes as ct
from collections import defaultdict

from dpuprof.record.drain.mapio import delete_keys, prune_exited, snapshot
from dpuprof.record.drain.progstats import READ, recursion_misses

SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
BLOCK_OPS = ("read", "write", "other")
NET_DIRS = ("tx", "rx")
SOCK_DIRS = ("send", "recv")
IPPROTO = {6: "tcp", 17: "udp", 132: "sctp", 262: "mptcp", 136: "udplite"}


class Cumulative:
    """Turns cumulative counters {key: tuple} into deltas since the previous call."""

    def __init__(self):
        self.prev: dict = {}

    def deltas(self, current: dict) -> dict:
        out = {}
        for key, vals in current.items():
            old = self.prev.get(key, (0,) * len(vals))
            delta = tuple(max(0, v - o) for v, o in zip(vals, old))  # never negative, even on a reset
            if any(delta):
                out[key] = delta
        self.prev = current
        return out


class SoftirqDrainer:
    """softirq: rows (cpu, vector, time_ns, count) of this interval."""

    def __init__(self, bpf):
        self.ns = bpf["sirq_ns"]
        self.count = bpf["sirq_count"]
        self.cum = Cumulative()

    def drain(self) -> list[tuple]:
        current = {}
        for vec, name in enumerate(SOFTIRQ_NAMES):
            ns = self.ns.getvalue(ct.c_int(vec))
            cnt = self.count.getvalue(ct.c_int(vec))
            for cpu, (a, b) in enumerate(zip(ns, cnt)):
                if a or b:
                    current[(cpu, name)] = (int(a), int(b))
        return [(cpu, name, ns, n) for (cpu, name), (ns, n) in sorted(self.cum.deltas(current).items())]


def _block_dev_name(dev: int) -> str:
    major, minor = dev >> 20, dev & ((1 << 20) - 1)
    try:
        with open(f"/sys/dev/block/{major}:{minor}/uevent") as fh:
            for line in fh:
                if line.startswith("DEVNAME="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return f"{major}:{minor}"


class BlockDrainer:
    """block_io: rows for block_io (dev, op, bytes, ios) and block_latency (op, le_us, count)."""

    def __init__(self, bpf):
        self.stats = bpf["blk_stats"]
        self.lat = bpf["blk_lat"]
        self.cum_io = Cumulative()
        self.cum_lat = Cumulative()
        self.names: dict[int, str] = {}

    def drain(self) -> tuple[list, list]:
        io = {}
        for k, v in snapshot(self.stats):
            name = self.names.setdefault(k.dev, _block_dev_name(k.dev))
            io[(name, BLOCK_OPS[min(k.op, 2)])] = (v.bytes, v.ios)
        lat = {(BLOCK_OPS[min(k.op, 2)], 1 << k.slot): (v.value,) for k, v in snapshot(self.lat)}
        io_rows = [(dev, op, b, n) for (dev, op), (b, n) in sorted(self.cum_io.deltas(io).items())]
        lat_rows = [(op, le, n) for (op, le), (n,) in sorted(self.cum_lat.deltas(lat).items())]
        return io_rows, lat_rows


class NetDrainer:
    """net_dev: rows for net_io (dev, direction, bytes, packets) and the retransmit count. The
    probe counts per CPU in slots named by the device (probes/net_dev.bpf.c): the CPUs' values
    are summed per name and direction."""

    def __init__(self, bpf):
        self.slots = bpf["net_slots"]
        self.retrans = bpf["tcp_retrans"]
        self.cum = Cumulative()
        self.prev_retrans = 0

    def drain(self) -> tuple[list, int]:
        cur: dict = defaultdict(lambda: (0, 0))
        for idx, per_cpu in self.slots.items():
            for slot in per_cpu:
                if not slot.packets:
                    continue
                name = bytes(ct.string_at(ct.addressof(slot.name), 16)).split(b"\0", 1)[0]
                key = (name.decode("utf-8", "replace"), NET_DIRS[idx.value & 1])
                b, p = cur[key]
                cur[key] = (b + slot.bytes, p + slot.packets)
        rows = [(dev, d, b, p) for (dev, d), (b, p) in sorted(self.cum.deltas(dict(cur)).items())]
        total = int(self.retrans[ct.c_int(0)].value)
        delta, self.prev_retrans = total - self.prev_retrans, total
        return rows, delta


class SockDrainer:
    """sock_io: rows (pid, protocol, direction, bytes, calls), the address families summed."""

    def __init__(self, bpf):
        self.stats = bpf["sock_stats"]
        self.cum = Cumulative()  # keyed by the map's own key: prune compares entries with it

    def drain(self) -> list[tuple]:
        cur = {_sock_key(k): (v.bytes, v.calls) for k, v in snapshot(self.stats)}
        out: dict = defaultdict(lambda: (0, 0))
        for (pid, _family, proto, d), (nbytes, calls) in self.cum.deltas(cur).items():
            key = (pid, IPPROTO.get(proto, str(proto)), SOCK_DIRS[min(d, 1)])
            b, c = out[key]
            out[key] = (b + nbytes, c + calls)
        return [(pid, proto, d, b, c) for (pid, proto, d), (b, c) in sorted(out.items())]

    def prune(self, live) -> int:
        """Delete the entries of exited processes already drained (SampleDrainer.prune's reason:
        sock_stats, 8192 entries, is never emptied otherwise); returns how many."""
        return prune_exited(self.stats, self.cum.prev, live, _sock_key, lambda v: (v.bytes, v.calls))


def _sock_key(k) -> tuple[int, int, int, int]:
    return (k.tgid, k.family, k.protocol, k.dir)


class SockCloseDrainer:
    """sock_close: the TCP sockets closed since the last drain, as (cookie, closer's tgid,
    bytes_acked, bytes_received) at their close (probes/sock_close.bpf.c), each entry deleted once
    read. A socket sock_diag never listed has cookie 0 and its bytes summed per closer; a close
    summed into such an entry between the read and the delete is lost (a connection's bytes)."""

    def __init__(self, bpf):
        self.final = bpf["sock_final"]
        self.opened_map = bpf["sock_opened"]
        self.opened = 0  # TCP connections established on the host so far, at the last drain

    def drain(self) -> list[tuple[int, int, int, int]]:
        self.opened = self.opened_map[ct.c_int(0)].value  # before the closes: a new one is not missed
        entries = snapshot(self.final)
        delete_keys(self.final, [k for k, _ in entries])
        return [(k.cookie, k.tgid, v.acked, v.received) for k, v in entries]


class LostDrainer:
    """Counts of data lost, as (kind, count) deltas: never silent. Kinds: map overflows
    (``samples_map_full``, ...), failed stack walks, and ``missed_<program>``: events the kernel
    skipped because another BPF program was running on that CPU (see progstats)."""

    # sample_lost[3] ("run_map_full": the run_ns map of older versions) is no longer counted.
    SAMPLE_KINDS = ("samples_map_full", "kernel_stack_collision", "user_stack_collision", "run_map_full",
                    "kernel_stack_map_full", "user_stack_map_full", "user_stack_unwalkable",
                    "kernel_stack_error", "user_stack_error")  # sample_lost[i], probes/cpu_sample.bpf.c
    SOURCES = (("sample_lost", SAMPLE_KINDS),
               ("tree_lost", ("tree_map_full", "exec_map_full", "exit_map_full")),
               ("blk_lost", ("block_start_map_full",)),
               ("net_lost", ("net_map_full",)),
               ("sock_lost", ("sock_map_full",)),
               ("sock_close_lost", ("sock_close_map_full",)),
               ("sw_lost", ("thread_map_full", "wait_map_full", "wake_unseen")))

    def __init__(self, bpf, used: list[str]):
        self.bpf = bpf
        self.arrays = []
        for table, kinds in self.SOURCES:
            try:
                self.arrays.append((bpf[table], kinds))
            except KeyError:
                continue
        self.cum = Cumulative()

    def drain(self, infos=READ) -> list[tuple]:
        """The deltas since the last call; ``infos``: the programs' progstats.prog_infos, when read."""
        cur = {}
        for arr, kinds in self.arrays:
            for i, kind in enumerate(kinds):
                cur[kind] = (int(arr[ct.c_int(i)].value),)
        for prog, n in (recursion_misses(self.bpf, infos) or {}).items():
            cur["missed_" + prog.rsplit("__", 1)[-1]] = (n,)
        return [(kind, n) for kind, (n,) in sorted(self.cum.deltas(cur).items())]


__all__ = ["Cumulative", "SoftirqDrainer", "BlockDrainer", "NetDrainer", "SockDrainer",
           "LostDrainer"]
