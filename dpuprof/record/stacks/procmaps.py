"""A process's executable mappings, read from /proc/PID/maps, and what a missed address says.

A user address resolves to a file and a file offset through ``ProcessMaps``; one in no executable
mapping is either code mapped since the last read (``worth_rereading``) or a broken stack walk's
value that no re-read can turn into code (``could_be_code`` false: the symbolizer cuts the walk
there, dpuprof/record/stacks/symbols.py).
"""

from __future__ import annotations

import bisect

MIN_MAP_ADDR = 0x10000  # vm.mmap_min_addr's default: no process maps code below it
USER_SPACE_END = 0x800000000000  # x86-64 with 4-level page tables: user addresses are below
MAX_BACKOFF = 8  # drains: the longest wait between two re-reads of a process's maps for a miss
# Drains between two re-reads for a miss of an outer frame only (a frame-pointer walk's guess, not
# an instruction the process was at): broken walks through code built without frame pointers
# yield such addresses in every drain, and each re-read for them (0.76 ms for a DDP rank) was
# repeated every MAX_BACKOFF drains per process: beside 30 s of DDP training 36 re-reads, 27.5 ms,
# against 24, 14.0 ms with this (2026-12-07). New code is found from the innermost frame.
GUESS_BACKOFF = 64


def could_be_code(maps: "ProcessMaps", addr: int) -> bool:
    """False for an address no re-read of the maps can turn into code: below the lowest page a
    process can map, above user space (x86-64), or inside one of the process's data areas."""
    return MIN_MAP_ADDR <= addr < USER_SPACE_END and not maps.in_data(addr)


def worth_rereading(maps: "ProcessMaps", addr: int, generation: int, exact: bool = True) -> bool:
    """Whether an address that maps to no code in ``maps`` is worth re-reading the process's maps
    for in drain ``generation``: only one that could be code (could_be_code), of a process not
    found gone by an earlier read, and only when the maps were last read ``maps.backoff``
    generations ago or more; for an address that is not ``exact`` (an outer frame of a stack
    walk, which may be a broken walk's guess), GUESS_BACKOFF generations.

    Broken user stack walks (no frame pointers) yield such addresses in every drain, and
    re-reading a torch process's maps for each was the largest CPU cost of the drain; so each
    re-read that finds no new code doubles the wait before the next (up to MAX_BACKOFF
    generations), and one that finds new code resets it to 1. A library loaded into a process
    that has been running a while is therefore resolved within MAX_BACKOFF drains of a sample
    inside it (within GUESS_BACKOFF when it only ever calls out: then it is only ever an outer
    frame)."""
    wait = maps.backoff if exact else GUESS_BACKOFF
    return could_be_code(maps, addr) and not maps.gone and generation - maps.read_in >= wait


class ProcessMaps:
    """Executable mappings of one process: address -> (start, end, path, file offset, inode); and
    where its data is. An unreadable maps file (the process is gone) leaves it empty; ``ok`` says
    whether the last read succeeded."""

    def __init__(self, pid: int, generation: int = 0):
        self.pid = pid
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str, int, int]] = []
        self.data_starts: list[int] = []
        self.data: list[tuple[int, int]] = []  # mappings without execute permission: (start, end)
        self.read_in = generation  # the drain generation of the last read
        self.backoff = 1  # generations to wait before a miss may re-read (worth_rereading)
        self.gone = False  # a read found the process gone: its maps can no longer change
        self.ok = self.reload(generation)

    def reload(self, generation: int | None = None) -> bool:
        """Re-read /proc/PID/maps (in drain ``generation``); False if the process is gone."""
        try:
            with open(f"/proc/{self.pid}/maps") as fh:
                text = fh.read()
        except OSError:
            self.gone = True
            return False
        if not text:
            self.gone = True  # a zombie's maps are empty: keep what was read while it ran
            return False
        entries, data = [], []
        # str.split, not a regular expression per line: a torch process maps thousands of areas,
        # and a process whose stack walks break is re-read every interval (about 40 % faster).
        for line in text.splitlines():
            fields = line.split(None, 5)  # range, perms, offset, dev, inode[, path]
            if len(fields) < 5:
                continue
            start, _, end = fields[0].partition("-")
            if fields[1][2:3] == "x":
                entries.append((int(start, 16), int(end, 16), fields[5].strip() if len(fields) > 5 else "",
                                int(fields[2], 16), int(fields[4])))
            else:
                data.append((int(start, 16), int(end, 16)))
        entries.sort()
        data.sort()
        if generation is not None:
            self.backoff = min(2 * self.backoff, MAX_BACKOFF) if entries == self.entries else 1
            self.read_in = generation
        self.entries, self.data = entries, data
        self.starts = [e[0] for e in entries]
        self.data_starts = [d[0] for d in data]
        return True

    def in_data(self, addr: int) -> bool:
        """True when ``addr`` lies in a mapping that is not executable (heap, stack, a library's
        data): a broken stack walk's typical address, which no re-read of the maps would resolve."""
        i = bisect.bisect_right(self.data_starts, addr) - 1
        return i >= 0 and addr < self.data[i][1]

    def lookup(self, addr: int) -> str | None:
        entry = self.mapping(addr)
        return entry[2] if entry else None

    def mapping(self, addr: int) -> tuple[int, int, str, int, int] | None:
        """(start, end, path, file offset, inode) of the executable mapping holding ``addr``."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.entries[i][1]:
            return self.entries[i]
        return None


__all__ = ["ProcessMaps", "could_be_code", "worth_rereading", "MIN_MAP_ADDR", "USER_SPACE_END", "MAX_BACKOFF",
           "GUESS_BACKOFF"]
