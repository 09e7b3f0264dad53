"""Load a Recording file into DataFrames, validating it on the way in.

Anything wrong with the file -- not SQLite, truncated, a future schema, missing tables, values of the
wrong type or out of range, NaN or infinite numbers -- becomes a :class:`dpuprof.errors.UserError`
with one line that names the problem. Nothing in a recording is evaluated or unpickled: values are
JSON and SQL scalars only.

A recorder killed in the middle of a commit leaves a hot rollback journal (``FILE.rec-journal``)
beside the file. The file is never modified on load: it and its journal are copied to a private
temporary directory, where SQLite rolls the unfinished interval back, and the copy is read.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import tempfile
import urllib.parse
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dpuprof.errors import UserError
from dpuprof.recording.checks import MAX_ABS, check_types as _check_types, fail as _fail
from dpuprof.recording.packing import unpack_counts, unpack_ids, unpack_many
from dpuprof.recording import threadpack
from dpuprof.recording.folded import join as join_frames
from dpuprof.recording.meta import RecordingMeta
from dpuprof.recording.schema import LATE_COLUMNS, READABLE_VERSIONS, SCHEMA_VERSION, SINCE, TABLES

if TYPE_CHECKING:  # tables import pandas where they are read
    import pandas as pd

DEFAULT_NAME = "dpuprof.rec"
SUFFIX = ".rec"

class Recording:
    """A loaded recording.

    ``meta`` is a dict of the metadata (see ``schema``), every key as stored; ``info`` the typed
    :class:`~dpuprof.recording.meta.RecordingMeta` built from it once, with explicit defaults for
    missing keys (what the summary and the report read); ``table(name)`` returns the named table
    of ``schema.TABLES`` as a DataFrame with exactly those columns (units in the column names).
    """

    def __init__(self, path: Path, meta: dict, frames: dict):
        self.path = path
        self.meta = meta
        self.info = RecordingMeta.from_dict(meta)
        self._frames = frames

    @property
    def schema_version(self) -> int:
        return self.info.schema_version

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def complete(self) -> bool:
        return self.info.complete

    @property
    def category_split(self) -> bool:
        """True when CPU samples were classified (bpf mode); False for ``--probes psutil``."""
        return self.info.category_split and not self.table("cpu_category").empty

    @property
    def sample_freq_hz(self) -> float:
        """Stack samples per second per CPU; 0 when unknown."""
        return self.info.sample_freq_hz

    def table(self, name: str):
        return self._frames[name]

    @cached_property
    def workload_pids(self) -> set[int]:
        procs = self.table("processes")
        return set(procs.loc[procs["in_workload"] != 0, "pid"].astype(int))

    @cached_property
    def duration_s(self) -> float:
        """Seconds recorded: the intervals' span less its gaps (``recorded_s``)."""
        return recorded_s(self.table("intervals"))


def recorded_s(intervals: pd.DataFrame) -> float:
    """Seconds of ``intervals`` ([t_start, t_end] rows, unix s): from the first start to the last
    end, less the gaps that no interval covers (a duty cycle's off parts, ``agent --duty``:
    nothing was recorded then); the intervals of several nodes (a combined job) may overlap.
    Rates and shares over it describe the time recorded; a recording without gaps gives its
    span, to the bit."""
    if intervals.empty:
        return 0.0
    iv = intervals.sort_values("t_start")
    covered_to = iv["t_end"].cummax().to_numpy()[:-1]  # the latest end so far, before each next start
    gaps = (iv["t_start"].to_numpy()[1:] - covered_to).clip(min=0.0)
    return float(iv["t_end"].max() - iv["t_start"].iloc[0]) - float(gaps.sum())


def load(path: str | os.PathLike) -> Recording:
    """Read and validate the recording at ``path``."""
    path = Path(path)
    if not path.exists():
        _fail(path, "no such recording (record one with: sudo dpuprof record -- COMMAND)")
    if path.is_dir():
        _fail(path, "is a directory, not a recording")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        _fail(path, "not a dpuprof recording (not an SQLite file)")
    journal = path.with_name(path.name + "-journal")
    try:
        _read_meta(path, path)
    except (sqlite3.Error, UnicodeDecodeError) as err:  # SQLite's message about a damaged file may not be UTF-8
        if not (_is_hot_journal_error(err) and journal.is_file()):
            _fail(path, f"damaged or not a dpuprof recording ({_first_line(err)})")
        with tempfile.TemporaryDirectory(prefix="dpuprof-") as tmp:
            copy = Path(tmp) / "recording.rec"
            try:
                shutil.copyfile(path, copy)
                shutil.copyfile(journal, copy.with_name(copy.name + "-journal"))
            except OSError as oerr:
                _fail(path, f"cannot recover the unfinished last interval ({oerr.strerror or oerr})")
            return _load(path, copy, writable=True)
    return _load(path, path)


def _is_hot_journal_error(err) -> bool:
    """SQLite cannot roll a hot journal back through a read-only connection."""
    return getattr(err, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK" or "readonly" in str(err)


def _connect(path: Path, source: Path, writable: bool = False):
    uri = "file:" + urllib.parse.quote(str(source.resolve())) + ("" if writable else "?mode=ro")
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as err:
        _fail(path, f"cannot open recording: {_first_line(err)}")
    db.text_factory = _text  # damaged text is shown with U+FFFD, never a UnicodeDecodeError
    return db


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _read_meta(path: Path, source: Path, writable: bool = False):
    db = _connect(path, source, writable)
    try:
        return db.execute("SELECT key, value FROM meta").fetchall()
    finally:
        db.close()


def _load(path: Path, source: Path, writable: bool = False) -> Recording:
    """Read ``source`` (``path`` itself, or a private copy of it) and name ``path`` in errors."""
    import pandas as pd

    db = _connect(path, source, writable)
    try:
        try:
            rows = db.execute("SELECT key, value FROM meta").fetchall()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
            _fail(path, f"damaged or not a dpuprof recording ({_first_line(err)})")
        meta = {}
        for key, value in rows:
            if not isinstance(key, str) or not isinstance(value, str):
                _fail(path, "damaged metadata (non-text key or value)")
            try:
                meta[key] = json.loads(value, parse_constant=_reject_constant, parse_float=_finite_float)
                # a JSON escape can smuggle in a lone surrogate, which no output format can encode
                json.dumps(meta[key], ensure_ascii=False).encode("utf-8")
            except (ValueError, RecursionError) as err:
                _fail(path, f"damaged metadata value for {key!r} ({_first_line(err)})")
        version = meta.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            _fail(path, "no schema_version in metadata: not a dpuprof recording")
        if version > SCHEMA_VERSION:
            _fail(path, f"schema version {version} is newer than this dpuprof reads "
                        f"(up to {SCHEMA_VERSION}); upgrade dpuprof")
        if version not in READABLE_VERSIONS:
            _fail(path, f"unsupported schema version {version} (readable: {READABLE_VERSIONS})")
        _check_meta(path, meta)
        frames = {}
        subs = _read_subcategories(path, db) if version >= 3 else None
        for table, cols in TABLES.items():
            if table == "stacks":
                frames[table] = _read_stacks_v3(path, db, subs) if subs is not None else _read_stacks(path, db)
                continue
            if table == "cpu_category" and subs is not None:
                frames[table] = _read_cpu_v3(path, db, subs)
                continue
            if table == "stack_samples" and subs is not None:
                frames[table] = _check_types(path, table, _read_stack_counts(path, db))
                continue
            if table in threadpack.PACKED and version >= 4:
                frames[table] = _check_types(path, table, _read_thread_packed(path, db, table, subs))
                continue
            if version < SINCE.get(table, 1):
                frames[table] = _check_types(path, table, pd.DataFrame({c: [] for c in cols}))
                continue
            try:
                df = pd.read_sql_query(f"SELECT {', '.join(cols + _late_columns(db, table))} FROM {table}", db)
            except (sqlite3.DatabaseError, pd.errors.DatabaseError, UnicodeDecodeError) as err:
                _fail(path, f"damaged table {table} ({_first_line(err)})")
            frames[table] = _check_types(path, table, df)
    finally:
        db.close()
    frames["threads"] = _alive_at_end(frames["threads"], frames["intervals"])
    return Recording(path, meta, frames)


def _alive_at_end(threads, intervals):
    """``threads`` with the end of the last interval as last_seen where it is NULL: a thread
    still alive when a killed recorder wrote its last interval (RecordingWriter.close writes that
    end itself)."""
    missing = threads["last_seen"].isna()
    if not missing.any() or intervals.empty:
        return threads
    return threads.assign(last_seen=threads["last_seen"].where(~missing, float(intervals["t_end"].max())))


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= MAX_ABS


def _is_text_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_text_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


#: The metadata keys the readers use, with the check their value must pass (None is always
#: allowed: an absent value). Unknown keys are kept as they are.
_META_CHECKS = {
    "complete": (lambda v: isinstance(v, bool), "true or false"),
    "category_split": (lambda v: isinstance(v, bool), "true or false"),
    "sample_freq_hz": (lambda v: _is_number(v) and (v == 0 or 1 <= v <= 1e6), "0 or a frequency of 1 to 1e6 Hz"),
    "interval_s": (lambda v: _is_number(v) and 0 <= v <= 86400, "a number of seconds from 0 to 86400"),
    "start_time": (_is_number, "a number"),
    "end_time": (_is_number, "a number"),
    "command_cpu_s": (lambda v: _is_number(v) and v >= 0, "a number of seconds"),
    "cpu_count": (lambda v: _is_number(v) and v == int(v) and 0 <= v <= 1 << 20, "a whole number of CPUs"),
    "exit_code": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 1 << 31, "a whole number"),
    "root_pid": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 1 << 31, "a whole number"),
    "recorder_pid": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 1 << 31, "a whole number"),
    "command": (_is_text_list, "a list of strings"),
    "probes_used": (_is_text_list, "a list of strings"),
    "probes_unavailable": (_is_text_map, "a map of probe names to reasons"),
    "system_wide": (lambda v: isinstance(v, bool), "true or false"),
    "duty": (lambda v: isinstance(v, dict) and _is_number(v.get("on_s")) and _is_number(v.get("period_s"))
             and 0 < v["on_s"] < v["period_s"], "{on_s, period_s} in seconds, 0 < on_s < period_s"),
    **{key: (lambda v: isinstance(v, str), "text")
       for key in ("mode", "host", "kernel", "cpu_model", "dpuprof_version", "cwd", "user", "error", "arch",
                   "kernel_version", "python", "workload", "cgroup", "stop_reason", "probe_cost")},
}


def _read_stacks(path, db):
    """The stacks table with ``folded`` text rebuilt from ``frames`` (see schema). A file written
    before the ``cause`` column (schema v1, early v2) reads cause "" for every stack."""
    import pandas as pd

    try:
        names = dict(db.execute("SELECT frame_id, name FROM frames").fetchall())
        has_cause = "cause" in {r[1] for r in db.execute("PRAGMA table_info(stacks)").fetchall()}
        rows = db.execute("SELECT stack_id, frame_ids, category, subcategory, "
                          + ("cause" if has_cause else "''") + " FROM stacks").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table stacks ({_first_line(err)})")
    out = []
    for stack_id, frame_ids, category, subcategory, cause in rows:
        if not isinstance(stack_id, int) or not isinstance(frame_ids, str) \
                or not isinstance(category, str) or not isinstance(subcategory, str) \
                or not isinstance(cause, str):
            _fail(path, "damaged table stacks: wrong value types")
        try:
            folded = join_frames(names[int(i)] for i in frame_ids.split())
        except (KeyError, ValueError, TypeError):
            _fail(path, f"damaged table stacks: stack {stack_id} names a missing frame")
        if not isinstance(folded, str):
            _fail(path, "damaged table frames: non-text frame")
        out.append((stack_id, folded, category, subcategory, cause))
    return pd.DataFrame(out, columns=list(TABLES["stacks"]))


def _read_subcategories(path, db) -> dict[int, tuple[str, str]]:
    """v3: {subcategory_id: (category, subcategory)}."""
    try:
        rows = db.execute("SELECT subcategory_id, category, subcategory FROM subcategories").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table subcategories ({_first_line(err)})")
    if not all(isinstance(i, int) and isinstance(c, str) and isinstance(s, str) for i, c, s in rows):
        _fail(path, "damaged table subcategories: wrong value types")
    return {i: (c, s) for i, c, s in rows}


def _read_cpu_v3(path, db, subs):
    """v3: cpu_category from cpu_counts (one packed row per interval: ids and integer ns) with the
    v1/v2 columns and units."""
    import pandas as pd

    try:
        rows = db.execute("SELECT interval, counts FROM cpu_counts").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table cpu_counts ({_first_line(err)})")
    fast = _cpu_v3_arrays(rows, subs)
    if fast is not None:
        return _check_types(path, "cpu_category", pd.DataFrame(fast))
    out = []  # damage (or no rows): row by row, to name the first problem
    for interval, blob in rows:
        if not isinstance(interval, int) or not isinstance(blob, bytes):
            _fail(path, "damaged table cpu_counts: wrong value types")
        try:
            values = unpack_ids(blob)
        except ValueError as err:
            _fail(path, f"damaged table cpu_counts: {err}")
        if len(values) % 4:
            _fail(path, "damaged table cpu_counts: not whole (pid, subcategory, samples, cpu_ns) tuples")
        for i in range(0, len(values), 4):
            pair = subs.get(values[i + 1])
            if pair is None:
                _fail(path, "damaged table cpu_counts: a subcategory_id not in subcategories")
            out.append((interval, values[i], *pair, values[i + 2], values[i + 3] / 1e9))
    return _check_types(path, "cpu_category", pd.DataFrame(out, columns=list(TABLES["cpu_category"])))


def _intervals_and_ids(rows, width: int):
    """(first column repeated per tuple, ids as an (n, width) array) of rows ``(key..., blob)`` whose
    blobs hold whole ``width``-tuples; None for none, wrong types or damage (read row by row)."""
    import numpy as np

    if not rows or not all(isinstance(r[-1], bytes) and all(type(k) is int for k in r[:-1]) for r in rows):
        return None
    got = unpack_many([r[-1] for r in rows])
    if got is None or (got[1] % width).any():
        return None
    ids, counts = got
    return counts // width, ids.reshape(-1, width), np


def _cpu_v3_arrays(rows, subs):
    """cpu_category's columns from cpu_counts rows in a few array passes; None for no rows or any
    damage (the row-by-row reader then names it)."""
    got = _intervals_and_ids(rows, 4)
    if got is None:
        return None
    per, t, np = got
    keys = np.array(sorted(subs), dtype=np.int64)
    at = np.searchsorted(keys, t[:, 1]).clip(0, max(len(keys) - 1, 0))
    if not len(keys) or (keys[at] != t[:, 1]).any():
        return None
    cats = np.array([subs[int(k)][0] for k in keys], dtype=object)
    names = np.array([subs[int(k)][1] for k in keys], dtype=object)
    interval = np.repeat(np.array([r[0] for r in rows], dtype=np.int64), per)
    return dict(zip(TABLES["cpu_category"], (interval, t[:, 0], cats[at], names[at], t[:, 2], t[:, 3] / 1e9)))


def _read_stack_counts(path, db):
    """v3: stack_samples from stack_counts (one packed row per interval and process)."""
    import pandas as pd

    try:
        rows = db.execute("SELECT interval, pid, counts FROM stack_counts").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table stack_counts ({_first_line(err)})")
    fast = _intervals_and_ids(rows, 2)
    if fast is not None:
        per, pairs, np = fast
        keys = [np.repeat(np.array([r[k] for r in rows], dtype=np.int64), per) for k in (0, 1)]
        return pd.DataFrame(dict(zip(TABLES["stack_samples"], (*keys, pairs[:, 0], pairs[:, 1]))))
    out = []  # damage (or no rows): row by row, to name the first problem
    for interval, pid, blob in rows:
        if not isinstance(interval, int) or not isinstance(pid, int) or not isinstance(blob, bytes):
            _fail(path, "damaged table stack_counts: wrong value types")
        try:
            out.extend((interval, pid, stack_id, n) for stack_id, n in unpack_counts(blob))
        except ValueError as err:
            _fail(path, f"damaged table stack_counts: {err}")
    return pd.DataFrame(out, columns=list(TABLES["stack_samples"]))


def _read_thread_packed(path, db, table: str, subs):
    """v4: thread_time, thread_wait or thread_category from ``<table>_packed`` (one blob per
    interval, threadpack.py) with the v2/v3 columns and units."""
    import pandas as pd

    packed = threadpack.PACKED[table]
    names = {i: sub for i, (_, sub) in subs.items()}
    try:
        rows = db.execute(f"SELECT interval, rows FROM {packed} ORDER BY interval").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table {packed} ({_first_line(err)})")
    out = []
    for interval, blob in rows:
        if not isinstance(interval, int) or not isinstance(blob, bytes):
            _fail(path, f"damaged table {packed}: wrong value types")
        try:
            out.extend((interval, *row) for row in threadpack.unpack(table, blob, names))
        except ValueError as err:
            _fail(path, f"damaged table {packed}: {err}")
    return pd.DataFrame(out, columns=list(TABLES[table]))


def _read_stacks_v3(path, db, subs):
    """v3: the stacks table from stack_list (packed frame ids) and frames."""
    import pandas as pd

    try:
        names = dict(db.execute("SELECT frame_id, name FROM frames").fetchall())
        rows = db.execute("SELECT stack_id, frames, subcategory_id, cause FROM stack_list").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        _fail(path, f"damaged table stack_list ({_first_line(err)})")
    if not all(isinstance(n, str) for n in names.values()):
        _fail(path, "damaged table frames: non-text frame")
    # every stack's ids decoded at once; where some blob is damaged, each is decoded on its own below
    got = unpack_many([r[1] for r in rows]) if all(isinstance(r[1], bytes) for r in rows) else None
    flat, ends = (got[0].tolist(), got[1].cumsum().tolist()) if got is not None else (None, None)
    out = []
    for k, (stack_id, packed, sub_id, cause) in enumerate(rows):
        if not isinstance(stack_id, int) or not isinstance(packed, bytes) or not isinstance(cause, str) \
                or sub_id not in subs:
            _fail(path, "damaged table stack_list: wrong value types or an unknown subcategory_id")
        try:
            ids = unpack_ids(packed) if flat is None else flat[ends[k] - int(got[1][k]):ends[k]]
            folded = join_frames(map(names.__getitem__, ids))
        except (KeyError, ValueError):
            _fail(path, f"damaged table stack_list: stack {stack_id} names a missing frame")
        out.append((stack_id, folded, *subs[sub_id], cause))
    return pd.DataFrame(out, columns=list(TABLES["stacks"]))


def _check_meta(path, meta: dict) -> None:
    for key, (ok, what) in _META_CHECKS.items():
        value = meta.get(key)
        if value is not None and not ok(value):
            _fail(path, f"damaged metadata: {key} must be {what}, got {_short(value)}")


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_line(err) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _late_columns(db, table: str) -> tuple:
    """``LATE_COLUMNS`` of ``table`` as select terms: the column where the file has it, else NULL."""
    late = LATE_COLUMNS.get(table, ())
    if not late:
        return ()
    have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    return tuple(c if c in have else f"NULL AS {c}" for c in late)


def find_default(directory: str | os.PathLike = ".") -> Path:
    """The newest ``*.rec`` in ``directory`` (``dpuprof.rec`` by default), like perf's perf.data."""
    directory = Path(directory)
    candidates = [p for p in directory.glob(f"*{SUFFIX}") if p.is_file()]
    if not candidates:
        raise UserError(f"no recording (*{SUFFIX}) in {directory.resolve()}; "
                        "record one with: sudo dpuprof record -- COMMAND")
    return max(candidates, key=lambda p: p.stat().st_mtime)
