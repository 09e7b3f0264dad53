"""Write a Recording incrementally: one committed transaction per interval.

The file is created with O_EXCL|O_NOFOLLOW, so a symlink planted at the output path is refused
rather than followed, and is handed to ``owner`` (the invoking user under sudo) before any data is
written (output.py). The rollback journal (not WAL) keeps the data in the one file after every
commit, so the file can be copied or read at any moment and survives ``kill -9`` up to the last
interval.

A ``staged`` writer (``dpuprof record``'s) writes under a temporary name beside the path until
``publish``, which renames an existing file to ``.old`` and the new one to the path; ``discard``
before that removes the temporary and leaves the existing file as it was (output.py). SQLite names
its journal after the name a file was opened under, so ``publish`` closes the connection, renames,
and opens the file again under its final name: a recorder killed later leaves its journal where
SQLite will look for it, and the file at the path consistent up to its last commit.

Schema v3 stores less for the same DataFrames (docs/recording.md): category pairs by id, CPU time
in integer ns, stacks as packed frame-id blobs (v4: and the per-thread tables as one packed row per
interval, threadpack.py); at ``close`` the stack samples older than
``bucket_after_s`` are merged into ``bucket_s`` buckets and the file is vacuumed, in transactions
of their own, so a recorder killed at any point leaves a consistent file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from dpuprof.errors import UserError
from dpuprof.recording.output import create_exclusive, create_staged, move_into_place
from dpuprof.recording.packing import pack_counts, pack_ids, unpack_counts
from dpuprof.recording.schema import DDL, LATE_COLUMNS, SCHEMA_VERSION, TABLES, VIEWS
from dpuprof.recording import threadpack
from dpuprof.categories import top_level
from dpuprof.recording.folded import split as split_frames

#: Stack samples older than this (seconds before the last interval) are merged at ``close``...
BUCKET_AFTER_S = 60.0
#: ... into buckets of this many seconds (a whole number of intervals, aligned to interval 0).
BUCKET_S = 10.0


class RecordingWriter:
    """Append-only writer of a Recording file.

    ``write_interval`` takes rows for any of the per-interval tables in ``schema.TABLES`` (tuples
    in the table's column order, without the leading ``interval`` column) and commits them with the
    interval, so every committed interval is complete.
    """

    def __init__(self, path: str | os.PathLike, meta: dict, owner: tuple[int, int] | None = None,
                 bucket_after_s: float | None = BUCKET_AFTER_S, bucket_s: float = BUCKET_S,
                 staged: bool = False):
        """``staged``: write under a temporary name until ``publish`` (module docstring); else
        at ``path`` at once, an existing file renamed to ``.old`` first."""
        self.path = Path(path)  # the recording's name, also while it is staged
        if staged:
            self._staged: Path | None = create_staged(self.path, owner)
        else:
            self._staged = None
            create_exclusive(self.path, owner)
        self._frame_ids: dict[str, int] = {}
        self._sub_ids: dict[tuple[str, str], int] = {}
        self._sub_names: dict[str, int] = {}  # subcategory -> the first id stored with that name
        self._pending: list[tuple[dict, object]] = []  # cache entries of the open transaction
        self._bucket = (bucket_after_s, bucket_s)
        self._interval_s = float(meta.get("interval_s") or 1.0)
        self._last_interval = -1
        self._last_end: float | None = None  # the end of the last interval written (unix s)
        self._db = None
        try:
            self._connect(self._staged or self.path)
            # 1 KiB pages: 11 % smaller files than 4 KiB (benchmarks/recording_size.py), as each
            # table's last page is partly empty.
            self._db.execute("PRAGMA page_size=1024")
            self._db.executescript(DDL + VIEWS)
            self.set_meta(schema_version=SCHEMA_VERSION, complete=False, **meta)
        except sqlite3.Error as err:  # disk full, I/O error: no half-made file is left behind
            if self._db is not None:
                self._db.close()
            (self._staged or self.path).unlink(missing_ok=True)
            raise UserError(f"cannot write {self.path} ({err})") from None

    def _connect(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute("PRAGMA synchronous=NORMAL")

    def publish(self, **meta) -> None:
        """Store ``meta`` (the recording's start) and move a staged recording to its name, an
        existing file to ``.old`` (nothing moves for one not staged). Call it between
        transactions. OSError or sqlite3.Error when it fails: a staged file is then removed and
        the writer closed, and the existing file is still at the name."""
        staged = self._staged
        try:
            self.set_meta(**meta)
            if staged is not None:
                self._db.close()
                move_into_place(staged, self.path)
                self._staged = None
                self._connect(self.path)
        except (OSError, sqlite3.Error):
            if self._staged is not None:
                self.discard()
            raise

    def discard(self, **final_meta) -> bool:
        """End a recording that never started: a staged one is closed and removed (returns False:
        no file left); otherwise ``close(**final_meta)`` (returns True). sqlite3.Error from the
        close."""
        if self._staged is None:
            self.close(**final_meta)
            return True
        self._db.close()
        self._staged.unlink(missing_ok=True)
        Path(f"{self._staged}-journal").unlink(missing_ok=True)
        self._staged = None
        return False

    def _tx(self):
        return _Transaction(self._db)

    def set_meta(self, **items) -> None:
        """Store metadata values (JSON-encoded) and commit."""
        with self._tx():
            self._put_meta(items)

    def _put_meta(self, items: dict) -> None:
        self._db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                             [(k, json.dumps(v)) for k, v in items.items()])

    def write_interval(self, interval: int, t_start: float, t_end: float, tables: dict[str, list],
                       processes: list[tuple] = (), stacks: list[tuple] = (), threads: list[tuple] = (),
                       markers: list[tuple] = (), waits_s: float | None = None) -> None:
        """Commit one interval.

        ``waits_s``: the seconds of it that sched_wait's wake-up program was attached (record
        --wait-duty), None when it was attached throughout or not loaded.

        ``processes``: (pid, ppid, comm, cmdline, in_workload, first_seen, last_seen[, ns_pid,
        cgroup]), upserted.
        ``stacks``: (stack_id, folded, category, subcategory[, cause]), new stacks only.
        ``threads``: (tid, pid, comm, first_seen, last_seen), upserted (first_seen kept); last_seen
        None while the thread lives (``close`` writes the last interval's end into it).
        ``markers``: (pid, tid, kind, t), appended.
        """
        try:
            with self._tx():
                self._write_all(interval, t_start, t_end, tables, processes, stacks, threads, markers, waits_s)
        except BaseException:
            for cache, key in self._pending:  # the file never got them: neither may the caches
                cache.pop(key, None)
            raise
        finally:
            self._pending = []
        self._last_interval = max(self._last_interval, interval)
        self._last_end = t_end if self._last_end is None else max(self._last_end, t_end)

    def forget(self, processes=(), stacks=()) -> None:
        """The recorder will not refer to these pids and stack ids again. One file keeps nothing
        per process or stack in memory (each row went to the file when it was given), so there is
        nothing to drop; a writer that re-writes rows into later files drops its copies
        (dpuprof/agent/rotate.py)."""

    def _write_all(self, interval, t_start, t_end, tables, processes, stacks, threads, markers, waits_s) -> None:
        self._db.execute("INSERT INTO intervals VALUES (?, ?, ?, ?)", (interval, t_start, t_end, waits_s))
        if processes:
            self._db.executemany(
                "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(pid) DO UPDATE SET "
                "ppid=excluded.ppid, comm=excluded.comm, cmdline=excluded.cmdline, "
                "in_workload=max(in_workload, excluded.in_workload), "
                "last_seen=excluded.last_seen, ns_pid=coalesce(excluded.ns_pid, ns_pid), "
                "cgroup=coalesce(excluded.cgroup, cgroup)",
                [(*row, None, None)[:9] for row in processes],
            )
        if stacks:
            self._write_stacks(stacks)
        if threads:
            self._db.executemany(
                "INSERT INTO threads VALUES (?,?,?,?,?) ON CONFLICT(tid) DO UPDATE SET "
                "pid=excluded.pid, comm=excluded.comm, last_seen=excluded.last_seen", threads)
        if markers:
            self._db.executemany("INSERT INTO markers VALUES (?,?,?,?)", markers)
        for table, rows in tables.items():
            if not rows:
                continue
            if table == "cpu_category":
                self._write_cpu(interval, rows)
                continue
            if table == "stack_samples":
                self._write_stack_counts(interval, rows)
                continue
            if table in threadpack.PACKED:
                self._write_thread_table(interval, table, rows)
                continue
            # A row may carry the table's LATE_COLUMNS too (gpu's mem_total_bytes): name the
            # columns, so the older, shorter row shape still inserts.
            cols = TABLES[table]
            full = cols + LATE_COLUMNS.get(table, ())
            if len(rows[0]) + 1 == len(full):
                cols = full
            marks = ",".join("?" * len(cols))
            self._db.executemany(
                f"INSERT INTO {table} ({','.join(cols)}) VALUES ({marks})", [(interval, *row) for row in rows])

    def _sub_id(self, category: str, subcategory: str) -> int:
        key = (category, subcategory)
        sid = self._sub_ids.get(key)
        if sid is None:
            sid = self._sub_ids[key] = len(self._sub_ids) + 1
            self._pending.append((self._sub_ids, key))
            self._db.execute("INSERT INTO subcategories VALUES (?, ?, ?)", (sid, category, subcategory))
            if subcategory not in self._sub_names:
                self._sub_names[subcategory] = sid
                self._pending.append((self._sub_names, subcategory))
        return sid

    def _sub_id_by_name(self, subcategory: str) -> int:
        """The id of a subcategory named without its category (thread_category rows): the pair
        stored with that name, else (its top-level category, it), stored now."""
        sid = self._sub_names.get(subcategory)
        return sid if sid is not None else self._sub_id(top_level(subcategory), subcategory)

    def _write_thread_table(self, interval: int, table: str, rows) -> None:
        """thread_time, thread_wait or thread_category rows as the interval's one packed row of
        ``<table>_packed``, in the order given (threadpack.py)."""
        if table == "thread_time":
            blob = threadpack.pack_time(rows)
        elif table == "thread_wait":
            blob = threadpack.pack_wait(rows)
        else:
            blob = threadpack.pack_category(rows, self._sub_id_by_name)
        self._db.execute(f"INSERT INTO {threadpack.PACKED[table]} VALUES (?, ?)", (interval, blob))

    def _write_cpu(self, interval: int, rows) -> None:
        """cpu_category rows (pid, category, subcategory, samples, cpu_s) as the interval's packed
        cpu_counts row (a (pid, subcategory) given twice adds up)."""
        cells: dict[tuple[int, int], list[int]] = {}
        for pid, cat, sub, samples, cpu_s in rows:
            cell = cells.setdefault((pid, self._sub_id(cat, sub)), [0, 0])
            cell[0] += samples
            cell[1] += round(cpu_s * 1e9)
        self._db.execute("INSERT INTO cpu_counts VALUES (?, ?)",
                         (interval, pack_ids(v for key, cell in sorted(cells.items()) for v in (*key, *cell))))

    def _write_stack_counts(self, interval: int, rows) -> None:
        """stack_samples rows (pid, stack_id, samples) as one packed stack_counts row per pid (a
        (pid, stack) given twice adds up)."""
        by_pid: dict[int, dict[int, int]] = {}
        for pid, stack_id, samples in rows:
            counts = by_pid.setdefault(pid, {})
            counts[stack_id] = counts.get(stack_id, 0) + samples
        self._db.executemany("INSERT INTO stack_counts VALUES (?, ?, ?)",
                             [(interval, pid, pack_counts(counts)) for pid, counts in sorted(by_pid.items())])

    def _write_stacks(self, stacks) -> None:
        """Store each frame's text once and stacks as packed frame ids (packing.py)."""
        new_frames, rows = [], []
        for stack_id, folded, category, subcategory, *cause in stacks:
            ids = []
            for name in split_frames(folded):
                fid = self._frame_ids.get(name)
                if fid is None:
                    fid = self._frame_ids[name] = len(self._frame_ids) + 1
                    self._pending.append((self._frame_ids, name))
                    new_frames.append((fid, name))
                ids.append(fid)
            rows.append((stack_id, pack_ids(ids), self._sub_id(category, subcategory), cause[0] if cause else ""))
        self._db.executemany("INSERT INTO frames VALUES (?, ?)", new_frames)
        self._db.executemany("INSERT OR IGNORE INTO stack_list VALUES (?,?,?,?)", rows)

    def close(self, **final_meta) -> None:
        """Write the final metadata (``complete=True`` unless given), merge old stack samples into
        buckets, vacuum, and close the file."""
        final_meta.setdefault("complete", True)
        with self._tx():
            if self._last_end is not None:  # the threads alive at the end were last seen then
                self._db.execute("UPDATE threads SET last_seen = ? WHERE last_seen IS NULL", (self._last_end,))
            self._put_meta(final_meta)
        try:
            self._merge_old_stack_samples()
            self._db.execute("VACUUM")  # one transaction: packs the pages the run left half full
        except sqlite3.Error:
            pass  # the file is complete and consistent without either; only larger
        self._db.close()

    def _merge_old_stack_samples(self) -> None:
        """Stack samples older than ``bucket_after_s`` before the last interval become one row per
        process and bucket of ``bucket_s``, named by the bucket's first interval, in one transaction
        with the meta key ``stack_buckets`` that says so (schema.py)."""
        after_s, bucket_s = self._bucket
        width = int(round(bucket_s / self._interval_s)) if after_s is not None else 0
        if width < 2:
            return
        cutoff = self._last_interval - int(after_s / self._interval_s)
        cutoff -= cutoff % width
        if cutoff <= 0:
            return
        with self._tx():
            merged: dict[tuple[int, int], dict[int, int]] = {}
            for iv, pid, blob in self._db.execute(
                    "SELECT interval, pid, counts FROM stack_counts WHERE interval < ?", (cutoff,)).fetchall():
                into = merged.setdefault((iv - iv % width, pid), {})
                for stack_id, samples in unpack_counts(blob):
                    into[stack_id] = into.get(stack_id, 0) + samples
            self._db.execute("DELETE FROM stack_counts WHERE interval < ?", (cutoff,))
            self._db.executemany("INSERT INTO stack_counts VALUES (?, ?, ?)",
                                 [(iv, pid, pack_counts(c)) for (iv, pid), c in sorted(merged.items())])
            self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('stack_buckets', ?)",
                             (json.dumps({"before": cutoff, "intervals": width}),))


def staged_writer(path, meta: dict, owner=None) -> RecordingWriter:
    """``dpuprof record``'s writer (recorder.py's default ``writer_factory``): one file at ``path``,
    staged until the recording has started."""
    return RecordingWriter(path, meta, owner, staged=True)


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self):
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._rollback()
                raise
        else:
            self._rollback()
        return False

    def _rollback(self):
        # After SQLITE_FULL or an I/O error SQLite may have rolled back already; a failing
        # ROLLBACK must not hide the error that caused it.
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
