"""dpuprof/record/drain/tree.py and Workload.pids: the proc_tree map and the workload's pids are
kept to the tasks that can still matter, on synthetic readings (the map is a dict stand-in)."""

from __future__ import annotations

import ctypes as ct
import os
import threading

from dpuprof.record.drain import tree as treemod
from dpuprof.record.drain.tree import TreeDrainer, exited_leaves
from dpuprof.record.workload.targets import KEEP_CALLS, Target, Workload


def test_exited_leaves_keeps_live_tasks_named_parents_and_the_kept():
    parents = {100: 0, 200: 100, 201: 200, 202: 200, 300: 100, 400: 100}
    alive = {100, 201}.__contains__
    # 200 exited but names 201 and 202 as its children: it stays, so 201 still reaches 100.
    assert exited_leaves(parents, alive, keep=(400,)) == [202, 300]


class FakeTable(dict):
    """A BPF hash map keyed by u32: what snapshot and delete_keys use of bcc's tables."""

    Key = ct.c_uint32
    Leaf = ct.c_uint32
    map_fd = -1

    def items(self):
        return [(ct.c_uint32(k), ct.c_uint32(v)) for k, v in dict.items(self)]

    def __setitem__(self, k, v):
        dict.__setitem__(self, getattr(k, "value", k), getattr(v, "value", v))

    def __delitem__(self, k):
        dict.__delitem__(self, getattr(k, "value", k))


def test_prune_deletes_an_exited_leaf_at_the_second_pruning_and_from_the_also_maps(monkeypatch):
    tree, wl = FakeTable(), FakeTable()
    drainer = TreeDrainer({"tree": tree, "exit_cpu": FakeTable()}, recorder_pid=1, also=[wl])
    tree.update({10: 1, 11: 10, 12: 10, 13: 11})
    wl.update({10: 1, 12: 1})
    dead = {12, 13}
    monkeypatch.setattr(treemod, "_in_proc", lambda t: t not in dead)
    monkeypatch.setattr(treemod, "_listed_tasks", lambda tgids: set())
    monkeypatch.setattr(treemod, "delete_keys", lambda table, keys: [table.__delitem__(k) for k in keys])
    monkeypatch.setattr(treemod, "snapshot", lambda table, plain=False: list(dict.items(table)))
    assert drainer.prune(dict(tree)) == []  # first seen exited: still looked up by this drain
    assert drainer.prune(dict(tree)) == [12, 13]
    assert set(tree) == {1, 10, 11} and set(wl) == {10}
    # Task 11 forks 14 and exits between a reading and the pruning: 11 stays (it names 14's parent).
    dead |= {11}
    reading = dict(tree)
    drainer.prune(reading)
    tree[14] = 11
    assert drainer.prune(reading) == [] and 11 in tree


def test_parents_prunes_every_prune_every_readings(monkeypatch):
    tree = FakeTable()
    drainer = TreeDrainer({"tree": tree, "exit_cpu": FakeTable()}, recorder_pid=1)
    tree.update({10: 1, 11: 10})
    monkeypatch.setattr(treemod, "_in_proc", lambda t: t != 11)
    monkeypatch.setattr(treemod, "_listed_tasks", lambda tgids: {10} & set(tgids))
    monkeypatch.setattr(treemod, "delete_keys", lambda table, keys: [table.__delitem__(k) for k in keys])
    monkeypatch.setattr(treemod, "snapshot", lambda table, plain=False: list(dict.items(table)))
    for _ in range(2 * treemod.PRUNE_EVERY - 1):
        assert 11 in drainer.parents()  # the reading still has it while it waits
    assert 11 in drainer.parents() and 11 not in tree and drainer.pruned == 1


def test_workload_forgets_a_pid_keep_calls_after_it_left_the_tree():
    work = Workload(Target(command=("true",)), recorder_pid=1)
    work.roots = {10: 0}
    assert work.pids({10: 1, 11: 10, 12: 10}) == {10, 11, 12}
    for _ in range(KEEP_CALLS):
        assert 12 in work.pids({10: 1, 11: 10})  # pruned from the map: kept a while
    assert work.pids({10: 1, 11: 10}) == {10, 11}
    assert work.pids({10: 1, 11: 10, 12: 10}) == {10, 11, 12}  # a reused id joins again
    assert work.count == 4
    # Without the BPF tree (/proc's), every pid stays.
    assert 12 in work.pids(None) and 12 in work.pids(None)


def test_listed_tasks_names_the_threads_of_live_processes():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        live = treemod._listed_tasks({os.getpid(), 999_999_999})  # a pid that cannot exist: skipped
        assert os.getpid() in live and threading.get_native_id() in live and t.native_id in live
    finally:
        stop.set()
        t.join()
