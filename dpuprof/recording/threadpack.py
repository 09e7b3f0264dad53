"""Schema v4's per-thread tables, packed: one row per interval for each of thread_time,
thread_wait and thread_category (docs/recording.md).

Each ``<table>_packed`` row holds the interval's tuples in one blob (``packing.pack_tuples``), in
the order the recorder gave them. Per tuple (``d`` a zigzagged difference from the previous
tuple's field, ``z`` a zigzagged value, ``u`` the value; all integers, ns kept to the ns):

- thread_time: tid d, on_cpu_ns u, runq_ns u, lived_ns d where lived_ns = on_cpu_ns + runq_ns +
  off_cpu_ns (the part of the interval the thread lived: the same for every thread that lived
  through it, so its delta is one byte where off_cpu_ns itself would take five).
- thread_wait: tid d, waker_pid d, waker_tid - waker_pid z, ns u, count * 4 + state code u
  (``STATE_CODES``; a wake-up or up to 31 in one byte).
- thread_category: tid d, subcategory_id u (``subcategories``), samples u.

``VIEWS`` unpacks them in SQL into views with the v2/v3 tables' names, columns and units.
"""

from __future__ import annotations

from dpuprof.recording.packing import pack_tuples, unpack_tuples

#: thread_wait.state as stored: the sched_wait probe's own codes (dpuprof/record/drain/threads.py).
STATE_CODES = {"sleep": 1, "io": 2, "other": 3}
STATES = {code: name for name, code in STATE_CODES.items()}

#: The packed tables and the coding of each tuple's fields.
CODES = {"thread_time": "duud", "thread_wait": "ddzuu", "thread_category": "duu"}
PACKED = {table: f"{table}_packed" for table in CODES}


def pack_time(rows) -> bytes:
    """thread_time rows (tid, on_cpu_ns, runq_ns, off_cpu_ns) of one interval as a blob."""
    return pack_tuples(((tid, on, runq, on + runq + off) for tid, on, runq, off in rows), CODES["thread_time"])


def unpack_time(blob: bytes) -> list[tuple]:
    """The rows of ``pack_time``; ValueError on a damaged blob."""
    out = []
    for tid, on, runq, lived in unpack_tuples(blob, CODES["thread_time"]):
        if lived < on + runq:
            raise ValueError("a thread lived less than it ran")
        out.append((tid, on, runq, lived - on - runq))
    return out


def pack_wait(rows) -> bytes:
    """thread_wait rows (tid, state, waker_pid, waker_tid, ns, count) of one interval as a blob;
    ValueError for a state not in ``STATE_CODES``."""
    def coded():
        for tid, state, waker_pid, waker_tid, ns, count in rows:
            if state not in STATE_CODES:
                raise ValueError(f"thread_wait state {state!r} is not one of {sorted(STATE_CODES)}")
            yield tid, waker_pid, waker_tid - waker_pid, ns, count * 4 + STATE_CODES[state]
    return pack_tuples(coded(), CODES["thread_wait"])


def unpack_wait(blob: bytes) -> list[tuple]:
    """The rows of ``pack_wait``; ValueError on a damaged blob or an unknown state code."""
    out = []
    for tid, waker_pid, waker_rel, ns, coded in unpack_tuples(blob, CODES["thread_wait"]):
        count, code = divmod(coded, 4)
        if code not in STATES:
            raise ValueError(f"unknown thread_wait state code {code}")
        out.append((tid, STATES[code], waker_pid, waker_pid + waker_rel, ns, count))
    return out


def pack_category(rows, sub_id) -> bytes:
    """thread_category rows (tid, subcategory, samples) of one interval as a blob; ``sub_id``
    maps a subcategory name to its ``subcategories`` id."""
    return pack_tuples(((tid, sub_id(sub), n) for tid, sub, n in rows), CODES["thread_category"])


def unpack_category(blob: bytes, names: dict[int, str]) -> list[tuple]:
    """The rows of ``pack_category``, ``names`` {subcategory_id: subcategory}; ValueError on a
    damaged blob or an id not in ``names``."""
    out = []
    for tid, sid, n in unpack_tuples(blob, CODES["thread_category"]):
        if sid not in names:
            raise ValueError("a subcategory_id not in subcategories")
        out.append((tid, names[sid], n))
    return out


def unpack(table: str, blob: bytes, names: dict[int, str]) -> list[tuple]:
    """The rows of ``table``'s packed blob (without interval); ``names`` {subcategory_id:
    subcategory} for thread_category. ValueError on a damaged blob."""
    if table == "thread_time":
        return unpack_time(blob)
    if table == "thread_wait":
        return unpack_wait(blob)
    return unpack_category(blob, names)


DDL = "".join(f"CREATE TABLE IF NOT EXISTS {packed} (interval INTEGER PRIMARY KEY, rows BLOB NOT NULL);\n"
              for packed in PACKED.values())


def _unzig(x: str) -> str:
    return f"(CASE WHEN ({x}) % 2 = 1 THEN -((({x}) + 1) / 2) ELSE ({x}) / 2 END)"


def _run(x: str) -> str:
    """SQL of a ``d`` field: the running sum of its zigzagged deltas over the interval's tuples."""
    return f"sum({_unzig(x)}) OVER (PARTITION BY interval ORDER BY r ROWS UNBOUNDED PRECEDING)"


def view_sql(unpack) -> str:
    """The three views, given ``unpack(name, table, keys, blob)``: the recursive CTE of schema.py
    whose rows ``done AND pos > 0`` are the blob's values ``acc``, ``k`` their index."""
    def fields(table: str) -> str:
        width = len(CODES[table])
        cols = ", ".join(f"max(CASE WHEN k % {width} = {i} THEN acc END) AS f{i}" for i in range(width))
        return (f"WITH RECURSIVE {unpack('u', PACKED[table], 'interval', 'rows')},\n"
                f"t AS (SELECT interval, k / {width} AS r, {cols} FROM u WHERE done AND pos > 0 "
                f"GROUP BY interval, k / {width})\n")
    states = " ".join(f"WHEN {c} THEN '{s}'" for s, c in STATE_CODES.items())
    return (
        "-- v4: thread_time, thread_wait, thread_category as v2/v3 stored them: the packed tables unpacked.\n"
        "CREATE VIEW IF NOT EXISTS thread_time (interval, tid, on_cpu_ns, runq_ns, off_cpu_ns) AS\n"
        + fields("thread_time")
        + f"SELECT interval, {_run('f0')}, f1, f2, {_run('f3')} - f1 - f2 FROM t;\n"
        "CREATE VIEW IF NOT EXISTS thread_wait (interval, tid, state, waker_pid, waker_tid, ns, count) AS\n"
        + fields("thread_wait")
        + f"SELECT interval, {_run('f0')}, CASE f4 % 4 {states} END, {_run('f1')}, "
          f"{_run('f1')} + {_unzig('f2')}, f3, f4 / 4 FROM t;\n"
        "CREATE VIEW IF NOT EXISTS thread_category (interval, tid, subcategory, samples) AS\n"
        + fields("thread_category")
        + f"SELECT x.interval, x.tid, c.subcategory, x.samples FROM (SELECT interval, {_run('f0')} AS tid, f1, "
          "f2 AS samples FROM t) x LEFT JOIN subcategories c ON c.subcategory_id = x.f1;\n")
