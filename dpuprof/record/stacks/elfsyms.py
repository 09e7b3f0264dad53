"""Function symbols of one ELF file, looked up by file offset: shared by every process mapping it.

A user address resolves to (module, file offset) through the process's maps (symbols.py); the
name then depends on the file alone, so 32 short-lived ``curl`` processes share one load of
libcrypto's table, and a process that has exited still resolves from the maps captured while it
ran. bcc's per-process symbol caches could do neither: they read /proc/PID/maps themselves and
load every module's table once per process.

Read here: ``.symtab`` and ``.dynsym`` (STT_FUNC and STT_GNU_IFUNC with their sizes, as bcc
does), the PT_LOAD segments (a file offset becomes a link-time address), and, for a stripped
file, the ``.symtab`` of its separate debug file under /usr/lib/debug/.build-id/ when installed.
C++ names are demangled with libstdc++'s ``__cxa_demangle`` (as bcc does), so rules such as
``gloo::sum*`` match. ELF64 little-endian only (x86-64, arm64); anything else has no symbols.
"""

from __future__ import annotations

import bisect
import ctypes
from array import array
import ctypes.util
import mmap
import os
import struct

_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_PT_LOAD, _PT_NOTE = 1, 4
_NT_GNU_BUILD_ID = 3
DEBUG_ROOT = "/usr/lib/debug/.build-id"


class ElfSymbols:
    """``name(file_offset)`` -> function name or None. An unreadable or non-ELF64 file has no
    symbols (never raises). Names are decoded only when asked for."""

    def __init__(self, path: str):
        self.loads: list[tuple[int, int, int]] = []  # PT_LOAD (offset, vaddr, filesz)
        # The functions sorted by vaddr, as three parallel arrays of u64 (vaddr, size, name offset
        # in _names): 24 bytes a function where a list of 3-tuples took ~130 (a long-lived agent
        # keeps up to symbols.MAX_ELF_FILES of these; libpython alone has ~15,000 functions).
        self.starts, self.sizes, self.name_at = array("Q"), array("Q"), array("Q")
        self._names = b""
        self.build_id = ""
        self._has_symtab = False
        try:
            with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                self._read(m, own=True)
        except (OSError, ValueError, struct.error):
            return
        if not self._has_symtab and self.build_id:
            self._read_debug_file()

    def _read(self, m, own: bool) -> None:
        if m[:6] != b"\x7fELF\x02\x01":  # ELF64, little-endian
            return
        phoff, shoff = struct.unpack_from("<QQ", m, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", m, 0x36)
        if own:
            for i in range(phnum):
                p_type, _f, off, vaddr, _pa, filesz = struct.unpack_from("<IIQQQQ", m, phoff + i * phentsize)
                if p_type == _PT_LOAD:
                    self.loads.append((off, vaddr, filesz))
                elif p_type == _PT_NOTE and not self.build_id:
                    self.build_id = _build_id(m, off, filesz)
        sections = [struct.unpack_from("<IIQQQQIIQQ", m, shoff + i * shentsize) for i in range(shnum)]
        self._has_symtab = False
        found = []
        for sh in sections:
            if sh[1] in (_SHT_SYMTAB, _SHT_DYNSYM) and sh[6] < len(sections):
                self._has_symtab |= sh[1] == _SHT_SYMTAB
                found.append(self._symbols(m, sh, sections[sh[6]]))
        self._merge(found)

    def _symbols(self, m, sh, strtab) -> tuple[bytes, list]:
        """(string table, [(vaddr, size, name offset)]) of one symbol section's functions."""
        off, size, entsize = sh[4], sh[5], sh[9] or 24
        strings = bytes(m[strtab[4]:strtab[4] + strtab[5]])
        out = []
        for name, info, _other, shndx, value, sz in struct.iter_unpack("<IBBHQQ", m[off:off + size - size % entsize]):
            if value and shndx and (info & 0xF) in (_STT_FUNC, _STT_GNU_IFUNC):
                out.append((value, sz, name))
        return strings, out

    def _merge(self, found) -> None:
        """Add the functions of ``found`` [(string table, [(vaddr, size, name offset)])], keeping
        only their names (NUL-terminated) of each string table: a table also names every object,
        section and file (libpython's is 2.5 times its functions' names)."""
        seen = set(self.starts)
        syms = list(zip(self.starts, self.sizes, self.name_at))
        names = bytearray(self._names)
        for strings, entries in found:
            for value, size, name in entries:
                if value not in seen:  # .dynsym repeats .symtab's exported functions
                    seen.add(value)
                    end = strings.find(b"\0", name)
                    syms.append((value, size, len(names)))
                    names += strings[name:end + 1 if end >= 0 else None]
        self._names = bytes(names)
        syms.sort()
        self.starts = array("Q", [v for v, _, _ in syms])  # from a list: sized exactly
        self.sizes = array("Q", [n for _, n, _ in syms])
        self.name_at = array("Q", [a for _, _, a in syms])

    def _read_debug_file(self) -> None:
        """Add the .symtab of the separate debug file (Debian's -dbgsym packages), if installed."""
        path = os.path.join(DEBUG_ROOT, self.build_id[:2], self.build_id[2:] + ".debug")
        try:
            with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                self._read(m, own=False)
        except (OSError, ValueError, struct.error):
            pass

    def vaddr(self, file_offset: int) -> int | None:
        """The link-time address of ``file_offset`` (the PT_LOAD segment holding it)."""
        for off, vaddr, filesz in self.loads:
            if off <= file_offset < off + filesz:
                return file_offset - off + vaddr
        return None

    def name(self, file_offset: int) -> str | None:
        """The function holding ``file_offset``, demangled; None outside every sized function."""
        addr = self.vaddr(file_offset)
        if addr is None:
            return None
        i = bisect.bisect_right(self.starts, addr) - 1
        # Aliases and nested local symbols share or overlap ranges: try a few candidates.
        for j in range(i, max(-1, i - 4), -1):
            value, size, name = self.starts[j], self.sizes[j], self.name_at[j]
            if value <= addr < value + max(size, 1):
                end = self._names.find(b"\0", name)
                return demangle(self._names[name:end if end >= 0 else None].decode("utf-8", "replace"))
        return None


def _build_id(m, off: int, size: int) -> str:
    """The GNU build-id (hex) in the PT_NOTE segment at ``off``, or ""."""
    end = off + size
    while off + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", m, off)
        name_end = off + 12 + ((namesz + 3) & ~3)
        if ntype == _NT_GNU_BUILD_ID and bytes(m[off + 12:off + 12 + namesz]).rstrip(b"\0") == b"GNU":
            return bytes(m[name_end:name_end + descsz]).hex()
        off = name_end + ((descsz + 3) & ~3)
    return ""


_cxa = None


def demangle(name: str) -> str:
    """``_ZN4gloo3sumIfEEvPvPKvS3_m`` -> ``void gloo::sum<float>(...)``; other names unchanged."""
    global _cxa
    if not name.startswith("_Z"):
        return name
    if _cxa is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            _cxa = (lib.__cxa_demangle, ctypes.CDLL(None).free)
            _cxa[0].restype = ctypes.c_void_p
            _cxa[0].argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            _cxa[1].argtypes = [ctypes.c_void_p]
        except (OSError, AttributeError):
            _cxa = False
    if not _cxa:
        return name
    status = ctypes.c_int(0)
    ptr = _cxa[0](name.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        _cxa[1](ptr)
