"""Import bcc lazily, including from the distribution's Python (Debian's python3-bpfcc).

bcc is pure Python over libbcc (ctypes), so the module installed for the system Python imports into
any CPython 3 when its dist-packages directory is reachable; it is appended (never prepended) to
``sys.path`` so pip-installed packages keep precedence.
"""

from __future__ import annotations

import ctypes
import glob
import sys

from dpuprof.errors import UserError

_DIST_PACKAGES = ["/usr/lib/python3/dist-packages", *sorted(glob.glob("/usr/lib/python3.*/site-packages"))]
INSTALL_HINT = "sudo scripts/install-bcc.sh (or: apt-get install python3-bpfcc)"


def import_bcc():
    """Return the ``bcc`` module or raise UserError naming the fix."""
    try:
        import bcc  # noqa: F401
        return bcc
    except ImportError:
        pass
    for path in _DIST_PACKAGES:
        if path not in sys.path:
            sys.path.append(path)
    try:
        import bcc
    except (ImportError, OSError) as err:
        raise UserError(f"bcc is not available ({err}); install it with: {INSTALL_HINT}") from None
    return bcc


def bcc_available() -> tuple[bool, str]:
    """(True, version) if bcc imports, else (False, reason)."""
    try:
        bcc = import_bcc()
    except UserError as err:
        return False, str(err)
    return True, getattr(bcc, "__version__", "unknown")


_COMPILER_LIBS = ("libLLVM", "libclang")
_MADV_DONTNEED = 4


def release_compiler_pages() -> int:
    """Drop from this process's RSS the pages of libLLVM and libclang touched by bcc's compile
    (83 MB on the development VM): libbcc links them, so they stay mapped for the whole
    recording although nothing runs them once the probes are loaded. Returns the kB released.

    Only read-only mappings without private (copied-on-write) pages are advised MADV_DONTNEED:
    those pages are the file's own, still in the page cache, and fault back in unchanged if a
    later compile (a probe's fallback) runs the code again. Relocated data is never touched."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        with open("/proc/self/smaps") as fh:
            text = fh.read()
    except OSError:
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    for lo, hi, rss_kb in _droppable(text):
        if libc.madvise(lo, hi - lo, _MADV_DONTNEED) == 0:
            released += rss_kb
    return released


def _droppable(smaps: str) -> list[tuple[int, int, int]]:
    """(start, end, Rss kB) of the compiler libraries' read-only mappings with no anonymous
    pages in a ``/proc/PID/smaps`` text."""
    out, cur = [], None
    for line in smaps.splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and len(head[1]) == 4:  # a mapping's first line
            path = head[5] if len(head) == 6 else ""
            keep = "w" not in head[1] and any(lib in path.rsplit("/", 1)[-1] for lib in _COMPILER_LIBS)
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            cur = {"range": (lo, hi), "rss": 0, "anon": 0} if keep else None
            if cur is not None:
                out.append(cur)
        elif cur is not None and line.startswith(("Rss:", "Anonymous:")):
            cur["rss" if line.startswith("Rss:") else "anon"] = int(line.split()[1])
    return [(*m["range"], m["rss"]) for m in out if m["anon"] == 0]
