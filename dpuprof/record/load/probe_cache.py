"""A cache of the compiled probes, so that a recorder start on the same kernel skips the compile.

bcc compiles the probes' C with clang on every start: ~3 s of the recorder's start-up on the
development VM (benchmarks/RESULTS.md), before the command runs. With ``DPUPROF_PROBE_CACHE=DIR``
the compile child (compile_child.py) also writes what it loaded into DIR: each map's definition,
each program's bytecode and type, and which program is attached to which tracepoint. The next
start with the same key loads those programs into the kernel directly (the verifier checks them
again, as for any load) and attaches them, with no compiler at all. The result goes through the
same ``ShippedBPF`` wrapper as the child's, so nothing after the load can tell the two apart.

The key (``cache_key``) is a hash of everything the program text and the load depend on: the
kernel (release, build, architecture, possible CPUs), bcc's version, the probes' C sources and
the loader's own modules, the wanted probes and which of their tracepoints this kernel has, and
every ``DPUPROF_*`` setting. A different key is a miss, never a stale hit. A replay that fails
anywhere (a map or program the kernel refuses, an attach) closes what it made, removes the entry
and compiles as before. Entries hold bytecode that root loads into the kernel, so the directory
and its files must belong to the user and be writable by no one else, or they are not read.

The cache is opt-in: dpuprof writes nothing where the user did not ask (docs/probe-cache.md).
"""

from __future__ import annotations

import base64
import ctypes as ct
import fcntl
import hashlib
import json
import os
import platform
import stat
from pathlib import Path

from dpuprof.record.load import bytecode

ENV = "DPUPROF_PROBE_CACHE"
FORMAT = 1
_LOADER_MODULES = ("probes.py", "compile_child.py", "probe_cache.py", "attach.py", "uprobe_link.py", "btf.py")
_PERF_EVENT_IOC_QUERY_BPF = 0xC008240A  # _IOWR('$', 10, struct perf_event_query_bpf *)


def directory() -> Path | None:
    """The cache directory that ``DPUPROF_PROBE_CACHE`` names, or None when unset or relative."""
    value = os.environ.get(ENV, "")
    return Path(value) if os.path.isabs(value) else None


def cache_key(wanted: list[str], probe_sources: list[Path], missing: dict) -> str:
    """A hex digest of what the load of ``wanted`` depends on (see the module docstring), given the
    probes' C files and, per wanted probe, the tracepoints this kernel lacks (probes.cache_key
    gathers them: this module does not import probes.py, which starts the compile child)."""
    from bcc import __version__ as bcc_version

    here = Path(__file__).parent
    sources = hashlib.sha256()
    for path in sorted(probe_sources) + [here / m for m in _LOADER_MODULES]:
        sources.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        cpus = Path("/sys/devices/system/cpu/possible").read_text().strip()
    except OSError:
        cpus = str(os.cpu_count())
    u = platform.uname()
    facts = {"format": FORMAT, "uname": [u.system, u.release, u.version, u.machine], "cpus": cpus, "bcc": bcc_version,
             "sources": sources.hexdigest(), "wanted": sorted(wanted), "missing": missing,
             "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("DPUPROF_") and k != ENV)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _trusted(path: Path) -> bool:
    """Whether ``path`` belongs to this user and no one else can write it."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


# ------------------------------------------------------------------------------------- capture
def capture(bpf, state: dict, fds: list[int]) -> dict | None:
    """The cache entry for a load the compile child made: ``state`` and ``fds`` as
    compile_child._describe gave them, plus what only the module knows (key and leaf sizes,
    each program's bytecode). None when the load has something a replay would not redo (a kprobe,
    perf-event or other attachment bcc made), or when a tracepoint's program cannot be named."""
    from bcc.libbcc import lib

    if any(getattr(bpf, attr, None) for attr in ("kprobe_fds", "uprobe_fds", "kfunc_entry_fds", "kfunc_exit_fds",
                                                  "lsm_fds", "open_perf_events")):
        return None
    mod = bpf.module
    for fn in (lib.bpf_table_key_size_id, lib.bpf_table_leaf_size_id):
        fn.restype, fn.argtypes = ct.c_size_t, [ct.c_void_p, ct.c_size_t]
    maps = [{**{k: v for k, v in m.items() if k != "fd"}, "key_size": lib.bpf_table_key_size_id(mod, m["id"]),
             "leaf_size": lib.bpf_table_leaf_size_id(mod, m["id"])} for m in state["maps"]]
    funcs, prog_ids = [], {}
    for name, i in state["funcs"]:
        code = bytecode.of_function(mod, name.encode("latin-1"))
        if code is None:
            return None
        prog_type, prog_ids[name] = _prog_info(fds[i])
        funcs.append([name, prog_type, code])
    tracepoints = []
    for key, i in state["tracepoint_fds"]:
        tp, _, fn = key.partition("/")
        fn = fn or "tracepoint__" + tp.replace(":", "__")  # bcc's own attachment of TRACEPOINT_PROBE
        # The kernel answers with every program on the tracepoint (each attachment is its own
        # perf event, but they share the tracepoint's list): fn's must be among them.
        if prog_ids.get(fn) is None or prog_ids[fn] not in _perf_event_prog_ids(fds[i]):
            return None
        tracepoints.append([key, tp, fn])
    raw = []
    for key, i in state["raw_tracepoint_fds"]:
        event, _, fn = key.partition("/")
        fn = fn or "raw_tracepoint__" + event  # bcc's own attachment of RAW_TRACEPOINT_PROBE
        if prog_ids.get(fn) is None or _link_prog_id(fds[i]) != prog_ids[fn]:
            return None
        raw.append([key, event, fn])
    keep = ("used", "unavailable", "load_errors", "multi_refused", "code", "license", "kern_version")
    return {"format": FORMAT, "maps": maps, "funcs": funcs, "multi": [n for n, _ in state["multi"]],
            "tracepoints": tracepoints, "raw_tracepoints": raw, **{k: state[k] for k in keep}}


def _info(fd: int, size: int = 256) -> bytes:
    from bcc.libbcc import lib

    buf, length = ct.create_string_buffer(size), ct.c_uint32(size)
    lib.bpf_obj_get_info.restype, lib.bpf_obj_get_info.argtypes = ct.c_int, [ct.c_int, ct.c_void_p, ct.c_void_p]
    if lib.bpf_obj_get_info(fd, buf, ct.byref(length)) != 0:
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


def store(where: Path, key: str, entry: dict | None) -> None:
    """Write ``entry`` as ``where/KEY.json`` (mode 0600, atomically; ``where`` made 0700)."""
    if entry is None:
        return
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _trusted(where):
        return
    tmp = where / f".{key}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(entry, fh)
        os.replace(tmp, where / f"{key}.json")
    finally:
        tmp.unlink(missing_ok=True)  # gone already once replaced


# ------------------------------------------------------------------------------------- replay
def replay(where: Path, key: str) -> tuple[dict, list[int]] | None:
    """(state, fds) as the compile child would send them, made from entry ``where/KEY.json``, or
    None when there is no usable entry (then the entry is removed, if one was there)."""
    path = where / f"{key}.json"
    if not (_trusted(where) and _trusted(path)):
        return None
    fds: list[int] = []
    try:
        entry = json.loads(path.read_text())
        if entry.get("format") != FORMAT:
            raise ValueError("another format")
        return _load(entry, fds), fds
    except Exception:  # noqa: BLE001 -- any failure means: compile instead (bcc raises bare Exceptions)
        for fd in fds:
            os.close(fd)
        path.unlink(missing_ok=True)
        return None


def _load(entry: dict, fds: list[int]) -> dict:
    """Create the maps, load and attach the programs of ``entry``; their fds are appended to ``fds``."""
    from bcc.libbcc import lib

    def keep(fd: int, what: str) -> int:
        if fd < 0:
            raise OSError(ct.get_errno(), what)
        os.set_inheritable(fd, False)
        fds.append(fd)
        return len(fds) - 1

    lib.bcc_create_map.restype = ct.c_int
    lib.bcc_create_map.argtypes = [ct.c_int, ct.c_char_p, ct.c_int, ct.c_int, ct.c_int, ct.c_int]
    maps, fd_map = [], {}
    for m in entry["maps"]:
        i = keep(lib.bcc_create_map(m["type"], m["name"].encode("latin-1"), m["key_size"], m["leaf_size"],
                                    m["max_entries"], m["flags"]), f"map {m['name']}")
        fd_map[m["child_fd"]] = fds[i]
        maps.append({k: v for k, v in m.items() if k not in ("key_size", "leaf_size")} | {"fd": i})
    lic, kern = entry["license"].encode("latin-1"), entry["kern_version"]

    def insns(code: str) -> bytes:
        return bytecode.relocate(base64.b64decode(code), fd_map)

    funcs, by_name = [], {}
    for name, prog_type, code in entry["funcs"]:
        fd = bytecode.prog_load(prog_type, name.encode("latin-1"), insns(code), lic, kern)
        by_name[name] = fds[keep(fd, name)]
        funcs.append([name, len(fds) - 1])
    multi = [[name, keep(bytecode.load_uprobe_multi(insns(entry["code"][name]), name, lic), name)]
             for name in entry["multi"]]
    tracepoints = []
    for key, tp, fn in entry["tracepoints"]:
        category, _, event = tp.partition(":")
        tracepoints.append([key, keep(lib.bpf_attach_tracepoint(by_name[fn], category.encode(), event.encode()),
                                      f"tracepoint {tp}")])
    raw = [[key, keep(lib.bpf_attach_raw_tracepoint(by_name[fn], event.encode()), f"raw tracepoint {event}")]
           for key, event, fn in entry["raw_tracepoints"]]
    return {"used": entry["used"], "unavailable": entry["unavailable"], "bpf": True, "maps": maps,
            "load_errors": entry["load_errors"], "multi_refused": entry["multi_refused"], "code": entry["code"],
            "license": entry["license"], "kern_version": kern, "funcs": funcs, "multi": multi,
            "tracepoint_fds": tracepoints, "raw_tracepoint_fds": raw}
