"""Compiling the probes in a short-lived child process, into the entry every start loads from.

bcc compiles with clang/LLVM inside the calling process: the compile's heap and the compiler's
code pages raised the recorder's peak RSS to ~160 MB, and the module bcc keeps for the BPF
object's lifetime (LLVM context, IR, the table reader/writer JIT) stayed in its steady RSS
(docs/recorder-memory.md). So a forked child runs the whole bcc load (``probes._load``: compile,
load, attach, fallbacks), also loads the programs the recorder attaches later (the perf_event
sampler; the uprobe functions as uprobe-multi copies, record/load/uprobe_link.py), and writes
what it loaded as an *entry* (``_entry``: map definitions, bytecode, attachments, what bcc's
Python needs to read the maps) to a pipe as JSON; then it exits, and what it loaded goes with it.
The compile's memory is the child's, for the ~1-3 s it runs.

This process has one way to load probes (``start``), whether the entry was compiled now or kept
by an earlier start (probe_cache.py, on by default): ``probe_cache.load`` creates the maps, loads
the programs and attaches them into a ``loaded.LoadedProbes``, which the drains read.
"""

from __future__ import annotations

import base64
import ctypes as ct
import fcntl
import json
import os

from dpuprof.errors import UserError
from dpuprof.record.load import bytecode, probe_cache
from dpuprof.record.load.bcc_loader import release_compiler_pages
from dpuprof.record.load.libbcc import lib

_PERF_EVENT_IOC_QUERY_BPF = 0xC008240A  # _IOWR('$', 10, struct perf_event_query_bpf *)


def load(bpf_cls, wanted: list[str], load_fn, perf_event_funcs: tuple[str, ...], key_fn):
    """``start(...).result()``: see ``start``."""
    return start(bpf_cls, wanted, load_fn, perf_event_funcs, key_fn).result()


def start(bpf_cls, wanted: list[str], load_fn, perf_event_funcs: tuple[str, ...], key_fn) -> "Pending":
    """Load the probes ``wanted``: from the stored entry under ``key_fn(wanted)`` (probes.cache_key)
    when there is one, else from an entry that a forked child compiles now with
    ``load_fn(bpf_cls, wanted)`` (probes._load: (bpf, used, unavailable); ``bpf_cls`` is bcc.BPF),
    then stores. ``perf_event_funcs``: functions the child loads as perf_event programs (the other
    functions ``load_fn`` left unloaded are uprobe functions). ``result()`` is (``LoadedProbes`` or
    None, used, unavailable). A UserError raised in the child, a child that ends without an entry
    and an entry this kernel refuses are each a UserError of ``result()``. Until then this process
    is free to do other start-up work."""
    where = probe_cache.directory()
    key = key_fn(wanted) if where is not None else None
    stored = probe_cache.read(where, key) if key is not None else None
    compiling = None if stored is not None else _fork(bpf_cls, wanted, load_fn, perf_event_funcs)
    release_compiler_pages()  # the pages the dynamic loader touched importing bcc (LLVM's): never run here

    def finish():
        if stored is not None:
            try:
                return _rebuild(stored)
            except Exception:  # noqa: BLE001 -- a stored entry this kernel refuses: compile afresh
                probe_cache.remove(where, key)
        entry = (compiling or _fork(bpf_cls, wanted, load_fn, perf_event_funcs))()
        try:
            out = _rebuild(entry)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 -- bcc and the kernel raise bare Exceptions, OSErrors
            raise UserError(f"cannot load the compiled probes: {str(err).splitlines()[0][:300]}") from None
        if key is not None and entry.get("bpf"):
            try:
                probe_cache.store(where, key, entry)
            except OSError:
                pass  # a full disk, a read-only home: the next start compiles again
        return out

    return Pending(finish)


class Pending:
    """A load under way: ``result()`` waits for it (once; later calls return the same triple)."""

    def __init__(self, finish):
        self._finish, self._out = finish, None

    def result(self):
        if self._out is None:
            self._out = self._finish()
        return self._out


def _fork(bpf_cls, wanted, load_fn, perf_event_funcs):
    """Start the compile child (``_compile``); the returned function waits for its entry.

    The child writes its entry, closes its attachments and exits; they are closed in parallel
    (each close of a tracepoint attachment waits for a grace period: one by one, at the child's
    exit, they took 0.6 s of a 1.5-s start-up). The child is reaped before this process loads its
    own programs, so that no probe of the child's is detached while this process's programs run (one
    suite run counted 255 of a loop device's 256 writes with a reaper thread instead; not
    reproduced in 4 runs of that test alone, and not seen with this order)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's atexit handlers
        os.close(rfd)
        code = 1
        try:
            entry, bpf = _compile(bpf_cls, wanted, load_fn, perf_event_funcs)
            with os.fdopen(wfd, "w") as out:
                json.dump(entry, out)
            code = 0
            if bpf is not None:
                bpf.cleanup()
        finally:
            os._exit(code)
    os.close(wfd)

    def collect() -> dict:
        with os.fdopen(rfd) as src:
            text = src.read()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        try:
            return json.loads(text)
        except ValueError:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            raise UserError(f"the probes' compile child ended without a result ({how}); "
                            "run: dpuprof doctor") from None

    return collect


def _rebuild(entry: dict):
    """(LoadedProbes, used, unavailable) loaded from ``entry`` (a child's or a stored one)."""
    if "user_error" in entry:
        raise UserError(entry["user_error"])
    if not entry["bpf"]:
        return None, entry["used"], entry["unavailable"]
    probes = probe_cache.load(entry)
    return probes, probes.used, probes.unavailable


# ------------------------------------------------------------------------------------- the child
def _compile(bpf_cls, wanted, load_fn, perf_event_funcs) -> tuple[dict, object | None]:
    """The child's work: (entry, the loaded bcc.BPF or None). The entry is ``load_fn``'s load made
    into an entry (``_entry``), or {"user_error": one line} (a UserError, or a load an entry cannot
    redo), or {"bpf": False, used, unavailable} when no probe loaded."""
    try:
        bpf, used, unavailable = load_fn(bpf_cls, wanted)
        if bpf is None:
            return {"bpf": False, "used": used, "unavailable": unavailable}, None
        entry = _entry(bpf, perf_event_funcs)
    except UserError as err:
        return {"user_error": str(err)}, None
    except Exception as err:  # noqa: BLE001 -- bcc raises bare Exceptions; the parent says it in one line
        return {"user_error": f"cannot compile the probes: {(str(err) or repr(err)).splitlines()[0][:300]}"}, None
    if entry is None:
        return {"user_error": "cannot load the probes: their load made an attachment the loader cannot redo"}, bpf
    return {**entry, "bpf": True, "used": used, "unavailable": unavailable}, bpf


def _entry(bpf, perf_event_funcs) -> dict | None:
    """What ``bpf`` loaded, as an entry (probe_cache.py's format, less ``used``/``unavailable``):
    each map's definition with what the recorder needs to read it (``child_fd``: the fd this
    process's bytecode refers to it by), each program's type and bytecode, and the tracepoints and
    raw tracepoints each is attached to, as the kernel reports them. Loads the functions not
    loaded yet first (``_preload``). None when the load has something an entry would not redo (a
    kprobe, perf-event or other attachment bcc made), or an attachment's program cannot be named."""
    if any(getattr(bpf, attr, None) for attr in ("kprobe_fds", "uprobe_fds", "kfunc_entry_fds", "kfunc_exit_fds",
                                                  "lsm_fds", "open_perf_events")):
        return None
    errors, multi_refused, code = _preload(bpf, perf_event_funcs)
    mod, lib_ = bpf.module, lib()

    def s(b: bytes) -> str:
        return b.decode("latin-1")

    maps = []
    for i in range(lib_.bpf_num_tables(mod)):
        name = lib_.bpf_table_name(mod, i)
        fd = lib_.bpf_table_fd(mod, name)
        if fd < 0:
            continue
        fields = [s(lib_.bpf_perf_event_field(mod, name, j)) for j in range(lib_.bpf_perf_event_fields(mod, name))]
        maps.append({"name": s(name), "id": i, "child_fd": fd, "type": lib_.bpf_table_type_id(mod, i),
                     "flags": lib_.bpf_table_flags_id(mod, i), "max_entries": lib_.bpf_table_max_entries_id(mod, i),
                     "key": s(lib_.bpf_table_key_desc(mod, name) or b""),
                     "leaf": s(lib_.bpf_table_leaf_desc(mod, name) or b""), "fields": fields,
                     "key_size": lib_.bpf_table_key_size_id(mod, i), "leaf_size": lib_.bpf_table_leaf_size_id(mod, i)})
    funcs, prog_ids = [], {}
    for name, fn in bpf.funcs.items():
        insns = bytecode.of_function(mod, name)
        if insns is None:
            return None
        prog_type, prog_ids[s(name)] = _prog_info(fn.fd)
        funcs.append([s(name), prog_type, insns])
    tracepoints = []
    for key, fd in bpf.tracepoint_fds.items():
        tp, _, fn = s(key).partition("/")
        fn = fn or "tracepoint__" + tp.replace(":", "__")  # bcc's own attachment of TRACEPOINT_PROBE
        # The kernel answers with every program on the tracepoint (each attachment is its own
        # perf event, but they share the tracepoint's list): fn's must be among them.
        if prog_ids.get(fn) is None or prog_ids[fn] not in _perf_event_prog_ids(fd):
            return None
        tracepoints.append([s(key), tp, fn])
    raw = []
    for key, fd in bpf.raw_tracepoint_fds.items():
        event, _, fn = s(key).partition("/")
        fn = fn or "raw_tracepoint__" + event  # bcc's own attachment of RAW_TRACEPOINT_PROBE
        if prog_ids.get(fn) is None or _link_prog_id(fd) != prog_ids[fn]:
            return None
        raw.append([s(key), event, fn])
    return {"format": probe_cache.FORMAT, "maps": maps, "funcs": funcs,
            "multi": [] if multi_refused else list(code), "tracepoints": tracepoints, "raw_tracepoints": raw,
            "load_errors": errors, "multi_refused": multi_refused, "code": code,
            "license": s(lib_.bpf_module_license(mod)), "kern_version": lib_.bpf_module_kern_version(mod)}


def _preload(bpf, perf_event_funcs) -> tuple[dict[str, str], str | None, dict[str, str]]:
    """Load every function ``bpf`` has not loaded: those of ``perf_event_funcs`` as perf_event
    programs, iterators (probe_cache.ITER_PREFIX) as tracing programs; of the rest (uprobe
    functions), the first as a uprobe-multi copy, to learn whether the kernel takes those
    (record/load/uprobe_link.py; the recorder loads its own copies from the bytecode). Returns
    ({function: why it failed to load}, why uprobe-multi programs are refused, {uprobe function:
    its bytecode, base64}): a kprobe-type copy of a uprobe function is needed
    only where a link is refused, and is then loaded by the parent from that bytecode
    (``LoadedProbes.program``)."""
    from bcc import BPF

    errors: dict[str, str] = {}
    multi_refused = None
    code: dict[str, str] = {}
    mod = bpf.module
    for i in range(lib().bpf_num_functions(mod)):
        name = lib().bpf_function_name(mod, i)
        if name in bpf.funcs:
            continue
        iterator = name.decode("latin-1").startswith(probe_cache.ITER_PREFIX)  # BPF_ITER: tracing
        if iterator or name.decode() in perf_event_funcs:
            try:
                bpf.load_func(name, BPF.TRACING if iterator else BPF.PERF_EVENT)
            except Exception as err:  # bcc raises a bare Exception
                errors[name.decode("latin-1")] = (str(err) or repr(err)).splitlines()[0][:300]
            continue
        code[name.decode("latin-1")] = bytecode.of_function(mod, name)
        if len(code) == 1:  # its bytecode refers to this process's maps: loadable here as it is
            fd = bytecode.load_uprobe_multi(base64.b64decode(code[name.decode("latin-1")]), name.decode("latin-1"),
                                            lib().bpf_module_license(mod))
            if fd < 0:
                multi_refused = f"uprobe-multi program refused ({os.strerror(ct.get_errno())})"
            else:
                os.close(fd)
    return errors, multi_refused, code


def _info(fd: int, size: int = 256) -> bytes:
    buf, length = ct.create_string_buffer(size), ct.c_uint32(size)
    if lib().bpf_obj_get_info(fd, buf, ct.byref(length)) != 0:
        raise OSError(ct.get_errno(), "BPF_OBJ_GET_INFO_BY_FD")
    return buf.raw


def _prog_info(fd: int) -> tuple[int, int]:
    """(program type, program id) of program ``fd`` (struct bpf_prog_info starts with both)."""
    info = _info(fd)
    return int.from_bytes(info[0:4], "little"), int.from_bytes(info[4:8], "little")


def _link_prog_id(fd: int) -> int:
    """The program id of link ``fd`` (a raw tracepoint's; struct bpf_link_info: type, id, prog_id)."""
    return int.from_bytes(_info(fd)[8:12], "little")


def _perf_event_prog_ids(fd: int) -> list[int]:
    """Ids of the programs attached to the tracepoint of perf event ``fd`` (PERF_EVENT_IOC_QUERY_BPF)."""
    buf = bytearray(8 + 4 * 8)
    buf[0:4] = (8).to_bytes(4, "little")
    fcntl.ioctl(fd, _PERF_EVENT_IOC_QUERY_BPF, buf, True)
    count = int.from_bytes(buf[4:8], "little")
    return [int.from_bytes(buf[8 + 4 * j:12 + 4 * j], "little") for j in range(count)]
