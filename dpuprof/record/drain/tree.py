"""Drain proc_tree (probes/proc_tree.bpf.c): the workload's process tree and the CPU of the
processes that ended, and keep its tree map to the tasks that can still matter."""

from __future__ import annotations

import ctypes as ct
import os

from dpuprof.record.drain.mapio import delete_keys, snapshot

# The proc_tree map is pruned of exited tasks every this many drains (TreeDrainer.prune): a
# /proc/TGID/task listing per process in the map, and a lookup per task no listing names.
PRUNE_EVERY = 10


def exited_leaves(parents: dict[int, int], alive, keep=()) -> list[int]:
    """The task ids of ``parents`` ({tid: parent tgid}) that no entry names as its parent, are
    not in ``keep`` and for which ``alive(tid)`` is False, in ``parents``' order."""
    named = set(parents.values())
    return [t for t in parents if t not in named and t not in keep and not alive(t)]


def _in_proc(tid: int) -> bool:
    return os.path.exists(f"/proc/{tid}")  # a thread's id too (hidden from the listing, not from a lookup)


def _listed_tasks(tgids) -> set[int]:
    """The live task ids of processes ``tgids`` (/proc/TGID/task), one listing each: a thread's
    entry names its own process as parent, so this covers every live thread but costs a
    listing per process, not a lookup per thread (512 lookups took ~5 ms here)."""
    live: set[int] = set()
    for tgid in tgids:
        try:
            live.update(int(name) for name in os.listdir(f"/proc/{tgid}/task"))
        except (OSError, ValueError):
            continue
    return live


class TreeDrainer:
    """proc_tree: the workload's process tree as {pid: parent tgid}, and the CPU of the processes
    that ended ({tgid: on-CPU ns of its whole life}, taken from the map: drained once).

    Every PRUNE_EVERY readings the tree map is pruned of tasks that have exited (``prune``);
    ``also`` are other BPF maps keyed by task id that follow the same tree (uprobes' ``wl``), pruned
    of the same ids."""

    def __init__(self, bpf, recorder_pid: int, also=()):
        self.tree = bpf["tree"]
        self.tree[ct.c_uint32(recorder_pid)] = ct.c_uint32(0)
        self.recorder_pid = recorder_pid
        self.exit_cpu = bpf["exit_cpu"]
        self.also = list(also)
        self.readings = 0
        self.pruned = 0  # entries deleted so far
        self.doomed: set[int] = set()  # exited leaves at the last pruning: deleted at the next

    def parents(self) -> dict[int, int]:
        """{tid: parent tgid} of every task in the map; the ids pruned after this reading are in
        it (the caller takes them into the workload now)."""
        got = dict(snapshot(self.tree, plain=True))
        self.readings += 1
        if self.readings % PRUNE_EVERY == 0:
            self.prune(got)
        return got

    def prune(self, parents: dict[int, int]) -> list[int]:
        """Delete the entries of tasks in ``parents`` (this reading) that had exited by the last
        pruning already and that no entry names as its parent; returns their ids.

        The map gets an entry for every task the workload forks, threads included, and nothing
        else removes one: a workload that starts threads or processes all the time (a pool per
        request, DataLoader workers every epoch; 180 threads a second here) filled its 131072
        entries in minutes (then forks are lost), made every drain read and walk them all, and
        left the ids of exited tasks in it for a later process under a reused id (pid_max is 32768
        on some hosts) to be followed as the workload's. An exited task that an entry names as its
        parent stays, so that its live descendants still reach the root. The parents named are
        taken again after the exit checks: a task that forked between this reading and its exit
        has its child's entry in the map by then (the fork hook runs in the parent)."""
        live = _listed_tasks(set(parents.values()))
        candidates = exited_leaves(parents, lambda t: t in live or _in_proc(t), keep=(self.recorder_pid,))
        # Only those already exited at the previous pruning: drains still look up a task that
        # exited just now (its last samples' symbols: the Symbolizer's parent_of).
        doomed, self.doomed = self.doomed, set(candidates)
        candidates = [t for t in candidates if t in doomed]
        if not candidates:
            return []
        named = {v for _, v in snapshot(self.tree, plain=True)}
        gone = [t for t in candidates if t not in named]
        self.doomed.difference_update(gone)
        delete_keys(self.tree, [self.tree.Key(t) for t in gone])
        for table in self.also:  # processes only (uprobes' wl): delete the ids it holds
            held = {k for k, _ in snapshot(table, plain=True)}
            delete_keys(table, [table.Key(t) for t in gone if t in held])
        self.pruned += len(gone)
        return gone

    def exits(self) -> dict[int, float]:
        got = {k: float(v) for k, v in snapshot(self.exit_cpu, plain=True)}
        delete_keys(self.exit_cpu, [self.exit_cpu.Key(pid) for pid in got])
        return got


__all__ = ["TreeDrainer", "exited_leaves", "PRUNE_EVERY"]
