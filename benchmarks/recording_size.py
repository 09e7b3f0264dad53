"""Recording size: re-write a recording through the current writer (schema.SCHEMA_VERSION) and
compare the bytes.

    python3 benchmarks/recording_size.py fixtures/long/recording.rec fixtures/ddp-plain/recording.rec \\
        [--out-dir DIR] [--no-buckets] [--json FILE]

Each input is loaded with ``dpuprof.recording.load`` and written again, interval by interval, with
``RecordingWriter`` (the recorder's own row shapes), into DIR (a temporary directory by default;
the inputs are never modified). The copy is then loaded and checked against the original: every
table equal, except ``cpu_s`` (stored as integer ns in v3: equal to 1e-9 s) and, where old stack
samples were merged into buckets, ``stack_samples`` (equal totals per process and stack, and per
bucket). Printed: bytes before and after, MB per minute of recording, and the bytes by table
(SQLite dbstat) of both files.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import tempfile
from pathlib import Path

import pandas as pd

from dpuprof.recording import load
from dpuprof.recording.schema import LATE_COLUMNS, SCHEMA_VERSION, TABLES
from dpuprof.recording.writer import RecordingWriter

# Tables the writer takes as keyword arguments, not per-interval rows.
_SIDE = ("intervals", "processes", "stacks", "threads", "markers")


def _py(value):
    """A DataFrame value as the recorder would pass it (NaN is a missing value)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _rows(df, cols) -> list[tuple]:
    return [tuple(_py(v) for v in row) for row in df[list(cols)].itertuples(index=False, name=None)]


def rewrite(rec, out: Path, buckets: bool = True) -> None:
    """Write the loaded recording ``rec`` to ``out`` through ``RecordingWriter``."""
    meta = {k: v for k, v in rec.meta.items() if k not in ("schema_version", "complete")}
    kwargs = {} if buckets else {"bucket_after_s": None}
    w = RecordingWriter(out, meta, **kwargs)
    procs = rec.table("processes")
    proc_cols = TABLES["processes"] + tuple(c for c in LATE_COLUMNS["processes"] if c in procs.columns)
    per_interval = {}
    for table, cols in TABLES.items():
        if table in _SIDE:
            continue
        df = rec.table(table)
        cols = cols[1:] + tuple(c for c in LATE_COLUMNS.get(table, ()) if c in df.columns)
        per_interval[table] = {int(i): _rows(g, cols) for i, g in df.groupby("interval")}
    first = True
    for iv in rec.table("intervals").sort_values("interval").itertuples(index=False):
        i = int(iv.interval)
        side = {}
        if first:  # what the recorder upserts as it goes: here all at once, final values
            side = {"processes": _rows(procs, proc_cols), "stacks": _rows(rec.table("stacks"), TABLES["stacks"]),
                    "threads": _rows(rec.table("threads"), TABLES["threads"]),
                    "markers": _rows(rec.table("markers"), TABLES["markers"])}
            first = False
        w.write_interval(i, float(iv.t_start), float(iv.t_end),
                         {t: rows.get(i, []) for t, rows in per_interval.items()}, **side)
    w.close(**{k: rec.meta[k] for k in ("complete", "end_time") if k in rec.meta})


def compare(a, b) -> list[str]:
    """Differences between the DataFrames of recordings ``a`` and ``b`` (empty: the same)."""
    diffs = []
    for table, cols in TABLES.items():
        x, y = a.table(table), b.table(table)
        keys = [c for c in cols if c not in ("cpu_s", "samples")] if table in ("cpu_category", "stack_samples") \
            else list(cols)
        if table == "stack_samples" and "stack_buckets" in b.meta:
            k, width = b.meta["stack_buckets"]["before"], b.meta["stack_buckets"]["intervals"]
            x = x.assign(interval=x["interval"].where(x["interval"] >= k, x["interval"] - x["interval"] % width))
            x = x.groupby(["interval", "pid", "stack_id"], as_index=False)["samples"].sum()
        x = x[list(cols)].sort_values(keys).reset_index(drop=True)
        y = y[list(cols)].sort_values(keys).reset_index(drop=True)
        try:
            pd.testing.assert_frame_equal(x, y, check_dtype=False, atol=1e-9, rtol=0)
        except AssertionError as err:
            diffs.append(f"{table}: {str(err).splitlines()[0]}")
    return diffs


def by_table(path: Path) -> list[tuple[str, int]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        db.close()


def measure(src: Path, out_dir: Path, buckets: bool) -> dict:
    rec = load(src)
    out = out_dir / f"{src.parent.name}-v{SCHEMA_VERSION}.rec"
    rewrite(rec, out, buckets)
    new = load(out)
    minutes = rec.duration_s / 60
    before, after = src.stat().st_size, out.stat().st_size
    return {"recording": str(src), "schema_before": rec.schema_version, "duration_min": round(minutes, 2),
            "bytes_before": before, "bytes_after": after, "ratio": round(before / after, 2),
            "mb_per_min_before": round(before / 1e6 / minutes, 4), "mb_per_min_after": round(after / 1e6 / minutes, 4),
            "differences": compare(rec, new), "stack_buckets": new.meta.get("stack_buckets"),
            "tables_before": by_table(src), "tables_after": by_table(out), "copy": str(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--out-dir", type=Path)
    ap.add_argument("--no-buckets", action="store_true", help="keep every stack sample per interval")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="recsize-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for src in args.recordings:
        r = measure(src, out_dir, not args.no_buckets)
        results.append(r)
        print(f"{src}: v{r['schema_before']} {r['bytes_before']:,} B ({r['mb_per_min_before']} MB/min) -> "
              f"v{SCHEMA_VERSION} {r['bytes_after']:,} B ({r['mb_per_min_after']} MB/min), {r['ratio']}x smaller over "
              f"{r['duration_min']} min; stack buckets {r['stack_buckets']}; "
              f"differences: {r['differences'] or 'none'}")
        after = dict(r["tables_after"])
        print("  bytes by table, before -> after:",
              ", ".join(f"{n} {b:,}->{after.get(n, 0):,}" for n, b in r["tables_before"][:8]))
        print(f"  v{SCHEMA_VERSION} tables:", ", ".join(f"{n} {b:,}" for n, b in r["tables_after"][:10]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["differences"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
