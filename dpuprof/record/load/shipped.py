"""The loaded probes as a ``bcc.BPF``, for the drains: ``ShippedBPF``.

Probes are loaded from an entry (probe_cache.load: map and program fds, what bcc's Python needs
to read each map), not by bcc compiling in this process, so there is no bcc module. A
``ShippedBPF`` is a ``bcc.BPF`` without one (libbcc's accessors answer a NULL module safely):
every function is loaded already, and its tables are built from the entry's descriptions of the
maps. bcc's kprobe-type copy of a uprobe function, used where the kernel refuses a uprobe-multi
link, is loaded on demand from the entry's bytecode (``load_func``).
"""

from __future__ import annotations

import atexit
import base64
import json
import os

from dpuprof.record.load import bytecode, uprobe_link


class _ModuleFacts:
    """Stands in for libbcc in bcc.table while one table is built: answers what bcc.table asks
    the (absent) module about that map from its shipped description; the rest goes to libbcc."""

    def __init__(self, lib, desc: dict):
        self._lib, self._desc = lib, desc

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def bpf_table_type_id(self, _mod, _id):
        return self._desc["type"]

    def bpf_table_flags_id(self, _mod, _id):
        return self._desc["flags"]

    def bpf_table_max_entries_id(self, _mod, _id):
        return self._desc["max_entries"]

    def bpf_perf_event_fields(self, _mod, _name):
        return len(self._desc["fields"])

    def bpf_perf_event_field(self, _mod, _name, i):
        return self._desc["fields"][i].encode("latin-1")


def _make_shipped_class():
    from bcc import BPF

    class ShippedBPF(BPF):
        """A bcc.BPF over descriptors a compile child loaded (see the module docstring): no module,
        every function already loaded, tables built from their shipped descriptions."""

        def __init__(self, state: dict, fds: list[int]):  # noqa: D107 -- bcc's __init__ compiles: not called
            b = lambda s: s.encode("latin-1")  # noqa: E731
            self.kprobe_fds, self.uprobe_fds, self.kfunc_entry_fds, self.kfunc_exit_fds = {}, {}, {}, {}
            self.lsm_fds, self.perf_buffers, self.open_perf_events = {}, {}, {}
            self._ringbuf_manager, self.tracefile, self.debug, self.module = None, None, 0, None
            self.tables = {}
            self.funcs = {b(n): BPF.Function(self, b(n), fds[i]) for n, i in state["funcs"]}
            self.tracepoint_fds = {b(k): fds[i] for k, i in state["tracepoint_fds"]}
            self.raw_tracepoint_fds = {b(k): fds[i] for k, i in state["raw_tracepoint_fds"]}
            self._load_errors, self._code = state["load_errors"], state["code"]
            self._license, self._kern_version = b(state["license"]), state["kern_version"]
            self._map_fds = [fds[m["fd"]] for m in state["maps"]]
            self._fd_map = {m["child_fd"]: fds[m["fd"]] for m in state["maps"]}

            uprobe_link.programs(self).update({b(n): fds[i] for n, i in state["multi"]})
            if state["multi_refused"] and state["multi_refused"] not in uprobe_link._unsupported:
                uprobe_link._unsupported.append(state["multi_refused"])
            self._shipped = {b(m["name"]): self._table(m, fds[m["fd"]]) for m in state["maps"]}
            atexit.register(self.cleanup)

        def _table(self, desc: dict, fd: int):
            from bcc import table

            key = None if desc["type"] in (table.BPF_MAP_TYPE_QUEUE, table.BPF_MAP_TYPE_STACK) else \
                BPF._decode_table_type(json.loads(desc["key"]))
            leaf = BPF._decode_table_type(json.loads(desc["leaf"]))
            real = table.lib
            table.lib = _ModuleFacts(real, desc)
            try:
                t = table.Table(self, desc["id"], fd, key, leaf, desc["name"].encode("latin-1"), reducer=None)
                if desc["fields"]:
                    t._event_class = table._get_event_class(t)
            finally:
                table.lib = real
            return t

        def get_table(self, name, keytype=None, leaftype=None, reducer=None):
            name = name.encode("latin-1") if isinstance(name, str) else name
            return self._shipped[name]  # KeyError for a map the program lacks, as bcc

        def load_func(self, func_name, prog_type, device=None, attach_type=-1):
            """A loaded function, or one loaded now from the child's bytecode (bcc's kprobe-type
            copy of a uprobe function, where a uprobe-multi link was refused)."""
            func_name = func_name.encode("latin-1") if isinstance(func_name, str) else func_name
            if func_name in self.funcs:
                return self.funcs[func_name]
            name = func_name.decode("latin-1")
            if name not in self._code:
                why = self._load_errors.get(name, "not loaded by the compile child")
                raise Exception(f"cannot load {name}: {why}")

            insns = bytecode.relocate(base64.b64decode(self._code[name]), self._fd_map)
            fd = bytecode.prog_load(prog_type, func_name, insns, self._license, self._kern_version)
            self.funcs[func_name] = BPF.Function(self, func_name, fd)
            return self.funcs[func_name]

        def close(self):
            super().close()
            self._shipped.clear()  # a perf-event table's __del__ frees its readers
            for fd in self._map_fds:
                os.close(fd)
            self._map_fds = []

    return ShippedBPF


_SHIPPED: list = []


def shipped_class():
    """The ``ShippedBPF`` class (a subclass of bcc.BPF, so built on first use: bcc is imported lazily)."""
    if not _SHIPPED:
        _SHIPPED.append(_make_shipped_class())
    return _SHIPPED[0]
