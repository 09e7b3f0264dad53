"""Drain cpu_sample (probes/cpu_sample.bpf.c): classified CPU per process and folded stacks.

The sample counts are double-buffered (the program writes one buffer while the other is
drained) because their stack maps must be emptied. bcc 0.26's ``StackTrace.clear()`` does
nothing (``def clear(self): pass``), so the stack maps are emptied here by deleting the ids the
drained samples name (``delete_stack_ids``), and every id the map holds every CLEAR_WALK_EVERY
drains (``clear_stack_map``); left full, ``bpf_get_stackid`` fails with -EEXIST on every bucket
collision and stack loss grows with the run's length.
"""

from __future__ import annotations

import ctypes as ct
import os
import time
from array import array
from collections import Counter

from dpuprof.categories import IDLE, top_level
from dpuprof.record.drain.mapio import clear_stack_map, delete_keys, delete_stack_ids, snapshot
from dpuprof.record.lru import Lru
from dpuprof.record.stacks.classify import Classifier, fold
from dpuprof.record.stacks.perfmap import SUFFIX as PERFMAP_SUFFIX

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
# A drain deletes the stack ids its samples refer to; every this many drains, at each buffer in
# turn, it walks the map's keys instead, so a stack no sample refers to (its count lost: counts map
# full) is freed too. The walk costs two syscalls per stored stack, the delete by id one. (Until
# 2026-12-07 the walk fell on every 16th drain, which is always the same buffer's, as the drains
# alternate buffers: buffer 0 was walked only by prime.)
CLEAR_WALK_EVERY = 16


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
        self._read: dict[int, tuple[int, ...]] = {}  # stack id -> addresses, this drain's (_addresses)

    def _addresses(self, buf: int, stack_id: int) -> tuple[int, ...]:
        """The addresses of stack ``stack_id`` of buffer ``buf``, outermost first; () when the
        id is an error or no longer in its map. (One slice of the map value: bcc's walk() made
        a Python call per frame.) Each id is read once a drain (``_read``, emptied by ``drain``):
        keys that differ by their user stack share their kernel stack's id, and 743 of 1,748 reads
        in an iperf3 flood's drains were of an id read before in the same drain."""
        if stack_id < 0:
            return ()
        got = self._read.get(stack_id)
        if got is not None:
            return got
        table = self.spills[buf] if stack_id & SPILL_BIT else self.stacks[buf]
        try:
            # The value's u64s in one conversion: its `ip[:]` made a Python int of each of the
            # 127 slots, most of them the zeros after the walk's depth (2.4 against 1.0 us a read).
            ips = array("Q", bytes(table[table.Key(stack_id & ~SPILL_BIT)].ip))
        except KeyError:
            return ()
        try:
            depth = ips.index(0)  # the walk's depth: the rest of the value is zeros
        except ValueError:
            depth = len(ips)
        got = self._read[stack_id] = tuple(ips[depth - 1::-1]) if depth else ()
        return got

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
        walk the maps' keys (``entries`` None, and every CLEAR_WALK_EVERY drains for each buffer:
        two drains in a row, one of each buffer)."""
        self.drains += 1
        if entries is None or self.drains % CLEAR_WALK_EVERY in (0, 1):
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
        self._read = {}
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


__all__ = ["SampleDrainer", "process_comms", "SPILL_BIT", "IDLE_LEAF"]
