"""Drain the BPF maps once per interval into rows for the Recording.

Counters in the maps are cumulative (lossless under concurrent updates); each drainer keeps the
previous reading and returns deltas. The CPU sample counts are double-buffered instead (see
probes/cpu_sample.bpf.c) because their stack maps must be emptied.

bcc 0.26's ``StackTrace.clear()`` does nothing (``def clear(self): pass``), so the stack maps are
emptied here by deleting the ids the drained samples name (``delete_stack_ids``), and every id
the map holds every CLEAR_WALK_EVERY drains (``clear_stack_map``); left full, ``bpf_get_stackid``
fails with -EEXIST on every bucket collision and stack loss grows with the run's length.
"""

from __future__ import annotations

import ctypes as ct
import os
import time
from collections import Counter, defaultdict

from dpuprof.categories import IDLE, top_level
from dpuprof.record.stacks.classify import Classifier, fold
from dpuprof.record.drain.mapio import clear_stack_map, delete_keys, delete_stack_ids, prune_exited, snapshot
from dpuprof.record.lru import Lru
from dpuprof.record.stacks.perfmap import SUFFIX as PERFMAP_SUFFIX
from dpuprof.record.drain.progstats import recursion_misses

SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
BLOCK_OPS = ("read", "write", "other")
NET_DIRS = ("tx", "rx")
SOCK_DIRS = ("send", "recv")
IPPROTO = {6: "tcp", 17: "udp", 132: "sctp", 262: "mptcp", 136: "udplite"}
KERNEL_SPACE = 0xFFFF800000000000  # x86-64: addresses at or above are kernel text
SPILL_BIT = 0x40000000  # probes/cpu_sample.bpf.c: the stack id is one of spillN's, not stacksN's
IDLE_LEAF = -2  # probes/cpu_sample.bpf.c (-ENOENT) in key.kstack: an idle leaf at key.ip, not walked
MAX_IDLE_LEAVES = 64  # idle_ips's size: an idle loop is sampled at a handful of instructions
_FLIP_SETTLE_S = 0.002  # lets a sample already past the `active` read finish on another CPU
# Distinct stacks interned at once. A host where jobs come and go meets new stacks for weeks (a
# 4-minute system-wide run with a loop of short-lived processes interned 1,843, ~6 a second); each
# holds ~0.7 KB (tracemalloc) here and in the rotating writer's copy, so this bound is ~3 MB,
# reached within a 10-minute window at that rate. The least recently sampled are forgotten; one
# sampled again later is interned anew under a new id (a file may then hold the same folded stack
# under two ids: every reader sums samples by folded stack, not by id).
MAX_STACKS = 4096
# A drain deletes the stack ids its samples refer to; every this many drains it walks the map's
# keys instead, so a stack no sample refers to (its count lost: counts map full) is freed too.
# The walk costs two syscalls per stored stack, the delete by id one.
CLEAR_WALK_EVERY = 16


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


def process_comms(keys) -> tuple[dict[int, str], set[int]]:
    """({pid: comm}, pids named by their main thread) from sampled keys (tgid, tid, comm bytes,
    samples): per process, the name its main thread (tid = tgid) carried in the most samples, else
    the one its threads carried in the most (then not in the set: a pool thread's name is not the
    process's, which /proc gives while it lives; recorder.py ``_note_process``). Until 2026-12-06
    the first key's name was taken, in the hash map's order: a sample caught between fork and
    exec, still under the parent's name, could name an ``openssl`` helper ``sh`` (one fresh-clone
    suite run found 19 of 20 helpers named ``openssl``, tests/test_short_lived_root.py; 40 runs
    alone did not repeat it)."""
    votes: dict[int, Counter] = {}
    for tgid, tid, comm, n in keys:
        votes.setdefault(tgid, Counter())[(tid == tgid, comm)] += n
    names, by_main = {}, set()
    for pid, counted in votes.items():
        (main, comm), _n = max(counted.items(), key=lambda kv: (kv[0][0], kv[1], kv[0][1]))
        names[pid] = comm.decode("utf-8", "replace")
        if main:
            by_main.add(pid)
    return names, by_main


class SampleDrainer:
    """Drains cpu_sample: classified CPU per process plus folded stacks.

    ``drain()`` returns a dict with ``cpu`` {(pid, subcategory): samples} (equal-weight counts:
    the mix, turned into time by accounting.py), ``stacks`` {(pid, stack_id):
    samples}, ``new_stacks`` [(stack_id, folded, category, subcategory, cause)], ``dropped_stacks``
    [stack_id] forgotten (MAX_STACKS: never referred to again), ``comms`` {pid: comm} and
    ``main_named`` (the pids whose name is their main thread's: ``process_comms``),
    ``thread_cpu`` {(tid, subcategory): samples} of workload threads.

    Python frames (``python_frames``): each drain gives the probe the trampoline address range of
    every workload process with a perf map (py_ranges), and puts the Python frames its stack scan
    found (key.py) before the native user frames, outermost first. Categories are classified from
    the native frames alone, so they do not change with Python frames on or off.
    """

    def __init__(self, bpf, symbolizer, classifier: Classifier, python_frames: bool = True,
                 max_stacks: int = MAX_STACKS):
        """Drains cpu_sample's maps; symbols through ``symbolizer``, categories via ``classifier``;
        at most ``max_stacks`` stacks interned at once."""
        self.bpf = bpf
        self.python_frames = python_frames
        self.py_ranges = bpf["py_ranges"] if python_frames else None
        self.py_pushed: dict[int, tuple[int, int]] = {}  # pid -> range last written to py_ranges
        self.sym = symbolizer
        self.classifier = classifier
        self.counts = bpf["counts"]
        self.stacks = (bpf["stacks0"], bpf["stacks1"])
        self.spills = (bpf["spill0"], bpf["spill1"])
        self.active = bpf["active"]
        self.buf = 0
        self.stack_ids = Lru(max_stacks)  # (folded, thread rule's subcategory or None) -> id
        self.stack_class: dict[int, str] = {}  # id -> subcategory, of the ids in stack_ids
        self.last_id = 0  # ids are never reused: a forgotten one may still be in the current file
        self.cleared = 0  # stack ids deleted by the last drain (a check that clearing happens)
        self.drains = 0
        self.idle_ips = bpf["idle_ips"]
        self.idle_checked: set[int] = set()  # leaves of idle stacks looked at (written or not)
        self.idle_written = 0

    def _addresses(self, buf: int, stack_id: int) -> tuple[int, ...]:
        """The addresses of stack ``stack_id`` of buffer ``buf``, outermost first; () when the
        id is an error or no longer in its map. (One slice of the map value: bcc's walk() made
        a Python call per frame.)"""
        if stack_id < 0:
            return ()
        table = self.spills[buf] if stack_id & SPILL_BIT else self.stacks[buf]
        try:
            ips = table[table.Key(stack_id & ~SPILL_BIT)].ip[:]
        except KeyError:
            return ()
        try:
            del ips[ips.index(0):]  # the walk's depth: the rest of the value is zeros
        except ValueError:
            pass
        ips.reverse()
        return tuple(ips)

    def _flip(self) -> list[tuple]:
        """Switch buffers; take and delete the old buffer's (key, samples) entries."""
        old = self.buf
        self.buf = 1 - old
        self.active[ct.c_int(0)] = ct.c_uint32(self.buf)
        time.sleep(_FLIP_SETTLE_S)
        entries = [(k, v.value) for k, v in snapshot(self.counts) if k.buf == old]
        delete_keys(self.counts, [k for k, _ in entries])
        return entries

    def _push_python_ranges(self, workload, processes, sampled: set[int]) -> None:
        """Write each workload process's trampoline range to py_ranges when it changed; drop
        processes that exited. The candidates: ``processes`` (the workload's processes, so that
        a range is in place before a process is first sampled) and the workload processes
        sampled this interval. (Every workload id was a candidate until 2026-12-06, each thread's
        too: a perf map looked for 512 times a drain beside 4 x 128 threads.)"""
        for pid in [p for p in self.py_pushed if p not in workload or not os.path.exists(f"/proc/{p}")]:
            self.py_pushed.pop(pid)
            try:
                del self.py_ranges[self.py_ranges.Key(pid)]
            except KeyError:
                pass
        for pid in set(processes) | {p for p in sampled if p in workload}:
            rng = self.sym.python_range(pid)
            if rng is not None and self.py_pushed.get(pid) != rng:
                self.py_ranges[self.py_ranges.Key(pid)] = self.py_ranges.Leaf(*rng)
                self.py_pushed[pid] = rng

    def _python(self, pid: int, addrs) -> list[str]:
        """Python frames, outermost first, from a sample's scanned addresses (innermost first)."""
        frames = (self.sym.python(pid, a) for a in reversed(addrs) if a)
        return [f for f in frames if f is not None]

    def _clear(self, buf: int, entries=None) -> None:
        """Empty buffer ``buf``'s stack maps: delete the ids of ``entries`` (the drained keys), or
        walk the maps' keys (``entries`` None, and every CLEAR_WALK_EVERY drains)."""
        self.drains += 1
        if entries is None or self.drains % CLEAR_WALK_EVERY == 0:
            self.cleared = clear_stack_map(self.stacks[buf]) + clear_stack_map(self.spills[buf])
            return
        ids = {i for k, _ in entries for i in (k.kstack, k.ustack) if i >= 0}
        self.cleared = (delete_stack_ids(self.stacks[buf], [i for i in ids if not i & SPILL_BIT])
                        + delete_stack_ids(self.spills[buf], [i & ~SPILL_BIT for i in ids if i & SPILL_BIT]))

    def _sample_frames(self, buf: int, k, full: bool) -> tuple[list, list, list]:
        """(kernel, Python, native user) frames of one sampled key, outermost first."""
        pid = k.tgid
        kframes = self.sym.kernel_stack(self._addresses(buf, k.kstack))
        uframes = self.sym.user_stack(pid, self._addresses(buf, k.ustack), full)
        if k.ip and (k.kstack < 0 or k.ustack < 0):
            # A stack walk failed (counted in `lost`), or none was made (IDLE_LEAF): fall back
            # to the sampled leaf frame.
            if k.ip >= KERNEL_SPACE and not kframes:
                kframes = [self.sym.kernel(k.ip)]
            elif k.ip < KERNEL_SPACE and not uframes:
                uframes = [self.sym.user(pid, k.ip, full)]
        if not kframes and not uframes:
            # A stack walk failed (counted in `lost`); pid 0 is still the idle task.
            kframes = ["[idle]"] if pid == 0 else []
            uframes = [] if pid == 0 else ["[no stack]"]
        pyframes = self._python(pid, k.py) if full and self.python_frames and k.py[0] else []
        if pyframes and any(f.endswith(PERFMAP_SUFFIX) for f in uframes):
            pyframes = []  # the walk reached the trampolines itself (a frame-pointer build)
        return kframes, pyframes, uframes

    def prime(self) -> None:
        """Discard everything counted so far, so the first interval starts now."""
        self._flip()
        # The buffer now written was emptied by the previous drain (or never used since load).
        self._clear(1 - self.buf)

    def drain(self, workload: set[int], processes=()) -> dict:
        """Symbol names are resolved for ``workload`` processes, which go first so that they are
        resolved before they can exit; other processes get module names only (cheap).
        ``processes``: the workload's live processes (thread-group leaders), whose Python ranges
        are pushed before they are sampled (empty system-wide: the sampled ones only)."""
        gone = self.sym.dead()  # exited before the flip: all their samples are in this drain
        entries = self._flip()
        self.sym.new_generation()
        if self.python_frames:
            self._push_python_ranges(workload, processes, {k.tgid for k, _ in entries})
        entries.sort(key=lambda kv: kv[0].tgid not in workload)
        old = 1 - self.buf
        cpu: Counter = Counter()
        stacks: Counter = Counter()
        thread_cpu: Counter = Counter()
        comms, main_named = process_comms((k.tgid, k.tid, k.comm, n) for k, n in entries)
        new_stacks, dropped = [], []
        # The threads of a process share their stacks (the stack map stores each once): a key
        # differs from another of its process mostly by tid, so each stack is read, symbolised,
        # folded and interned once per drain, not once per key (512 keys of 4 x 128 threads).
        seen: dict[tuple, int] = {}  # (pid, stack ids, ip, comm, Python addresses) -> stack id
        try:
            for k, n in entries:
                pid = k.tgid
                full = pid in workload
                same = (pid, k.kstack, k.ustack, k.ip, k.comm, bytes(k.py))
                sid = seen.get(same)
                if sid is None:
                    kframes, pyframes, uframes = self._sample_frames(old, k, full)
                    folded = fold(kframes, pyframes + uframes)
                    comm = k.comm.decode("utf-8", "replace")  # the sampled thread's name: thread rules
                    sid = seen[same] = self._intern(folded, comm, pid, kframes, uframes, new_stacks, dropped)
                    if pid == 0 and k.kstack >= 0 and self.stack_class[sid] == IDLE:
                        self._learn_idle(old, k.kstack)
                sub = self.stack_class[sid]
                cpu[(pid, sub)] += n
                stacks[(pid, sid)] += n
                if full:
                    thread_cpu[(k.tid, sub)] += n
        finally:
            self._clear(old, entries)  # even when symbolising failed: a full map loses stacks
        self.sym.forget(gone)
        return {"cpu": cpu, "stacks": stacks, "new_stacks": new_stacks, "dropped_stacks": dropped,
                "comms": comms, "main_named": main_named, "thread_cpu": thread_cpu}

    def _learn_idle(self, buf: int, kstack: int) -> None:
        """Add the leaf of idle stack ``kstack`` to the probe's idle_ips when that frame alone
        classifies as idle, so that later samples of the idle task there walk no stack; the
        category is the same either way, as the classifier decides from the leaf outwards."""
        addrs = self._addresses(buf, kstack)
        leaf = addrs[-1] if addrs else 0
        if not leaf or leaf in self.idle_checked or self.idle_written >= MAX_IDLE_LEAVES:
            return
        self.idle_checked.add(leaf)
        if self.classifier.classify([self.sym.kernel(leaf)], []) == IDLE:
            self.idle_ips[self.idle_ips.Key(leaf)] = self.idle_ips.Leaf(1)
            self.idle_written += 1

    def _intern(self, folded: str, comm: str, pid: int, kframes, uframes, new_stacks: list, dropped: list) -> int:
        """The id of a sampled stack (and its thread rule), classified and added to ``new_stacks``
        when it is new; the ids this pushes out of ``stack_ids`` go to ``dropped``."""
        key = (folded, self.classifier.thread_rule(comm))
        sid = self.stack_ids.get(key)
        if sid is not None:
            return sid
        sid = self.last_id = self.last_id + 1
        res = self.classifier.explain(kframes, uframes, comm)
        sub = IDLE if pid == 0 and kframes == ["[idle]"] else res.subcategory
        if pid != 0 and sub == IDLE:
            sub = "kernel_other.other"  # a task's own context is never idle
        self.stack_class[sid] = sub
        new_stacks.append((sid, folded, top_level(sub), sub, res.cause))
        for _key, old in self.stack_ids.put(key, sid):
            self.stack_class.pop(old, None)
            dropped.append(old)
        return sid


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

    def drain(self) -> list[tuple]:
        cur = {}
        for arr, kinds in self.arrays:
            for i, kind in enumerate(kinds):
                cur[kind] = (int(arr[ct.c_int(i)].value),)
        for prog, n in (recursion_misses(self.bpf) or {}).items():
            cur["missed_" + prog.rsplit("__", 1)[-1]] = (n,)
        return [(kind, n) for kind, (n,) in sorted(self.cum.deltas(cur).items())]


__all__ = ["SampleDrainer", "process_comms", "SoftirqDrainer", "BlockDrainer", "NetDrainer", "SockDrainer",
           "LostDrainer"]
