"""The compiled probes, kept across starts: the one form in which probes reach the kernel.

bcc compiles the probes' C with clang: ~2-3 s on the development VM, before the command runs.
The compile child (compile_child.py) turns that compile into an *entry*: each map's definition,
each program's bytecode and type, and which program is attached to which tracepoint. The recorder
always loads its probes from an entry (``load``: the maps are created, the programs loaded, the
kernel's verifier checking them again as for any load, and attached, with no compiler), whether
the entry was compiled a moment ago or stored by an earlier start. Stored entries live in
``~/.cache/dpuprof/probes`` of the effective user (root's under sudo; as perf keeps its build-id
cache in ``~/.debug``), or in the absolute directory ``DPUPROF_PROBE_CACHE`` names;
``DPUPROF_PROBE_CACHE=off`` stores nothing, and every start compiles.

The key (``cache_key``) is a hash of everything the program text and the load depend on: the
kernel (release, build, architecture, possible CPUs), bcc's version, the probes' C sources and
the loader's own modules, the wanted probes and which of their tracepoints this kernel has, and
every ``DPUPROF_*`` setting. A different key is a miss, never a stale hit. A stored entry whose
load fails anywhere (a map or program the kernel refuses, an attach) has what it made closed, is
removed, and the probes are compiled as on a miss. Entries hold bytecode that root loads into the
kernel, so the directory and its files must belong to the user and be writable by no one else, or
they are not read. The newest ``KEEP`` entries are kept (one per kernel, dpuprof version and probe
set; ~50 kB each): docs/probe-cache.md.
"""

from __future__ import annotations

import base64
import ctypes as ct
import hashlib
import json
import os
import platform
import pwd
import stat
from pathlib import Path

from dpuprof.record.load import bpfmap, bytecode
from dpuprof.record.load.libbcc import lib
from dpuprof.record.load.loaded import LoadedProbes

ENV = "DPUPROF_PROBE_CACHE"
FORMAT = 2  # 2 (2026-12-05): every load is from an entry; ``bpf``, ``used``, ``unavailable`` in it
KEEP = 16
ITER_PREFIX = "bpf_iter__"  # bcc's BPF_ITER(target) function: an iterator, attached at the load
_LOADER_MODULES = ("probes.py", "compile_child.py", "probe_cache.py", "loaded.py", "bpfmap.py", "libbcc.py",
                   "bytecode.py", "attach.py", "uprobe_link.py", "btf.py")


def directory() -> Path | None:
    """Where entries are stored: ``DPUPROF_PROBE_CACHE`` when it is an absolute path, the effective
    user's ``~/.cache/dpuprof/probes`` when it is unset or empty; None (store nothing) when it is
    ``off`` or a relative path, and when the user has no passwd entry (a container's arbitrary uid)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            return None
        return Path(home) / ".cache" / "dpuprof" / "probes"
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


def store(where: Path, key: str, entry: dict) -> None:
    """Write ``entry`` as ``where/KEY.json`` (mode 0600, atomically; ``where`` made 0700), then
    remove all but the newest ``KEEP`` entries. Nothing is written where ``where`` is not trusted."""
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
    entries = sorted(where.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)


def read(where: Path, key: str) -> dict | None:
    """Entry ``where/KEY.json``, or None when there is none, it is not trusted, or it is of another
    format (then it is removed)."""
    path = where / f"{key}.json"
    if not (_trusted(where) and _trusted(path)):
        return None
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        entry = None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        remove(where, key)
        return None
    return entry


def remove(where: Path, key: str) -> None:
    (where / f"{key}.json").unlink(missing_ok=True)


# ------------------------------------------------------------------------------------- load
def load(entry: dict) -> LoadedProbes:
    """Create the maps, load and attach the programs of ``entry``. Every fd is close-on-exec.
    Whatever fails (a bare Exception from a program the kernel refuses, an OSError) is raised
    after what was made is closed."""
    owned: list[int] = []
    loaded = None
    try:
        loaded = _load(entry, owned)
        for key, event, fn in entry["tracepoints"]:
            loaded.attach_tracepoint(key, event, fn)
        for key, event, fn in entry["raw_tracepoints"]:
            loaded.attach_raw_tracepoint(key, event, fn)
        for fn in loaded.programs:
            if fn.startswith(ITER_PREFIX):
                loaded.attach_iter(fn)
        return loaded
    except BaseException:
        if loaded is not None:
            loaded.close()
        else:
            for fd in owned:
                os.close(fd)
        raise


def _load(entry: dict, owned: list[int]) -> LoadedProbes:
    """The maps and programs of ``entry``, nothing attached; their fds are appended to ``owned``."""
    def keep(fd: int, what: str) -> int:
        if fd < 0:
            raise OSError(ct.get_errno(), f"cannot load {what}")
        os.set_inheritable(fd, False)
        owned.append(fd)
        return fd

    maps, fd_map = {}, {}
    for m in entry["maps"]:
        fd = keep(lib().bcc_create_map(m["type"], m["name"].encode("latin-1"), m["key_size"], m["leaf_size"],
                                       m["max_entries"], m["flags"]), f"map {m['name']}")
        fd_map[m["child_fd"]] = fd
        maps[m["name"]] = bpfmap.from_description(m, fd)
    lic, kern = entry["license"].encode("latin-1"), entry["kern_version"]

    def insns(code: str) -> bytes:
        return bytecode.relocate(base64.b64decode(code), fd_map)

    programs = {name: keep(bytecode.prog_load(prog_type, name.encode("latin-1"), insns(code), lic, kern), name)
                for name, prog_type, code in entry["funcs"]}
    multi = {name: keep(bytecode.load_uprobe_multi(insns(entry["code"][name]), name, lic), name)
             for name in entry["multi"]}
    return LoadedProbes(entry, maps, programs, multi, fd_map, owned)
