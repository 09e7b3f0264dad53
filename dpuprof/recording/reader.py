"""Load a Recording file into DataFrames, validating it on the way in.

Anything wrong with the file -- not SQLite, truncated, a future schema, missing tables, values of the
wrong type -- becomes a :class:`dpuprof.errors.UserError` with one line that names the problem.
Nothing in a recording is evaluated or unpickled: values are JSON and SQL scalars only.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from functools import cached_property
from pathlib import Path

from dpuprof.errors import UserError
from dpuprof.recording.schema import READABLE_VERSIONS, SCHEMA_VERSION, TABLES

DEFAULT_NAME = "dpuprof.rec"
SUFFIX = ".rec"

# Columns whose values must be numbers (everything else is text).
_TEXT_COLUMNS = {"comm", "cmdline", "category", "subcategory", "folded", "vector", "dev", "op",
                 "direction", "protocol", "event", "field", "kind"}


class Recording:
    """A loaded recording.

    ``meta`` is a dict of the metadata (see ``schema``); ``table(name)`` returns the named table of
    ``schema.TABLES`` as a DataFrame with exactly those columns (units in the column names).
    """

    def __init__(self, path: Path, meta: dict, frames: dict):
        self.path = path
        self.meta = meta
        self._frames = frames

    @property
    def schema_version(self) -> int:
        return int(self.meta["schema_version"])

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", False))

    @property
    def category_split(self) -> bool:
        """True when CPU samples were classified (bpf mode); False for ``--probes psutil``."""
        return bool(self.meta.get("category_split", True)) and not self.table("cpu_category").empty

    @property
    def sample_freq_hz(self) -> float:
        return float(self.meta.get("sample_freq_hz") or 0)

    def table(self, name: str):
        return self._frames[name]

    @cached_property
    def workload_pids(self) -> set[int]:
        procs = self.table("processes")
        return set(procs.loc[procs["in_workload"] != 0, "pid"].astype(int))

    @cached_property
    def duration_s(self) -> float:
        iv = self.table("intervals")
        if iv.empty:
            return 0.0
        return float(iv["t_end"].max() - iv["t_start"].min())


def _fail(path, why: str):
    raise UserError(f"{path}: {why}")


def load(path: str | os.PathLike) -> Recording:
    """Read and validate the recording at ``path``."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        _fail(path, "no such recording (record one with: sudo dpuprof record -- COMMAND)")
    if path.is_dir():
        _fail(path, "is a directory, not a recording")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        _fail(path, "not a dpuprof recording (not an SQLite file)")
    try:
        db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        _fail(path, f"cannot open recording: {err}")
    try:
        try:
            rows = db.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.DatabaseError as err:
            _fail(path, f"damaged or not a dpuprof recording ({err})")
        meta = {}
        for key, value in rows:
            if not isinstance(key, str) or not isinstance(value, str):
                _fail(path, "damaged metadata (non-text key or value)")
            try:
                meta[key] = json.loads(value, parse_constant=_reject_constant)
            except ValueError as err:
                _fail(path, f"damaged metadata value for {key!r} ({err})")
        version = meta.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            _fail(path, "no schema_version in metadata: not a dpuprof recording")
        if version > SCHEMA_VERSION:
            _fail(path, f"schema version {version} is newer than this dpuprof reads "
                        f"(up to {SCHEMA_VERSION}); upgrade dpuprof")
        if version not in READABLE_VERSIONS:
            _fail(path, f"unsupported schema version {version} (readable: {READABLE_VERSIONS})")
        frames = {}
        for table, cols in TABLES.items():
            try:
                df = pd.read_sql_query(f"SELECT {', '.join(cols)} FROM {table}", db)
            except (sqlite3.DatabaseError, pd.errors.DatabaseError) as err:
                _fail(path, f"damaged table {table} ({_first_line(err)})")
            frames[table] = _check_types(path, table, df)
    finally:
        db.close()
    return Recording(path, meta, frames)


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed")


def _first_line(err) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _check_types(path, table, df):
    import pandas as pd

    for col in df.columns:
        if col in _TEXT_COLUMNS:
            if not df[col].map(lambda v: v is None or isinstance(v, str)).all():
                _fail(path, f"damaged table {table}: column {col} holds non-text values")
            df[col] = df[col].fillna("")
            continue
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() & df[col].notna()
        if bad.any() or (num.abs() == math.inf).any():
            _fail(path, f"damaged table {table}: column {col} holds non-numeric values")
        if col not in ("ppid", "first_seen", "last_seen", "util_pct", "mem_used_bytes") and num.isna().any():
            _fail(path, f"damaged table {table}: column {col} has missing values")
        if col in ("samples", "cpu_s", "bytes", "ios", "count", "packets", "calls", "time_ns",
                   "seconds", "user_s", "system_s") and (num < 0).any():
            _fail(path, f"damaged table {table}: column {col} has negative values")
        df[col] = num
    return df


def find_default(directory: str | os.PathLike = ".") -> Path:
    """The newest ``*.rec`` in ``directory`` (``dpuprof.rec`` by default), like perf's perf.data."""
    directory = Path(directory)
    candidates = [p for p in directory.glob(f"*{SUFFIX}") if p.is_file()]
    if not candidates:
        raise UserError(f"no recording (*{SUFFIX}) in {directory.resolve()}; "
                        "record one with: sudo dpuprof record -- COMMAND")
    return max(candidates, key=lambda p: p.stat().st_mtime)
