"""Turn sampled addresses into frame strings while the processes are still alive.

Kernel addresses resolve through /proc/kallsyms (bcc's ksym as uid 0, else kallsyms.py). User
addresses need the process's memory map, so they are resolved at every drain, before short-lived tools and DataLoader workers
exit. bcc's symbol cache reads a process's map once and does not notice libraries loaded later (a
lazy ``import cryptography``), so the map is kept here too and re-read on a miss; when the re-read
finds the address in a new mapping, the process's bcc cache is rebuilt. The bcc caches are owned
here and freed explicitly (bcc's Python wrapper never frees them).
"""

from __future__ import annotations

import bisect
import os
import re

from dpuprof.record.perfmap import PerfMap, frame_name, read_code, return_offset
from dpuprof.recording.folded import escape

UNKNOWN = "[unknown]"
UNRESOLVED = "[unresolved]"  # symbol not looked up: module only
# bcc loads a module's whole symbol table per process: for libtorch_cpu.so (400 MB) in six
# training processes cost ~850 MB of recorder memory, libpython and libtorch_python (20-30 MB)
# another ~100 MB. Modules above this size are labelled by
# module only; classification needs no more (rules match modules), only the flame graph is coarser.
SYMBOLS_MAX_MODULE_BYTES = 16 << 20
_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$")
_PKG_DIRS = ("/site-packages/", "/dist-packages/")


def clean(text: str) -> str:
    """Make a symbol safe inside a folded stack (';' separates frames, newline separates stacks)."""
    return escape(text)


def module_label(path: str) -> str:
    """A module path as rules match it: relative to site-packages when inside one, else the base
    name (``.../site-packages/cryptography/hazmat/bindings/_rust.abi3.so`` ->
    ``cryptography/hazmat/bindings/_rust.abi3.so``; ``/usr/lib/.../libz.so.1`` -> ``libz.so.1``)."""
    for marker in _PKG_DIRS:
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):]
    if path.startswith("[") or not path:
        return path or "[anon]"
    return os.path.basename(path.replace(" (deleted)", ""))


class ProcessMaps:
    """Executable mappings of one process: address -> module path."""

    def __init__(self, pid: int):
        self.pid = pid
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str]] = []
        self.reload()

    def reload(self) -> bool:
        """Re-read /proc/PID/maps; False if the process is gone."""
        try:
            with open(f"/proc/{self.pid}/maps") as fh:
                lines = fh.readlines()
        except OSError:
            return False
        entries = []
        for line in lines:
            m = _MAPS_LINE.match(line)
            if m and m[3][2] == "x":
                entries.append((int(m[1], 16), int(m[2], 16), m[4].strip()))
        entries.sort()
        self.entries = entries
        self.starts = [e[0] for e in entries]
        return True

    def lookup(self, addr: int) -> str | None:
        entry = self.mapping(addr)
        return entry[2] if entry else None

    def mapping(self, addr: int) -> tuple[int, int, str] | None:
        """(start, end, path) of the executable mapping holding ``addr``."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.entries[i][1]:
            return self.entries[i]
        return None


def _kernel_resolver(bpf_cls):
    """addr -> kernel function name: bcc's ksym as uid 0; else /proc/kallsyms read by
    dpuprof.record.kallsyms (bcc resolves no kernel address unless euid is 0)."""
    if os.geteuid() == 0:
        return lambda addr: bpf_cls.ksym(addr).decode("utf-8", "replace")
    from dpuprof.record.kallsyms import KernelSymbols

    return KernelSymbols().name


class Symbolizer:
    """Frame strings for kernel and user addresses, cached. ``bpf_cls`` is ``bcc.BPF``."""

    def __init__(self, bpf_cls, max_cached: int = 200_000):
        from bcc import SymbolCache
        from bcc.libbcc import lib

        self._bpf = bpf_cls
        self._ksym = _kernel_resolver(bpf_cls)
        self._symcache_cls = SymbolCache
        self._free_symcache = lib.bcc_free_symcache
        self._symcaches: dict[int, object] = {}
        self._kcache: dict[int, str] = {}
        self._ucache: dict[tuple[int, int], str] = {}
        self._maps: dict[int, ProcessMaps] = {}
        self._max = max_cached
        self._generation = 0
        self._module_size: dict[str, int] = {}
        self._reloaded: dict[int, int] = {}  # pid -> generation of its last maps reload
        self._perfmaps: dict[int, PerfMap] = {}  # pid -> its /tmp/perf-PID.map (Python frames)
        self._perfmap_read: dict[int, int] = {}  # pid -> generation of its last perf map read
        self._arena: dict[int, tuple[int, int, int, int]] = {}  # pid -> python_range()

    def new_generation(self) -> None:
        """Start a drain: each process's map may be re-read at most once per generation, since
        broken user stack walks (no frame pointers) produce many addresses that map nowhere."""
        self._generation += 1

    def kernel(self, addr: int) -> str:
        sym = self._kcache.get(addr)
        if sym is None:
            sym = clean(self._ksym(addr))
            self._kcache[addr] = sym
        return sym

    def user(self, pid: int, addr: int, symbols: bool = True) -> str:
        """``"symbol (module)"`` for ``addr`` in process ``pid``. With ``symbols=False`` only the
        module is looked up (cheap: no ELF symbol tables are loaded)."""
        key = (pid, addr)
        frame = self._ucache.get(key)
        if frame is None:
            frame = self._resolve_user(pid, addr, symbols)
            if len(self._ucache) >= self._max:
                self._ucache.clear()
            self._ucache[key] = frame
        return frame

    def _resolve_user(self, pid: int, addr: int, symbols: bool) -> str:
        maps = self._maps.get(pid)
        if maps is None:
            maps = self._maps[pid] = ProcessMaps(pid)
        path = maps.lookup(addr)
        if path is None and self._reloaded.get(pid) != self._generation:
            self._reloaded[pid] = self._generation
            if maps.reload():
                path = maps.lookup(addr)
                if path is not None:
                    self._drop_symcache(pid)  # a new mapping: bcc's view of this process is stale
        if path is None:
            return UNKNOWN
        if not path and symbols:
            # Anonymous code: a CPython trampoline when the interpreter keeps frame pointers and
            # the walk itself reaches it (then drain.py skips the stack scan's frames).
            py = self.python(pid, addr)
            if py is not None:
                return py
        label = clean(module_label(path)).replace("(", "[").replace(")", "]")
        name = None
        if not symbols or self._too_big(path):
            return f"{UNRESOLVED} ({label})"
        if path and not path.startswith("["):
            try:
                name, _offset, _module = self._symcache(pid).resolve(addr, True)
            except Exception:  # bcc raises on processes that vanished mid-lookup
                name = None
        sym = clean(name.decode("utf-8", "replace")) if name else UNKNOWN
        return f"{sym} ({label})"

    def _perfmap(self, pid: int) -> PerfMap:
        """``pid``'s perf map, with what was appended since the last read read in, at most once
        per generation (the interpreter appends a line per function as it is first called)."""
        pm = self._perfmaps.get(pid)
        if pm is None:
            pm = self._perfmaps[pid] = PerfMap(pid)
        if self._perfmap_read.get(pid) != self._generation:
            self._perfmap_read[pid] = self._generation
            pm.refresh()
        return pm

    def python_range(self, pid: int) -> tuple[int, int, int, int] | None:
        """``pid``'s first trampoline arena as (start, end, stride, return offset), for
        the probe's stack scan (probes/cpu_sample.bpf.c); None while it has none (no perf map:
        not CPython >= 3.12 with its perf trampoline on, or nothing called yet). CPython fills a
        64 KiB arena (~6000 functions) before it maps another; later arenas are not scanned."""
        pm = self._perfmap(pid)
        if pm.first is None:
            return None
        arena = self._arena.get(pid)
        if arena is None:
            start, size = pm.first
            maps = self._maps.get(pid) or self._maps.setdefault(pid, ProcessMaps(pid))
            mapping = maps.mapping(start)
            if mapping is None and maps.reload():
                mapping = maps.mapping(start)
            ret = return_offset(read_code(pid, start, size))
            if mapping is None or ret is None:
                return None
            arena = self._arena[pid] = (mapping[0], mapping[1], pm.stride(), ret)
        return arena

    def python(self, pid: int, addr: int) -> str | None:
        """``"py::function:/path/file.py (perf-map)"`` for a return address ``addr`` into one of
        ``pid``'s Python trampolines, or None when it is inside none (a stale or unrelated word
        found by the stack scan, see probes/cpu_sample.bpf.c)."""
        pm = self._perfmaps.get(pid)
        name = pm.return_name(addr) if pm is not None else None
        if name is None:
            pm = self._perfmap(pid)  # a function first called since the last read
            name = pm.return_name(addr)
        return frame_name(name) if name is not None else None

    def _too_big(self, path: str) -> bool:
        size = self._module_size.get(path)
        if size is None:
            try:
                size = os.stat(path.replace(" (deleted)", "")).st_size
            except OSError:
                size = 0
            self._module_size[path] = size
        return size > SYMBOLS_MAX_MODULE_BYTES

    def _symcache(self, pid: int):
        cache = self._symcaches.get(pid)
        if cache is None:
            cache = self._symcaches[pid] = self._symcache_cls(pid)
        return cache

    def _drop_symcache(self, pid: int) -> None:
        cache = self._symcaches.pop(pid, None)
        if cache is not None:
            self._free_symcache(cache.cache, pid)

    def forget(self, pids) -> None:
        """Drop state for processes that have exited."""
        for pid in pids:
            self._maps.pop(pid, None)
            self._reloaded.pop(pid, None)
            self._perfmaps.pop(pid, None)
            self._perfmap_read.pop(pid, None)
            self._arena.pop(pid, None)
            self._drop_symcache(pid)
