"""Python function names from a process's perf map (``/tmp/perf-PID.map``), and which Python the
recorded command runs (the recording's ``python_frames`` meta line).

CPython >= 3.12 started with ``PYTHONPERFSUPPORT=1`` (or ``-X perf``) runs every Python function
call through a small trampoline of its own, and appends one line per trampoline to
``/tmp/perf-PID.map`` when the function is first called: ``START SIZE NAME`` (hex start and size;
the name ``py::qualname:/path/file.py``), the format perf documents in
tools/perf/Documentation/jit-interface.txt. The recorder reads it at every drain; once the
recording ends nothing needs it, so the maps that exist only because dpuprof set
``PYTHONPERFSUPPORT`` are removed then (``remove_maps``). See docs/python-frames.md for how the
trampoline addresses get into samples.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import stat
import subprocess

from dpuprof.recording.folded import escape

SUFFIX = " (perf-map)"


def parse_line(line: str) -> tuple[int, int, str] | None:
    """``"7f0a1000 b py::f:/x.py"`` -> (start, size, name); None for a malformed line."""
    parts = line.rstrip("\n").split(" ", 2)
    if len(parts) != 3:
        return None
    try:
        start, size = int(parts[0], 16), int(parts[1], 16)
    except ValueError:
        return None
    return (start, size, parts[2]) if size > 0 and parts[2] else None


def frame_name(name: str) -> str:
    """The frame string shown in stacks: ``py::f:/x.py (perf-map)``, safe inside folded text."""
    text = escape(name)
    return text + SUFFIX


class PerfMap:
    """The perf map of one process, read incrementally: ``refresh()`` reads only what was appended
    since the last call (the file offset is kept; a line still being written is left for the next
    call). ``lookup(addr)`` -> the name of the trampoline holding ``addr``, or None."""

    def __init__(self, pid: int, path: str | None = None):
        self.pid = pid
        self.path = path or f"/tmp/perf-{pid}.map"
        self.offset = 0
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str]] = []  # (start, end, name), sorted by start
        self.lo = 0  # lowest start and highest end seen (0, 0 while empty)
        self.hi = 0
        self.first: tuple[int, int] | None = None  # (start, size) of the file's first entry

    def refresh(self) -> bool:
        """Read new lines; True if any entry was added. A missing file is not an error (the
        process runs no trampolines, or has not written one yet)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return False
        end = data.rfind(b"\n") + 1  # only whole lines
        if end == 0:
            return False
        self.offset += end
        new = [e for e in (parse_line(t) for t in data[:end].decode("utf-8", "replace").splitlines()) if e]
        if not new:
            return False
        if self.first is None:
            self.first = new[0][:2]
        self.entries.extend((s, s + n, name) for s, n, name in new)
        self.entries.sort()
        self.starts = [e[0] for e in self.entries]
        self.lo = self.entries[0][0]
        self.hi = max(self.hi, max(s + n for s, n, _ in new))
        return True

    def lookup(self, addr: int) -> str | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.entries[i][1]:
            return self.entries[i][2]
        return None

    def stride(self) -> int | None:
        """Bytes from one trampoline to the next: CPython copies them back to back, padded (3.12:
        11 bytes, none; 3.13: 11 bytes padded to 16), so the smallest gap between entries; the
        first entry's size while there is only one. None while empty."""
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:]) if b > a]
        if gaps:
            return min(gaps)
        return self.first[1] if self.first else None

    def return_name(self, addr: int) -> str | None:
        """The name for a return address into a trampoline: inside it, never its first byte
        (a call's return address follows the call), which also drops scanned words that merely
        equal a trampoline's start (a function pointer, not a frame)."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and self.entries[i][0] < addr < self.entries[i][1]:
            return self.entries[i][2]
        return None


CALL_RCX = b"\xff\xd1"  # x86-64 `call *%rcx`: CPython's trampoline calls the evaluator through rcx


def return_offset(code: bytes) -> int | None:
    """The offset of a return address inside a trampoline whose machine code is ``code``: just
    after its ``call *%rcx`` (CPython 3.12.1 and 3.13.0 on x86-64: ``sub $8,%rsp; call *%rcx;
    add $8,%rsp; ret``, so 6). None when there is no such call."""
    i = code.find(CALL_RCX)
    return None if i < 0 else i + len(CALL_RCX)


def read_code(pid: int, addr: int, size: int) -> bytes:
    """``size`` bytes of process ``pid``'s memory at ``addr`` (b"" when unreadable)."""
    try:
        with open(f"/proc/{pid}/mem", "rb") as fh:
            fh.seek(addr)
            return fh.read(size)
    except (OSError, ValueError, OverflowError):
        return b""


def remove_maps(pids, since: float, directory: str = "/tmp") -> list[int]:
    """Remove ``DIRECTORY/perf-PID.map`` of each of ``pids`` that has exited, where the file is a
    regular file last written at or after ``since`` (unix s): the maps the interpreter wrote
    during the recording because the recorder set PYTHONPERFSUPPORT for the command. A live
    process's map (it is still being written) and an older file stay. Returns the pids whose map
    was removed, sorted. (File times come from the kernel's coarse clock, up to a tick behind
    ``time.time()``; an interpreter writes its first line tens of ms after it starts.)"""
    removed = []
    for pid in sorted(pids):
        path = os.path.join(directory, f"perf-{pid}.map")
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_mtime < since or os.path.exists(f"/proc/{pid}"):
            continue
        try:
            os.unlink(path)
        except OSError:  # removed meanwhile, or a directory we may not write
            continue
        removed.append(pid)
    return removed


# ---------------------------------------------------------------- which interpreter the command runs
# CPython >= 3.12: the perf trampoline on (docs.python.org/3/howto/perf_profiling.html)
ENV = {"PYTHONPERFSUPPORT": "1"}
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")


def command_interpreter(argv: list[str]) -> str | None:
    """The Python interpreter ``argv`` runs, as a path: ``argv[0]`` itself when it is named
    python*, else the interpreter of its ``#!`` line (``torchrun``, ``/usr/bin/env python3``);
    None when the command is not a Python interpreter or script."""
    exe = shutil.which(argv[0]) if argv else None
    if exe is None:
        return None
    if _PYTHON_NAME.match(os.path.basename(exe)) or _PYTHON_NAME.match(os.path.basename(os.path.realpath(exe))):
        return exe
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(256).decode("utf-8", "replace")
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if words and _PYTHON_NAME.match(os.path.basename(words[0])):
        return shutil.which(words[0])
    return None


def interpreter_version(exe: str, user=None) -> tuple[str, int, int] | None:
    """(implementation, major, minor) of the interpreter ``exe``, by running it once (~20 ms), as
    ``user`` (a child.Identity: under sudo, the user the command will run as) when given."""
    code = "import sys; print(sys.implementation.name, *sys.version_info[:2])"
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    ids = {"user": user.uid, "group": user.gid, "extra_groups": []} if user is not None else {}
    try:
        out = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=10, env=env,
                             **ids).stdout.split()
        return out[0], int(out[1]), int(out[2])
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def python_frames_status(argv: list[str], enabled: bool, user=None) -> str:
    """The recording's ``python_frames`` meta line: whether Python frames can appear, and why not.
    The interpreter is asked as ``user`` (see ``interpreter_version``)."""
    if not enabled:
        return "off: --no-python-frames"
    exe = command_interpreter(argv)
    version = interpreter_version(exe, user) if exe else None
    if exe is None:
        return ("on where a CPython >= 3.12 process runs (PYTHONPERFSUPPORT=1 is set for the command; "
                "the command itself is not a Python interpreter)")
    if version is None:
        return (f"on where a CPython >= 3.12 process runs (PYTHONPERFSUPPORT=1 is set for the command; "
                f"{exe} did not tell its version)")
    impl, major, minor = version
    if impl != "cpython":
        return f"off: {impl} {major}.{minor} has no CPython perf trampoline"
    if (major, minor) < (3, 12):
        return f"off: CPython {major}.{minor} has no perf trampoline (needs >= 3.12)"
    return f"on (perf trampoline, CPython {major}.{minor}; frames from a stack scan, docs/python-frames.md)"
