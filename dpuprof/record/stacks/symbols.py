"""Turn sampled addresses into frame strings, for live processes and for those that have exited.

Kernel addresses resolve through /proc/kallsyms (bcc's ksym as uid 0, else kallsyms.py). A user
address resolves in two steps: the process's executable mappings (``ProcessMaps``, from
/proc/PID/maps) give the file and the file offset; the file's own symbol table (``ElfSymbols``,
loaded once per file and shared by every process that maps it) gives the name. The maps of a
process are read when it execs (``capture``, called by dpuprof/record/drain/execs.py a few ms
after the exec, and again later for dlopen'd libraries), or at its first drain, and are kept after
it exits until its samples are drained (``dead``/``forget``): a helper that lives a fraction of
an interval is resolved like a long-lived process. A process that forked without exec'ing and is
gone before its maps were read borrows its parent's (``parent_of``). A miss in a live process
re-reads its maps (libraries loaded later, ``import cryptography``), backing off while nothing
changes (``worth_rereading``).
"""

from __future__ import annotations

import os

from dpuprof.record.lru import Lru
from dpuprof.record.stacks.elfsyms import ElfSymbols
from dpuprof.record.stacks.kallsyms import KernelSymbols
from dpuprof.record.stacks.perfmap import PerfMap, frame_name, read_code, return_offset
from dpuprof.record.stacks.procmaps import ProcessMaps, could_be_code, worth_rereading
from dpuprof.recording.folded import escape

UNKNOWN = "[unknown]"
UNRESOLVED = "[unresolved]"  # symbol not looked up: module only
# A module's symbol table is loaded once per file (elfsyms.py), in Python: ~30 ms for libcrypto
# (5,000 functions), ~0.3 s for a 100-MB libLLVM, seconds and ~100 MB of lists for libtorch_cpu.so
# (400 MB). Modules above this size are labelled by module only; classification needs no more
# (rules match modules), only the flame graph is coarser.
SYMBOLS_MAX_MODULE_BYTES = 16 << 20
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


# Bounds for a recorder that runs for weeks (dpuprof agent) on a host whose processes, libraries
# and containers come and go. ELF files: the least recently used beyond MAX_ELF_FILES are
# unloaded (a file's table is 0.1-1 MB; one needed again is re-read, ~30 ms for libcrypto).
# Kernel addresses and module sizes: cleared when full (kernel text is finite, but new return
# addresses kept coming at ~9 a second beside a loop of short-lived processes, ~130 bytes each;
# and a module path may be a new memfd or container path each time).
MAX_ELF_FILES = 128
MAX_KERNEL_ADDRS = 16384
# Whole stacks cached (kernel, and user ones over every process): a drain meets mostly the same
# stacks each interval, and one lookup of the whole stack replaced a lookup per frame (~10 each),
# most of the drain's CPU at 4 x 128 Python threads. ~0.3 KB each.
MAX_STACKS_CACHED = 20_000
MAX_MODULE_PATHS = 4096


def warm_kernel_symbols(bpf_cls) -> None:
    """Read the kernel's symbol table now: bcc reads all of /proc/kallsyms at its first lookup
    (60 ms of CPU here, 2026-12-06), which otherwise falls in the first drain, beside the command.
    The recorder calls this while the probes compile in their child process."""
    if os.geteuid() == 0:
        bpf_cls.ksym(0)


def _kernel_resolver(bpf_cls):
    """addr -> kernel function name: bcc's ksym as uid 0; else /proc/kallsyms read by
    dpuprof.record.stacks.kallsyms (bcc resolves no kernel address unless euid is 0)."""
    if os.geteuid() == 0:
        return lambda addr: bpf_cls.ksym(addr).decode("utf-8", "replace")

    return KernelSymbols().name


class Symbolizer:
    """Frame strings for kernel and user addresses, cached. ``bpf_cls`` is ``bcc.BPF`` (its ksym).
    ``parent_of(pid)``: the parent tgid of a workload process (the BPF tree map), or None.

    Threads: ``capture`` may run on another thread than the drain (execs.py); it only replaces a
    pid's ``ProcessMaps`` and per-pid cache whole, which the drain reads without a lock."""

    def __init__(self, bpf_cls, max_cached: int = 200_000, parent_of=None):
        self._ksym = _kernel_resolver(bpf_cls)
        self.parent_of = parent_of
        self._kcache: dict[int, str] = {}
        self._ucache: dict[int, dict[int, str]] = {}  # pid -> addr -> frame
        self._cached = 0
        self._kstacks: dict[tuple[int, ...], list[str]] = {}  # kernel addresses -> frames
        self._ustacks: dict[int, dict[tuple[int, ...], list[str]]] = {}  # pid -> addresses -> frames
        self._ustacks_cached = 0
        self._maps: dict[int, ProcessMaps] = {}
        self._files = Lru(MAX_ELF_FILES)  # (path, inode) -> its ElfSymbols, or None (unreadable)
        self._max = max_cached
        self._generation = 0
        self._module_size: dict[str, int] = {}
        self._perfmaps: dict[int, PerfMap] = {}  # pid -> its /tmp/perf-PID.map (Python frames)
        self._perfmap_read: dict[int, int] = {}  # pid -> generation of its last perf map read
        self._arena: dict[int, tuple[int, int, int, int]] = {}  # pid -> python_range()

    def new_generation(self) -> None:
        """Start a drain: a process's maps are re-read for an address they miss at most once per
        generation, and less often while re-reads find nothing new (worth_rereading)."""
        self._generation += 1

    def capture(self, pid: int) -> bool:
        """Read ``pid``'s maps now (it has just exec'd, or may have loaded libraries since) and
        keep them past its exit; False when it is already gone (the maps read before stay)."""
        maps = ProcessMaps(pid, self._generation)
        if not maps.ok:
            return False
        old = self._maps.get(pid)
        self._maps[pid] = maps
        if old is None or old.entries != maps.entries:
            self._ucache.pop(pid, None)  # a new image (exec) or new code: cached frames are stale
            self._ustacks_cached -= len(self._ustacks.pop(pid, None) or ())
        return True

    def dead(self) -> list[int]:
        """Processes held here that have exited. Taken before a drain's buffer flip, their samples
        are all in the flipped buffer, so ``forget`` after that drain loses none."""
        held = set(self._maps) | set(self._perfmaps)
        return [pid for pid in held if not os.path.exists(f"/proc/{pid}")]

    def kernel(self, addr: int) -> str:
        sym = self._kcache.get(addr)
        if sym is None:
            sym = clean(self._ksym(addr))
            if len(self._kcache) >= MAX_KERNEL_ADDRS:
                self._kcache.clear()
            self._kcache[addr] = sym
        return sym

    def kernel_stack(self, addrs: tuple[int, ...]) -> list[str]:
        """The frames of kernel addresses ``addrs`` (in their order), cached by the whole stack.
        The list is shared: callers do not change it."""
        frames = self._kstacks.get(addrs)
        if frames is None:
            if len(self._kstacks) >= MAX_STACKS_CACHED:
                self._kstacks.clear()
            frames = self._kstacks[addrs] = [self.kernel(a) for a in addrs]
        return frames

    def user_stack(self, pid: int, addrs: tuple[int, ...], symbols: bool = True) -> list[str]:
        """``user`` of each address of ``addrs`` (outermost first), up to a broken walk
        (``_cut_at_data``); cached by the whole stack once every frame is final (a frame the next
        drain may still resolve is not). The list is shared: callers do not change it."""
        stacks = self._ustacks.get(pid)
        frames = stacks.get(addrs) if stacks is not None else None
        if frames is None:
            frames = self._cut_at_data(pid, addrs, symbols)
            known = self._ucache.get(pid) or {}
            if all(a in known for a in addrs[len(addrs) - len(frames):]):
                if self._ustacks_cached >= MAX_STACKS_CACHED:
                    self._ustacks.clear()
                    self._ustacks_cached = 0
                self._ustacks.setdefault(pid, {})[addrs] = frames
                self._ustacks_cached += 1
        return frames

    def _cut_at_data(self, pid: int, addrs: tuple[int, ...], symbols: bool) -> list[str]:
        """The frames of ``addrs`` from the leaf (last) outwards, up to the first address that
        cannot be code (``could_be_code``: in the process's heap, stack or data, or outside user
        space), which ends the list as one UNKNOWN root frame. The frame-pointer walk read that
        "return address" from a frame of code built without frame pointers, and every address
        outward of it through the same chain: 421 of 539 stacks of a 4 x 128-thread hashing load
        ran 10-127 UNKNOWN frames deep (a heap list's links, 0x2e0 apart, taken for frames), each
        sample a new stack to resolve, classify and store. (perf shows them all.)"""
        frames = []
        for i, addr in enumerate(reversed(addrs)):
            frame = self.user(pid, addr, symbols, exact=i == 0)
            if frame == UNKNOWN and not could_be_code(self._process_maps(pid), addr):
                frames.append(UNKNOWN)
                break
            frames.append(frame)
        frames.reverse()
        return frames

    def user(self, pid: int, addr: int, symbols: bool = True, exact: bool = True) -> str:
        """``"symbol (module)"`` for ``addr`` in process ``pid``. With ``symbols=False`` only the
        module is looked up (cheap: no ELF symbol tables are loaded). ``exact``: ``addr`` is an
        instruction the process was at (a sample's, or where it entered the kernel: a stack's
        innermost user frame), not an outer frame of a walk (worth_rereading)."""
        cache = self._ucache.get(pid)
        frame = cache.get(addr) if cache is not None else None
        if frame is None:
            frame, final = self._resolve_user(pid, addr, symbols, exact)
            if final:
                if self._cached >= self._max:
                    self._ucache.clear()
                    self._cached = 0
                    self._ustacks.clear()  # stacks are cached only while their frames are
                    self._ustacks_cached = 0
                self._ucache.setdefault(pid, {})[addr] = frame
                self._cached += 1
        return frame

    def _process_maps(self, pid: int) -> ProcessMaps:
        """``pid``'s maps: captured at exec, read now, or (gone before either) its parent's,
        which a child that forked without exec'ing shares."""
        maps = self._maps.get(pid)
        if maps is None:
            maps = ProcessMaps(pid, self._generation)
            if not maps.ok and self.parent_of is not None:
                parent = self.parent_of(pid)
                if parent and parent != pid and parent in self._maps:
                    return self._maps[parent]
            self._maps[pid] = maps
        return maps

    def _resolve_user(self, pid: int, addr: int, symbols: bool, exact: bool = True) -> tuple[str, bool]:
        """(frame, final): not final when a miss was not checked against fresh maps (worth_rereading
        said wait), so that a later drain may still resolve the address."""
        maps = self._process_maps(pid)
        entry = maps.mapping(addr)
        if entry is None:
            if worth_rereading(maps, addr, self._generation, exact) and maps.reload(self._generation):
                entry = maps.mapping(addr)
            if entry is None:
                return UNKNOWN, maps.read_in == self._generation or maps.gone or not could_be_code(maps, addr)
        path = entry[2]
        if not path and symbols:
            # Anonymous code: a CPython trampoline when the interpreter keeps frame pointers and
            # the walk itself reaches it (then drain.py skips the stack scan's frames).
            py = self.python(pid, addr)
            if py is not None:
                return py, True
        label = clean(module_label(path)).replace("(", "[").replace(")", "]")
        if not symbols or self._too_big(path):
            return f"{UNRESOLVED} ({label})", True
        name = None
        if path and not path.startswith("["):
            elf = self._file(pid, entry)
            name = elf.name(addr - entry[0] + entry[3]) if elf is not None else None
        sym = clean(name) if name else UNKNOWN
        return f"{sym} ({label})", True

    def _file(self, pid: int, entry: tuple) -> ElfSymbols | None:
        """The symbols of the file of mapping ``entry`` (start, end, path, offset, inode), loaded
        once per (path, inode). The path is checked against the inode: a file deleted or replaced
        since (a package upgrade), or one seen only inside the process's mount namespace (a
        container), is read through /proc/PID/map_files or /proc/PID/root while the process
        lives, else has no symbols."""
        start, end, path, _offset, inode = entry
        key = (path, inode)
        if key not in self._files:  # not get(): a file without symbols is stored as None
            found = None
            for candidate in (path.replace(" (deleted)", ""), f"/proc/{pid}/map_files/{start:x}-{end:x}",
                              f"/proc/{pid}/root{path}"):
                try:
                    if os.stat(candidate).st_ino == inode:
                        found = ElfSymbols(candidate)
                        break
                except OSError:
                    continue
            self._files.put(key, found)
        return self._files.get(key)

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
            maps = self._maps.get(pid) or self._maps.setdefault(pid, ProcessMaps(pid, self._generation))
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
            if len(self._module_size) >= MAX_MODULE_PATHS:
                self._module_size.clear()
            self._module_size[path] = size
        return size > SYMBOLS_MAX_MODULE_BYTES

    def forget(self, pids) -> None:
        """Drop the state of processes that have exited and whose samples have been drained."""
        for pid in pids:
            self._maps.pop(pid, None)
            self._cached -= len(self._ucache.pop(pid, None) or ())
            self._ustacks_cached -= len(self._ustacks.pop(pid, None) or ())
            self._perfmaps.pop(pid, None)
            self._perfmap_read.pop(pid, None)
            self._arena.pop(pid, None)
