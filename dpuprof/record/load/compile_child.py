"""Compiling the probes in a short-lived child process, so that the recorder never holds the compiler.

bcc compiles with clang/LLVM inside the calling process: the compile's heap and the compiler's
code pages raised the recorder's peak RSS to ~160 MB, and the module bcc keeps for the BPF
object's lifetime (LLVM context, IR, the table reader/writer JIT) stayed in its steady RSS
(docs/recorder-memory.md). Here a forked child runs the whole load (``probes._load``: compile,
load, attach, fallbacks), also loads the programs the recorder attaches later (the perf_event
sampler; the uprobe functions as uprobe-multi copies, record/load/uprobe_link.py), and passes every
descriptor (maps, programs, tracepoint attachments) to the parent over a Unix socket
(SCM_RIGHTS), with what bcc's Python needs to read the maps (key and leaf type descriptions, map
types, perf-event fields) and the uprobe functions' bytecode: bcc's kprobe-type copy, used where
the kernel refuses a uprobe-multi link, is loaded here on demand, its map fds rewritten to this
process's. The kernel objects outlive the child: an fd the parent holds keeps its map, program
or attachment alive, and map fds inside the loaded programs are the kernel's own references. The
parent wraps them in a ``ShippedBPF``: a ``bcc.BPF`` without a module (libbcc's accessors answer
a NULL module safely) whose tables are built from the shipped descriptions.

The compile's memory is the child's, for the ~1-3 s it runs (VmHWM ~120 MB on the development
VM); the child is gone before the command starts. If the child delivers nothing (it crashed, was
killed), the parent compiles in-process as before; ``DPUPROF_COMPILE_INPROCESS=1`` forces that
(to compare the two). With ``DPUPROF_PROBE_CACHE`` set, the child also stores its load, and a
later start with the same key replays it instead of forking (probe_cache.py).
"""

from __future__ import annotations

import atexit
import base64
import ctypes as ct
import functools
import json
import os
import socket
import struct

from dpuprof.errors import UserError
from dpuprof.record.load import attach, bytecode, probe_cache, uprobe_link
from dpuprof.record.load.bcc_loader import release_compiler_pages

INPROCESS_ENV = "DPUPROF_COMPILE_INPROCESS"


def _set(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")
_FD_CHUNK = 200  # fds per SCM_RIGHTS message (the kernel's SCM_MAX_FD is 253)


def load(bpf_cls, wanted: list[str], load_fn, perf_event_funcs: tuple[str, ...], key_fn=None):
    """``start(...).result()``: see ``start``."""
    return start(bpf_cls, wanted, load_fn, perf_event_funcs, key_fn).result()


def start(bpf_cls, wanted: list[str], load_fn, perf_event_funcs: tuple[str, ...], key_fn=None) -> "Pending":
    """Start ``load_fn(bpf_cls, wanted)`` (probes._load: (bpf, used, unavailable)) in a forked
    child; its ``result()`` is that triple with the BPF object rebuilt here as a ``ShippedBPF``.
    The load runs in this process instead (at ``result()``) when ``bpf_cls`` is not bcc's own BPF
    (a test's fake), when ``DPUPROF_COMPILE_INPROCESS`` is set, or when the child delivers nothing.
    ``perf_event_funcs``: functions the child loads as perf_event programs (the other functions
    ``load_fn`` left unloaded are uprobe functions). ``key_fn(wanted)``: the probe cache's key for
    the load (probes.cache_key), consulted and filled when DPUPROF_PROBE_CACHE names a directory;
    None: no cache. A UserError raised in the child is raised by ``result()``. Until then this
    process is free to do other start-up work."""
    import bcc

    if bpf_cls is not bcc.BPF or _set(INPROCESS_ENV):
        return Pending(lambda: load_fn(bpf_cls, wanted))
    where = probe_cache.directory()
    key = key_fn(wanted) if where is not None and key_fn is not None else None
    hit = probe_cache.replay(where, key) if key is not None else None
    if hit is not None:
        return Pending(lambda: _rebuild(*hit))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's atexit handlers
        ours.close()
        code = 1
        try:
            _child(bpf_cls, wanted, load_fn, perf_event_funcs, theirs, (where, key) if key else None)
            code = 0
        finally:
            os._exit(code)
    theirs.close()

    release_compiler_pages()  # the pages the dynamic loader touched importing bcc, while the child compiles
    return Pending(lambda: _collect(pid, ours, lambda: load_fn(bpf_cls, wanted)))


class Pending:
    """A load under way: ``result()`` waits for it (once; later calls return the same triple)."""

    def __init__(self, finish):
        self._finish, self._out = finish, None

    def result(self):
        if self._out is None:
            self._out = self._finish()
        return self._out


def _collect(pid: int, sock, fallback):
    """The child's result, rebuilt here (``fallback()`` when it delivered nothing)."""
    try:
        state, fds = _receive(sock)
    except (OSError, ValueError, EOFError):
        state, fds = None, []
    finally:
        sock.close()
        os.waitpid(pid, 0)
    if state is None:
        for fd in fds:
            os.close(fd)
        return fallback()
    return _rebuild(state, fds)


def _rebuild(state: dict, fds: list[int]):
    """(bpf, used, unavailable) from a child's (or a cache replay's) ``state`` and ``fds``."""
    if "user_error" in state:
        raise UserError(state["user_error"])
    bpf = None
    if state["bpf"]:
        bpf = shipped_class()(state, fds)
        bpf.cleanup = functools.partial(attach.cleanup_in_parallel, bpf, bpf.cleanup)  # as probes._build
    return bpf, state["used"], state["unavailable"]


# ------------------------------------------------------------------------------------- the child
def _child(bpf_cls, wanted, load_fn, perf_event_funcs, sock, cache=None) -> None:
    """``cache``: (directory, key) to store the load in (probe_cache.py), after sending it."""
    try:
        bpf, used, unavailable = load_fn(bpf_cls, wanted)
    except UserError as err:
        _send(sock, {"user_error": str(err)}, [])
        return
    state = {"used": used, "unavailable": unavailable, "bpf": bpf is not None}
    fds: list[int] = []
    if bpf is not None:
        state.update(_describe(bpf, perf_event_funcs, fds))
    _send(sock, state, fds)
    if cache is not None and bpf is not None:
        try:
            probe_cache.store(*cache, probe_cache.capture(bpf, state, fds))
        except Exception:  # noqa: BLE001 -- the cache is only an optimisation
            pass  # a full disk, a refused query: no entry, the next start compiles


def _describe(bpf, perf_event_funcs, fds: list[int]) -> dict:
    """Everything of ``bpf`` the parent needs, its descriptors appended to ``fds`` (referred to
    by index). Loads the functions not loaded yet first."""
    from bcc.libbcc import lib

    errors, multi_refused, code = _preload(bpf, perf_event_funcs)
    mod = bpf.module

    def ref(fd: int) -> int:
        fds.append(fd)
        return len(fds) - 1

    def s(b: bytes) -> str:
        return b.decode("latin-1")

    maps = []
    for i, name in enumerate(_table_names(mod)):
        fd = lib.bpf_table_fd(mod, name)
        if fd < 0:
            continue
        fields = [s(lib.bpf_perf_event_field(mod, name, j)) for j in range(lib.bpf_perf_event_fields(mod, name))]
        maps.append({"name": s(name), "id": i, "fd": ref(fd), "child_fd": fd, "type": lib.bpf_table_type_id(mod, i),
                     "flags": lib.bpf_table_flags_id(mod, i), "max_entries": lib.bpf_table_max_entries_id(mod, i),
                     "key": s(lib.bpf_table_key_desc(mod, name) or b""),
                     "leaf": s(lib.bpf_table_leaf_desc(mod, name) or b""), "fields": fields})

    return {"maps": maps, "load_errors": errors, "multi_refused": multi_refused, "code": code,
            "license": s(lib.bpf_module_license(mod)), "kern_version": lib.bpf_module_kern_version(mod),
            "funcs": [(s(name), ref(fn.fd)) for name, fn in bpf.funcs.items()],
            "multi": [(s(name), ref(fd)) for name, fd in uprobe_link.programs(bpf).items()],
            "tracepoint_fds": [(s(k), ref(fd)) for k, fd in bpf.tracepoint_fds.items()],
            "raw_tracepoint_fds": [(s(k), ref(fd)) for k, fd in bpf.raw_tracepoint_fds.items()]}


def _preload(bpf, perf_event_funcs) -> tuple[dict[str, str], str | None, dict[str, str]]:
    """Load every function ``bpf`` has not loaded: those of ``perf_event_funcs`` as perf_event
    programs, the rest (uprobe functions) as uprobe-multi copies (record/load/uprobe_link.py). Returns
    ({function: why it failed to load}, why uprobe-multi programs are refused, {uprobe function:
    its bytecode, base64}): bcc's own kprobe-type copy of a uprobe function is needed only where
    a link is refused, and is then loaded by the parent from that bytecode (``load_func``)."""
    from bcc import BPF
    from bcc.libbcc import lib

    errors: dict[str, str] = {}
    multi_refused = None
    code: dict[str, str] = {}
    mod = bpf.module
    for i in range(lib.bpf_num_functions(mod)):
        name = lib.bpf_function_name(mod, i)
        if name in bpf.funcs:
            continue
        if name.decode() in perf_event_funcs:
            try:
                bpf.load_func(name, BPF.PERF_EVENT)
            except Exception as err:  # bcc raises a bare Exception
                errors[name.decode("latin-1")] = (str(err) or repr(err)).splitlines()[0][:300]
            continue
        code[name.decode("latin-1")] = bytecode.of_function(mod, name)
        if multi_refused is None:
            try:
                uprobe_link.programs(bpf)[name] = uprobe_link._load_multi(bpf, name)
            except OSError as err:
                multi_refused = f"uprobe-multi program refused ({err.strerror})"
    return errors, multi_refused, code


def _table_names(mod) -> list[bytes]:
    """The module's map names, in map-id order (libbcc exports these; bcc's Python declares neither)."""
    from bcc.libbcc import lib

    lib.bpf_num_tables.restype, lib.bpf_num_tables.argtypes = ct.c_ulonglong, [ct.c_void_p]
    lib.bpf_table_name.restype, lib.bpf_table_name.argtypes = ct.c_char_p, [ct.c_void_p, ct.c_ulonglong]
    return [lib.bpf_table_name(mod, i) for i in range(lib.bpf_num_tables(mod))]


# ------------------------------------------------------------------------------------- the wire
def _send(sock, state: dict, fds: list[int]) -> None:
    """``state`` as length-prefixed JSON, then ``fds`` in chunks, each riding on one byte."""
    state["n_fds"] = len(fds)
    payload = json.dumps(state).encode()
    sock.sendall(struct.pack("!I", len(payload)) + payload)
    for i in range(0, len(fds), _FD_CHUNK):
        socket.send_fds(sock, [b"F"], fds[i:i + _FD_CHUNK])


def _receive(sock) -> tuple[dict | None, list[int]]:
    """(state, fds) from ``_send``; (None, fds so far) when the child stopped short. Every fd
    received is made close-on-exec (the command must not inherit the probes)."""
    (size,) = struct.unpack("!I", _exactly(sock, 4))
    state = json.loads(_exactly(sock, size))
    fds: list[int] = []
    while len(fds) < state["n_fds"]:
        data, got, flags, _ = socket.recv_fds(sock, 1, _FD_CHUNK)
        for fd in got:
            os.set_inheritable(fd, False)
        fds.extend(got)
        if not data or flags & socket.MSG_CTRUNC:
            return None, fds
    return state, fds


def _exactly(sock, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the compile child exited before sending its probes")
        buf += chunk
    return buf


# ------------------------------------------------------------------------------------- the parent
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
