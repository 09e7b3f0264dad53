"""Schema v4: the per-thread tables packed one row per interval, the views and the reader giving the
v2/v3 columns and units."""

from __future__ import annotations

import importlib.util
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from conftest import REPO, assert_load_fails_in_one_line
from dpuprof.recording import SCHEMA_VERSION, load
from dpuprof.recording import threadpack
from dpuprof.recording.packing import MAX_ID, pack_tuples, unpack_tuples, unzigzag, zigzag
from dpuprof.recording.schema import TABLES
from dpuprof.recording.writer import RecordingWriter

THREAD_TABLES = ("thread_time", "thread_wait", "thread_category")
NS = hs.integers(0, 10 ** 13)
PID = hs.integers(-1, 1 << 22)


def test_zigzag_round_trip_and_small_values_stay_small():
    assert [zigzag(v) for v in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    for v in list(range(-300, 300)) + [-(1 << 61), (1 << 61) - 1]:
        assert unzigzag(zigzag(v)) == v


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(hs.lists(hs.tuples(hs.integers(0, 1 << 40), hs.integers(-(1 << 40), 1 << 40), hs.integers(0, MAX_ID >> 2)),
                max_size=30))
def test_pack_tuples_round_trip(rows):
    assert unpack_tuples(pack_tuples(rows, "dzu"), "dzu") == rows


def test_pack_tuples_refuses_what_it_cannot_code():
    with pytest.raises(ValueError):
        pack_tuples([(1, -1)], "du")  # a "u" field is non-negative
    with pytest.raises(ValueError):
        pack_tuples([(1, 2, 3)], "du")
    with pytest.raises(ValueError, match="whole tuples"):
        unpack_tuples(pack_tuples([(1, 2)], "du") + b"\x01", "du")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(hs.lists(hs.tuples(hs.integers(1, 1 << 22), NS, NS, NS), max_size=30),
       hs.lists(hs.tuples(hs.integers(1, 1 << 22), hs.sampled_from(sorted(threadpack.STATE_CODES)), PID, PID,
                          NS, hs.integers(0, 10 ** 6)), max_size=30),
       hs.lists(hs.tuples(hs.integers(1, 1 << 22), hs.sampled_from(["network.tcpip", "idle", "compute.python"]),
                          hs.integers(0, 10 ** 5)), max_size=30))
def test_thread_rows_round_trip_in_the_order_given(time_rows, wait_rows, cat_rows):
    assert threadpack.unpack_time(threadpack.pack_time(time_rows)) == time_rows
    assert threadpack.unpack_wait(threadpack.pack_wait(wait_rows)) == wait_rows
    ids = {"network.tcpip": 1, "idle": 2, "compute.python": 7}
    names = {v: k for k, v in ids.items()}
    assert threadpack.unpack_category(threadpack.pack_category(cat_rows, ids.__getitem__), names) == cat_rows


def test_a_thread_that_lived_through_the_interval_costs_a_few_bytes():
    # 20 idle threads with consecutive tids, alive the whole 1-s interval: tid, 0, 0, lived each
    # one byte (v3 stored ~25 bytes a row).
    rows = [(5000 + i, 0, 0, 1_000_000_000) for i in range(20)]
    assert len(threadpack.pack_time(rows)) <= 4 * 20 + 8


def test_an_unknown_wait_state_is_refused():
    with pytest.raises(ValueError, match="state"):
        threadpack.pack_wait([(1, "zombie", 0, 0, 1, 1)])


def _write_v4(path, intervals=3):
    w = RecordingWriter(path, {"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
                               "interval_s": 1.0})
    for i in range(intervals):
        w.write_interval(
            i, 100.0 + i, 101.0 + i,
            {"cpu_category": [(42, "network", "network.tcpip", 10, 0.1)],
             # not sorted by tid, a tid twice: kept as given
             "thread_time": [(4300, 5, 6, 999_999_989), (42, 10 ** 9, 0, 0), (4300, 0, 0, 12_345 + i)],
             "thread_wait": [(42, "sleep", -1, -1, 100, 1), (42, "io", 0, 0, 5, 2),
                             (4300, "other", 4000, 4007, 10 ** 12, 3), (4300, "sleep", 42, 4300, 7 + i, 1)],
             # compute.python never appears in cpu_category: stored as (compute, compute.python)
             "thread_category": [(42, "network.tcpip", 3), (4300, "compute.python", i)]},
            processes=[(42, 1, "worker", "worker", 1, 100.0, 101.0 + i)],
            threads=[(42, 42, "worker", 100.0, 101.0 + i), (4300, 42, "worker", 100.0, 101.0 + i)])
    w.close(end_time=100.0 + intervals, exit_code=0)
    return path


def test_v4_stores_packed_tables_and_reads_the_v3_dataframes(tmp_path):
    path = _write_v4(tmp_path / "r.rec")
    rec = load(path)
    assert rec.schema_version == SCHEMA_VERSION >= 4
    for table in THREAD_TABLES:
        assert tuple(rec.table(table).columns) == TABLES[table]
    tt = rec.table("thread_time")
    assert tt[tt["interval"] == 2].values.tolist() == [[2, 4300, 5, 6, 999_999_989], [2, 42, 10 ** 9, 0, 0],
                                                        [2, 4300, 0, 0, 12_347]]
    tw = rec.table("thread_wait")
    assert tw[tw["interval"] == 1].values.tolist() == [
        [1, 42, "sleep", -1, -1, 100, 1], [1, 42, "io", 0, 0, 5, 2], [1, 4300, "other", 4000, 4007, 10 ** 12, 3],
        [1, 4300, "sleep", 42, 4300, 8, 1]]
    tc = rec.table("thread_category")
    assert tc[tc["interval"] == 2].values.tolist() == [[2, 42, "network.tcpip", 3], [2, 4300, "compute.python", 2]]
    with sqlite3.connect(path) as db:
        kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name LIKE 'thread%'").fetchall())
        assert db.execute("SELECT count(*) FROM thread_time_packed").fetchone()[0] == 3  # one row an interval
        assert ("compute", "compute.python") in db.execute("SELECT category, subcategory FROM subcategories").fetchall()
    assert {t: kinds[t] for t in THREAD_TABLES} == {t: "view" for t in THREAD_TABLES}


def _views_equal_reader(path):
    rec = load(path)
    with sqlite3.connect(path) as db:
        for table in THREAD_TABLES:
            got = db.execute(f"SELECT * FROM {table}").fetchall()
            want = list(rec.table(table).itertuples(index=False, name=None))
            assert sorted(got) == sorted(tuple(v.item() if hasattr(v, "item") else v for v in r) for r in want), table
            assert [d[0] for d in db.execute(f"SELECT * FROM {table} LIMIT 0").description] == list(TABLES[table])
    return rec


def test_v4_views_give_what_the_reader_gives(tmp_path):
    rec = _views_equal_reader(_write_v4(tmp_path / "r.rec"))
    assert len(rec.table("thread_wait")) == 12


def _rewrite():
    spec = importlib.util.spec_from_file_location("recording_size", REPO / "benchmarks" / "recording_size.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_real_recording_rewritten_as_v4_reads_the_same_in_python_and_sql(fixture_copy, tmp_path):
    bench = _rewrite()
    src = fixture_copy("ddp-plain")
    old = load(src)
    assert old.schema_version == 2 and not old.table("thread_wait").empty
    out = tmp_path / "v4.rec"
    bench.rewrite(old, out)
    new = _views_equal_reader(out)
    assert new.schema_version >= 4 and bench.compare(old, new) == []
    for table in THREAD_TABLES:  # same rows, in the same order
        assert old.table(table).values.tolist() == new.table(table).values.tolist(), table
    sizes = dict(bench.by_table(out))
    before = dict(bench.by_table(src))
    assert sum(sizes[f"{t}_packed"] for t in THREAD_TABLES) * 2 < sum(before[t] for t in THREAD_TABLES)


@pytest.mark.parametrize("sql, needle", [
    ("UPDATE thread_time_packed SET rows = x'81' WHERE interval = 0", "thread_time_packed"),
    ("UPDATE thread_time_packed SET rows = x'0102' WHERE interval = 0", "whole tuples"),
    ("UPDATE thread_time_packed SET rows = x'02050601' WHERE interval = 0", "lived less"),
    ("UPDATE thread_wait_packed SET rows = x'0200000104' WHERE interval = 1", "state code"),
    ("UPDATE thread_category_packed SET rows = x'026301' WHERE interval = 1", "subcategory_id"),
    ("UPDATE thread_category_packed SET rows = 'x' WHERE interval = 1", "wrong value types"),
])
def test_v4_damaged_blobs_are_one_line_errors(tmp_path, sql, needle):
    assert_load_fails_in_one_line(_write_v4(tmp_path / "d.rec"), sql, needle)


def test_a_live_threads_last_seen_is_the_last_intervals_end_closed_or_not(tmp_path):
    """A live thread's row is written with last_seen NULL (threads.py _thread_rows): close()
    stores the last interval's end there, and the reader reads it so where the recorder was
    killed before closing."""
    path = tmp_path / "r.rec"
    w = RecordingWriter(path, {"command": ["x"], "interval_s": 1.0})
    w.write_interval(0, 100.0, 101.0, {}, threads=[(42, 42, "main", 100.0, None), (43, 42, "w", 100.2, 100.7)])
    w.write_interval(1, 101.0, 102.0, {})
    killed = tmp_path / "killed.rec"
    killed.write_bytes(path.read_bytes())  # what a SIGKILL leaves: the committed intervals
    assert load(killed).table("threads").set_index("tid")["last_seen"].to_dict() == {42: 102.0, 43: 100.7}
    w.close(end_time=102.5, exit_code=0)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT tid, last_seen FROM threads ORDER BY tid").fetchall() == [(42, 102.0), (43, 100.7)]
