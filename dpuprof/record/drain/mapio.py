"""Reading and clearing BPF maps with few syscalls: hash maps read with BPF_MAP_LOOKUP_BATCH and
deleted with BPF_MAP_DELETE_BATCH (falling back to the entry-by-entry walk where the kernel has
no batch operations), and stack-trace maps emptied completely. A map is a load/bpfmap.BpfMap (or
anything with its interface: ``Key``, ``Leaf``, ``map_fd``, ``items()``, ``keys()``, ``del``). The drains call these every
interval, on maps of thousands of entries."""

from __future__ import annotations

import ctypes as ct
import errno
import os

from dpuprof.record.load.libbcc import lib

_BATCH = 1024  # entries per BPF_MAP_LOOKUP_BATCH or BPF_MAP_DELETE_BATCH call


def _items(array, n: int, ctype) -> list:
    """The first ``n`` elements of a ctypes array as ctypes objects (bcc's items() gives
    objects: a simple type's element would come out as a plain int)."""
    got = array[:n]
    return [ctype(v) for v in got] if issubclass(ctype, ct._SimpleCData) else got


def snapshot(table, plain: bool = False) -> list[tuple]:
    """Every (key, value) of a hash map ``table``, as ctypes objects (``plain``: a key or value of
    a simple type as its Python value: a map of every task the workload forked, read each drain,
    took 2 ms beside 4 x 128 threads as objects), read with
    BPF_MAP_LOOKUP_BATCH: one syscall per ``_BATCH`` entries instead of the walk's two per entry (next
    key, then lookup), in arrays of that size rather than bcc's own batch helper's arrays of
    ``max_entries`` (65536 sample keys are 5 MB, allocated and zeroed per call). Entries that
    change while it reads are seen with either value, as with the walk. Falls back to that walk
    where the kernel has no batch lookup."""
    out: list[tuple] = []
    token, count = ct.c_uint32(0), ct.c_uint32(0)
    first = True
    while True:
        keys, values = (table.Key * _BATCH)(), (table.Leaf * _BATCH)()
        count.value = _BATCH
        res = lib().bpf_lookup_batch(table.map_fd, None if first else ct.byref(token), ct.byref(token),
                                   ct.byref(keys), ct.byref(values), ct.byref(count))
        err = ct.get_errno()
        if res != 0 and err != errno.ENOENT:
            if first:  # EINVAL/ENOTSUPP: no batch operations here
                return [(_plain(k), _plain(v)) for k, v in table.items()] if plain else list(table.items())
            raise OSError(err, f"BPF_MAP_LOOKUP_BATCH: {os.strerror(err)}")
        n = count.value
        out.extend(zip(keys[:n], values[:n]) if plain else
                   zip(_items(keys, n, table.Key), _items(values, n, table.Leaf)))
        first = False
        if res != 0 or count.value == 0:  # ENOENT: the map's end
            return out


def _plain(obj):
    """A ctypes object of a simple type as its Python value; a structure as it is."""
    return obj.value if isinstance(obj, ct._SimpleCData) else obj


def delete_keys(table, keys: list) -> None:
    """Delete ``keys`` (ctypes keys of ``table``) with BPF_MAP_DELETE_BATCH, one syscall per
    ``_BATCH``; one by one where the kernel has no batch delete, or a key is already gone (the
    batch stops at the first missing key)."""
    for i in range(0, len(keys), _BATCH):
        part = keys[i:i + _BATCH]
        arr = (table.Key * len(part))(*part)
        count = ct.c_uint32(len(part))
        if lib().bpf_delete_batch(table.map_fd, ct.byref(arr), ct.byref(count)) == 0:
            continue
        for k in part[count.value:]:
            try:
                del table[k]
            except KeyError:
                pass


def exited_entries(entries, live, drained: dict) -> list:
    """Which entries of a per-process cumulative map may be deleted now: ``entries`` are
    [(pid, key, values)], ``live`` the pids running now, ``drained`` {key: values} as the last
    drain read them. An entry goes when its process is gone (pid 0, the idle task, never is) and
    its values are the drained ones, so no count is lost; one that changed since (the exiting
    task's last switch-out) waits for the next time. Returns the keys, in ``entries``' order."""
    return [key for pid, key, values in entries if pid and pid not in live and drained.get(key) == values]


def prune_exited(table, drained: dict, live, key_of, values_of) -> int:
    """Delete from hash map ``table`` the entries of exited processes whose counts were drained
    (``exited_entries``), and drop them from ``drained`` (the drainer's previous reading, keyed by
    ``key_of(ctypes key)`` whose first item is the pid, values ``values_of(ctypes value)``). A pid the
    kernel reuses afterwards starts a new entry from 0, which the drainer counts whole. Returns
    how many entries were deleted."""
    raw = {}
    entries = []
    for k, v in snapshot(table):
        key = key_of(k)
        raw[key] = k
        entries.append((key[0] if isinstance(key, tuple) else key, key, values_of(v)))
    gone = exited_entries(entries, live, drained)
    delete_keys(table, [raw[key] for key in gone])
    for key in gone:
        drained.pop(key, None)
    return len(gone)


def clear_stack_map(table) -> int:
    """Delete every stack id in a STACK_TRACE map ``table``; returns how many were deleted.

    Complete: the ids come from the map itself (``BPF_MAP_GET_NEXT_KEY``), not from the drained
    counts, so stacks whose sample was dropped (counts map full) are freed too. The ids are listed
    first and deleted after, since deleting during the walk would restart it. Cost: two syscalls
    per stored stack. Only call it on the buffer the BPF program is not writing."""
    ids = [k.value for k in table.keys()]
    n = 0
    for sid in ids:
        try:
            del table[table.Key(sid)]
            n += 1
        except KeyError:
            pass
    return n


def delete_stack_ids(table, ids) -> int:
    """Delete the stack ``ids`` from a STACK_TRACE map ``table``, one syscall each (no walk of the
    map's keys); returns how many were there."""
    key = table.Key()
    n = 0
    for sid in ids:
        key.value = sid
        n += lib().bpf_delete_elem(table.map_fd, ct.byref(key)) == 0
    return n
