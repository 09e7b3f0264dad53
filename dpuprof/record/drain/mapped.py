"""Which executable files each workload process maps, for the uprobe session (uprobes.py), with
/proc/PID/maps re-read only when it can hold something new.

A Python process with numpy and pandas has ~570 lines of /proc/PID/maps: reading and parsing them
took 493 us of CPU, against 22 us for its /proc/PID/status (2026-12-05, a 2-vCPU VM), and the
session did it every drain for every process of the workload (a DDP job with DataLoader workers
has dozens). The size of a process's executable mappings (/proc/PID/status VmExe + VmLib, the
kernel's mm->exec_vm) changes whenever a library is mapped or unmapped, so the maps are read again
when it changed, and on every FULL_EVERY-th call whatever it did (a library swapped for one of the
same size between two calls is found then).
"""

from __future__ import annotations

from dpuprof.record.workload import procfs

FULL_EVERY = 10  # calls (drains: 10 s at the default interval)


def mapped_files(maps_text: str) -> set[str]:
    """Paths of the files mapped executable in a ``/proc/PID/maps`` text (deleted files skipped)."""
    out = set()
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/") and not parts[5].endswith(" (deleted)"):
            out.add(parts[5])
    return out


class MappedFiles:
    """The executable files seen mapped by each process, and what is new at each call."""

    def __init__(self, full_every: int = FULL_EVERY):
        self.full_every = full_every
        self.files: dict[int, set[str]] = {}  # pid -> files seen mapped
        self.code_kb: dict[int, int] = {}  # pid -> its executable mappings' size at the last read
        self.skipped: set[int] = set()  # ids never read again: threads, exited processes
        self.calls = 0
        self.maps_read = 0  # /proc/PID/maps reads so far (for tests and curiosity)

    def new_files(self, pids) -> dict[int, set[str]]:
        """{pid: executable files mapped since the last call (all of them at the first)} for the
        live processes among ``pids``. Thread ids and exited processes are skipped for good (ids
        are not reused soon)."""
        self.calls += 1
        full = self.calls % self.full_every == 0
        out = {}
        for pid in pids:
            if pid in self.skipped:
                continue
            code = procfs.code_size(pid)
            if code is None or code[0] != pid:
                self._skip(pid)
                continue
            if pid in self.files and self.code_kb[pid] == code[1] and not full:
                continue  # no executable mapping came or went
            try:
                with open(f"/proc/{pid}/maps") as fh:
                    files = mapped_files(fh.read())
            except OSError:
                self._skip(pid)
                continue
            self.maps_read += 1
            self.code_kb[pid] = code[1]
            known = self.files.setdefault(pid, set())
            new = files - known
            if new:
                out[pid] = new
                known |= new
        return out

    def _skip(self, pid: int) -> None:
        self.skipped.add(pid)
        self.files.pop(pid, None)
        self.code_kb.pop(pid, None)
