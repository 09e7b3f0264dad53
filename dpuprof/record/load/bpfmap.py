"""BPF maps read and written by their fds: what the drains hold instead of bcc's tables.

A ``BpfMap`` answers as a bcc table does, for the part the drains use: ``map[key]`` (KeyError when
absent), assignment, ``del``, ``keys()``, ``items()``, ``values()``, ``clear()``, and the ctypes
``Key`` and ``Leaf`` with the ``map_fd`` that drain/mapio.py's batch calls take. A per-CPU array
(``PerCpuArray``) gives a value per possible CPU (``getvalue``, ``sum``), a perf event array
(``PerfEventArray``) opens per-CPU perf buffers and decodes their records (``event``). The types
come from the entry the probes were loaded from (probe_cache.py): bcc's descriptions of each key
and value, decoded once (libbcc.decode_type).
"""

from __future__ import annotations

import ctypes as ct
import json
import os
import re

from dpuprof.record.load.libbcc import LOST_CB, RAW_CB, PerfBufferOpts, decode_type, lib, online_cpus, possible_cpus

# enum bpf_map_type (include/uapi/linux/bpf.h)
ARRAY_TYPES = {2, 3, 4, 6}  # ARRAY, PROG_ARRAY, PERF_EVENT_ARRAY, PERCPU_ARRAY: a slot per index, never deleted
PERCPU_ARRAY = 6
PERF_EVENT_ARRAY = 4
_EVENT_TYPES = {"u8": ct.c_uint8, "s8": ct.c_int8, "u16": ct.c_uint16, "s16": ct.c_int16, "u32": ct.c_uint32,
                "s32": ct.c_int32, "int": ct.c_int, "unsigned int": ct.c_uint, "u64": ct.c_uint64,
                "s64": ct.c_int64, "char": ct.c_char, "unsigned long long": ct.c_ulonglong}


class BpfMap:
    """One map by its fd (see the module docstring). Not thread-safe beyond what the kernel's
    map operations are; the fd belongs to the LoadedProbes that made it."""

    def __init__(self, name: str, fd: int, map_type: int, key, leaf, max_entries: int):
        self.name, self.map_fd, self.map_type, self.max_entries = name, fd, map_type, max_entries
        self.Key, self.Leaf = key, leaf

    def _key(self, key):
        return self.Key(key) if isinstance(key, int) else key

    def __getitem__(self, key):
        leaf = self.Leaf()
        if lib().bpf_lookup_elem(self.map_fd, ct.byref(self._key(key)), ct.byref(leaf)) < 0:
            raise KeyError(key)
        return leaf

    def __setitem__(self, key, leaf) -> None:
        if lib().bpf_update_elem(self.map_fd, ct.byref(self._key(key)), ct.byref(leaf), 0) < 0:
            err = ct.get_errno()
            raise OSError(err, f"cannot update BPF map {self.name}: {os.strerror(err)}")

    def __delitem__(self, key) -> None:
        if self.map_type in ARRAY_TYPES:  # an array's slots cannot be deleted: zeroed, as bcc does
            self[key] = self.Leaf()
        elif lib().bpf_delete_elem(self.map_fd, ct.byref(self._key(key))) < 0:
            raise KeyError(key)

    def keys(self) -> list:
        """The keys present now (every index of an array), listed before any is used: deleting
        while the kernel's walk runs would restart it."""
        if self.map_type in ARRAY_TYPES:
            return [self.Key(i) for i in range(self.max_entries)]
        out, key = [], self.Key()
        size = ct.sizeof(self.Key)
        if lib().bpf_get_first_key(self.map_fd, ct.byref(key), size) < 0:
            return out
        while True:
            out.append(key)
            nxt = self.Key()
            if lib().bpf_get_next_key(self.map_fd, ct.byref(key), ct.byref(nxt)) < 0:
                return out
            key = nxt

    def items(self) -> list[tuple]:
        """[(key, value)] of the entries present now (one deleted meanwhile is left out)."""
        out = []
        for key in self.keys():
            try:
                out.append((key, self[key]))
            except KeyError:
                pass
        return out

    def values(self) -> list:
        return [value for _key, value in self.items()]

    def clear(self) -> None:
        for key in self.keys():
            try:
                del self[key]
            except KeyError:
                pass


class PerCpuArray(BpfMap):
    """A per-CPU array: a value per possible CPU at each index. ``Leaf`` is the kernel's
    per-CPU buffer (each CPU's value padded to 8 bytes), ``sLeaf`` one CPU's value."""

    def __init__(self, name, fd, map_type, key, leaf, max_entries):
        super().__init__(name, fd, map_type, key, leaf, max_entries)
        self.sLeaf, cpus = leaf, possible_cpus()
        if ct.sizeof(leaf) % 8 == 0:
            self.Leaf = leaf * cpus
        elif leaf in (ct.c_uint, ct.c_int, ct.c_uint32, ct.c_int32):  # a 4-byte integer, in 8-byte slots
            self.Leaf = (ct.c_int64 if leaf in (ct.c_int, ct.c_int32) else ct.c_uint64) * cpus
        else:
            raise ValueError(f"per-CPU map {name}: a value of {ct.sizeof(leaf)} bytes is not 8-byte aligned")

    def getvalue(self, key):
        """Each CPU's value at ``key``, as an array of ``sLeaf``."""
        got = BpfMap.__getitem__(self, key)
        if self.Leaf._type_ is self.sLeaf:
            return got
        return (self.sLeaf * len(got))(*got)

    __getitem__ = getvalue

    def sum(self, key):
        """The CPUs' values at ``key`` added up, as one ``sLeaf`` (integer values only)."""
        return self.sLeaf(sum(self.getvalue(key)))


class PerfEventArray(BpfMap):
    """A perf event array read through per-CPU perf buffers (libbcc's perf reader)."""

    def __init__(self, name, fd, map_type, key, leaf, max_entries, fields=()):
        super().__init__(name, fd, map_type, key, leaf, max_entries)
        self._fields, self._event = list(fields), None
        self.readers: list[int] = []  # perf_reader pointers, one per online CPU
        self._callbacks: list = []  # the ctypes callbacks, kept alive while the readers are

    def event(self, data):
        """The record at ``data`` as the struct the program submitted (its fields from the entry)."""
        if self._event is None:
            self._event = _event_class(self._fields)
        return ct.cast(data, ct.POINTER(self._event)).contents

    def open_perf_buffer(self, callback, page_cnt: int = 8, lost_cb=None, wakeup_events: int = 1) -> None:
        """A buffer of ``page_cnt`` pages on every online CPU: ``callback(cpu, data, size)`` for each
        record at ``poll`` or ``consume``, ``lost_cb(count)`` for records the kernel dropped.
        ``wakeup_events``: a reader waiting in poll(2) is woken every that many records; 0, only
        when a buffer is half full (perf_event_open(2)'s watermark), for a buffer read at set
        times with ``consume`` (``poll`` reads only the buffers a wake-up made readable)."""
        for cpu in online_cpus():
            raw = RAW_CB(lambda _cookie, data, size, cpu=cpu: callback(cpu, data, size))
            lost = LOST_CB(lambda _cookie, n: lost_cb(n)) if lost_cb else ct.cast(None, LOST_CB)
            opts = PerfBufferOpts(pid=-1, cpu=cpu, wakeup_events=wakeup_events)
            reader = lib().bpf_open_perf_buffer_opts(raw, lost, None, page_cnt, ct.byref(opts))
            if not reader:
                raise OSError(ct.get_errno(), f"cannot open a perf buffer of {self.name} on CPU {cpu}")
            self.readers.append(reader)
            self._callbacks.append((raw, lost))
            self[self.Key(cpu)] = self.Leaf(lib().perf_reader_fd(reader))

    def reader_fds(self) -> list[int]:
        """The perf buffers' fds (readable while a buffer holds records), for poll(2)."""
        return [lib().perf_reader_fd(reader) for reader in self.readers]

    def poll(self, timeout_ms: int = 0) -> None:
        """Run the callbacks for what the buffers hold, waiting at most ``timeout_ms``."""
        if self.readers:
            readers = (ct.c_void_p * len(self.readers))(*self.readers)
            lib().perf_reader_poll(len(self.readers), readers, timeout_ms)

    def consume(self) -> None:
        """Run the callbacks for what every buffer holds, woken or not."""
        if self.readers:
            readers = (ct.c_void_p * len(self.readers))(*self.readers)
            lib().perf_reader_consume(len(self.readers), readers)

    def close(self) -> None:
        for reader in self.readers:
            lib().perf_reader_free(reader)
        self.readers, self._callbacks = [], []


def _event_class(fields: list[str]):
    """The ctypes struct of a perf output's records from bcc's field list ("name#type", "name#type[N]")."""
    out = []
    for field in fields:
        name, _, ctype = field.partition("#")
        m = re.fullmatch(r"(.+?) ?\[(\d+)\]", ctype)
        base = _EVENT_TYPES.get(m[1] if m else ctype)
        if base is None:
            raise ValueError(f"perf output field {field!r}: type not known")
        out.append((name, base * int(m[2]) if m else base))
    return type("Event", (ct.Structure,), {"_fields_": out})


def from_description(desc: dict, fd: int) -> BpfMap:
    """The map ``desc`` describes (an entry's map: name, type, max_entries, bcc's key and leaf
    descriptions in JSON, perf output fields) over ``fd``."""
    key = decode_type(json.loads(desc["key"]))
    leaf = decode_type(json.loads(desc["leaf"]))
    args = (desc["name"], fd, desc["type"], key, leaf, desc["max_entries"])
    if desc["type"] == PERCPU_ARRAY:
        return PerCpuArray(*args)
    if desc["type"] == PERF_EVENT_ARRAY:
        return PerfEventArray(*args, fields=desc.get("fields", ()))
    return BpfMap(*args)
