"""Rotating recordings, like ``perf record --switch-output``: one Recording file per window.

``RotatingWriter`` has RecordingWriter's interface (``set_meta``, ``write_interval``, ``close``),
so the recorder (dpuprof/record/recorder.py, ``writer_factory``) writes through it unchanged and
the probes stay loaded across files. Before an interval is written, the current file is closed
(``complete`` true, ``stop_reason`` "rotated") when it is ``rotate_s`` old or ``rotate_bytes``
large, and the next file opened with ``start_time`` = that interval's start: the next file starts
exactly where the last one ended and no interval is lost at a switch.

Each file is a complete Recording on its own: interval numbers restart at 0, and the processes,
threads and stacks an interval refers to are written into the file that holds the interval (the
recorder hands each only once, so they are kept here and written again where a new file needs
them, until the recorder says it will not refer to them again: ``forget``; threads and processes
not seen in a whole file are dropped at rotation too). Only the newest ``keep`` files of this
writer's name pattern are kept in the directory.
"""

from __future__ import annotations

import glob
import os
import re
import time
from pathlib import Path
from typing import Callable

from dpuprof.recording.writer import RecordingWriter

#: The name of each file: sorts in time order, and says which host and agent wrote it.
NAME = "{prefix}-{stamp}-{seq:06d}.rec"
_PATTERN = re.compile(r"\d{8}T\d{6}Z-\d{6}\.rec")  # what follows "PREFIX-" in NAME


class RotatingWriter:
    """Writes a sequence of Recording files ``DIR/PREFIX-YYYYmmddTHHMMSSZ-NNNNNN.rec``.

    ``on_interval(t0, t1, tables, processes)`` is called after each committed interval (the
    metrics, metrics.py); ``on_rotate(path, pids)`` after each file is closed complete, with the
    pids the next file may still refer to; ``on_forget(pids)`` when the recorder will not refer to
    these pids again (``forget``). ``now`` is the clock the file names use (tests pass their own).
    """

    def __init__(self, directory: Path, prefix: str, meta: dict, owner=None, *, rotate_s: float | None = 600.0,
                 rotate_bytes: int | None = None, keep: int = 6,
                 on_interval: Callable | None = None, on_rotate: Callable | None = None,
                 on_forget: Callable | None = None, now: Callable[[], float] = time.time):
        self.directory, self.prefix, self.owner = Path(directory), prefix, owner
        self.meta = dict(meta)
        self.rotate_s, self.rotate_bytes, self.keep = rotate_s, rotate_bytes, max(1, keep)
        self.on_interval, self.on_rotate, self.on_forget, self.now = on_interval, on_rotate, on_forget, now
        self.seq = 0
        self.files: list[Path] = []  # written by this writer, oldest first
        self.stacks: dict[int, tuple] = {}  # stack_id -> stack row, every stack handed so far
        self.processes: dict[int, tuple] = {}  # pid -> latest process row
        self.threads: dict[int, tuple] = {}  # tid -> latest thread row
        self.current: RecordingWriter | None = None
        self._open(self.meta.get("start_time"))

    @property
    def path(self) -> Path:
        """The file being written now."""
        return self.current.path

    def _open(self, start: float | None) -> None:
        self.seq += 1
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start if start is not None else self.now()))
        path = self.directory / NAME.format(prefix=self.prefix, stamp=stamp, seq=self.seq)
        meta = dict(self.meta, rotation={"seq": self.seq, "previous": self.files[-1].name if self.files else None})
        if start is not None:
            meta["start_time"] = start
        self.current = RecordingWriter(path, meta, self.owner)
        self.files.append(path)
        self.base = None  # the recorder's interval number of this file's interval 0
        self.opened_at = start
        self.stacks_here: set[int] = set()
        self.pids_here: set[int] = set()
        self.tids_here: set[int] = set()
        self._prune()

    def _prune(self) -> None:
        """Delete the oldest files of this prefix's name pattern beyond ``keep``, a previous
        agent's included (never another program's files: only PREFIX-STAMP-SEQ.rec)."""
        ours = sorted(p for p in self.directory.glob(f"{glob.escape(self.prefix)}-*.rec") if _PATTERN.fullmatch(
            p.name[len(self.prefix) + 1:]))
        for old in ours[:-self.keep]:
            old.unlink(missing_ok=True)
        self.files = [p for p in self.files if p.exists()]

    def set_meta(self, **items) -> None:
        """Store metadata in the current file, and in every later one."""
        self.meta.update(items)
        self.current.set_meta(**items)

    def _due(self, t0: float) -> bool:
        if self.base is None:
            return False  # a file holds at least one interval
        if self.rotate_s is not None and t0 - self.opened_at >= self.rotate_s - 1e-6:
            return True
        return self.rotate_bytes is not None and os.path.getsize(self.current.path) >= self.rotate_bytes

    def rotate(self, at: float) -> None:
        """Close the current file complete at ``at`` and open the next one starting there."""
        old = self.current
        old.close(end_time=at, exit_code=None, stop_reason="rotated")
        self._forget_gone(at)
        if self.on_rotate is not None:
            self.on_rotate(old.path, set(self.processes))
        self._open(at)

    def _forget_gone(self, at: float) -> None:
        """Processes and threads not seen in the file just closed will not be referred to again
        (a live thread's row has last_seen None: threads.py ``_thread_rows``)."""
        start = self.opened_at if self.opened_at is not None else at
        for rows, last_seen in ((self.processes, 6), (self.threads, 4)):  # the rows' last_seen column
            for key in [k for k, row in rows.items() if row[last_seen] is not None and row[last_seen] < start]:
                del rows[key]

    def write_interval(self, interval: int, t_start: float, t_end: float, tables: dict, processes=(),
                       stacks=(), threads=(), markers=(), waits_s=None) -> None:
        """Write one interval (RecordingWriter.write_interval's contract) into the current file,
        rotating first when it is due; then ``on_interval``."""
        for row in stacks:
            self.stacks[row[0]] = tuple(row)
        for row in processes:
            self.processes[row[0]] = tuple(row)
        for row in threads:
            self.threads[row[0]] = tuple(row)
        if self._due(t_start):
            self.rotate(t_start)
        if self.base is None:
            self.base = interval
            if self.opened_at is None:
                self.opened_at = t_start
        self.current.write_interval(interval - self.base, t_start, t_end, tables,
                                    processes=self._needed(self.processes, self.pids_here, processes),
                                    stacks=self._needed_stacks(tables.get("stack_samples") or ()),
                                    threads=self._needed(self.threads, self.tids_here, threads),
                                    markers=markers, waits_s=waits_s)
        if self.on_interval is not None:
            self.on_interval(t_start, t_end, tables, processes)

    @staticmethod
    def _needed(known: dict, here: set, given) -> list:
        """Rows for this file: the ones given now, and on a file's first interval every one still
        known (they may be referred to again)."""
        if not here:
            rows = list(known.values())
        else:
            rows = [tuple(r) for r in given]
        here.update(r[0] for r in rows)
        return rows

    def _needed_stacks(self, samples) -> list:
        """The stack rows this interval's samples refer to that the file does not hold yet."""
        want = sorted({sid for _pid, sid, _n in samples} - self.stacks_here)
        self.stacks_here.update(want)
        return [self.stacks[s] for s in want if s in self.stacks]

    def forget(self, processes=(), stacks=()) -> None:
        """Drop the rows kept of these pids and stack ids: the recorder will not refer to them
        again (one it meets again is handed anew), so no later file needs them."""
        for pid in processes:
            self.processes.pop(pid, None)
        for sid in stacks:
            self.stacks.pop(sid, None)
        if processes and self.on_forget is not None:
            self.on_forget(processes)

    def close(self, **final_meta) -> None:
        """Close the current file (RecordingWriter.close)."""
        self.current.close(**final_meta)

    def publish(self, **meta) -> None:
        """The recording has started: store ``meta`` (its files are at their names from the start)."""
        self.set_meta(**meta)

    def discard(self, **final_meta) -> bool:
        """The recording never started: close the current file as ``close`` does; True (it is left)."""
        self.close(**final_meta)
        return True


def directory_writer_factory(directory: Path, prefix: str, **kw):
    """A ``writer_factory`` for Recorder: ignores the recorder's output path, writes rotating files
    into ``directory`` (created if missing) with RotatingWriter's keywords ``kw``."""
    def factory(_path, meta, owner):
        Path(directory).mkdir(parents=True, exist_ok=True)
        return RotatingWriter(Path(directory), prefix, meta, owner, **kw)
    return factory
