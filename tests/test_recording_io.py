"""The Recording file: incremental writes, validation on load, clear one-line errors."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from dpuprof.errors import UserError
from dpuprof.recording import SCHEMA_VERSION, load
from dpuprof.recording.writer import RecordingWriter
from conftest import assert_load_fails_in_one_line
from factory import make_recording


def _write(path, intervals=3, close=True):
    return make_recording(
        path, intervals=intervals, close=close, final={"end_time": 104.0, "exit_code": 0},
        cpu=[(42, "network", "network.tcpip", 10, 0.1), (0, "idle", "idle", 5, 0.05)],
        tables={"net_io": [("lo", "tx", 1000, 2)]},
        processes=lambda i: [(42, 1, "worker", "worker --x", 1, 100.0, 101.0 + i)],
        stacks=[(1, "a;b_[k]", "network", "network.tcpip")])


def test_round_trip(tmp_path):
    rec = load(_write(tmp_path / "r.rec"))
    assert rec.schema_version == SCHEMA_VERSION
    assert rec.complete
    assert rec.meta["command"] == ["x"]
    cat = rec.table("cpu_category")
    assert list(cat.columns) == ["interval", "pid", "category", "subcategory", "samples", "cpu_s"]
    assert cat["cpu_s"].sum() == pytest.approx(0.45)
    assert rec.workload_pids == {42}
    assert rec.duration_s == pytest.approx(3.0)


def test_cut_short_recording_loads_up_to_last_interval(tmp_path):
    rec = load(_write(tmp_path / "r.rec", intervals=2, close=False))
    assert not rec.complete
    assert len(rec.table("intervals")) == 2


def test_existing_output_is_kept_as_old(tmp_path):
    path = _write(tmp_path / "r.rec")
    _write(path, intervals=1)
    assert (tmp_path / "r.rec.old").exists()
    assert len(load(tmp_path / "r.rec.old").table("intervals")) == 3


def test_file_is_not_world_writable(tmp_path):
    old = os.umask(0)
    try:
        path = _write(tmp_path / "r.rec")
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o644


@pytest.mark.parametrize("content,needle", [
    (b"", "not a dpuprof recording"),
    (os.urandom(4096), "not a dpuprof recording"),
    (b"SQLite format 3\x00" + b"\x00" * 100, "damaged"),
], ids=["empty", "random", "zeroed-sqlite"])  # ids that do not depend on the random bytes
def test_garbage_files(tmp_path, content, needle):
    path = tmp_path / "bad.rec"
    path.write_bytes(content)
    with pytest.raises(UserError, match=needle):
        load(path)


def test_truncated_file(tmp_path):
    path = _write(tmp_path / "r.rec")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(UserError):
        load(path)


def test_future_schema_version(tmp_path):
    path = _write(tmp_path / "r.rec")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (json.dumps(SCHEMA_VERSION + 1),))
    with pytest.raises(UserError, match="newer than this dpuprof reads"):
        load(path)


def test_nan_and_negative_values_are_rejected(tmp_path):
    path = _write(tmp_path / "r.rec")
    with sqlite3.connect(path) as db:  # v3 packs cpu_category: make it a v2 file's table
        db.execute("DROP VIEW cpu_category")
        db.execute("CREATE TABLE cpu_category AS SELECT 0 AS interval, 42 AS pid, 'network' AS category, "
                   "'network.tcpip' AS subcategory, 1 AS samples, -1.0 AS cpu_s")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(UserError, match="negative"):
        load(path)
    path = _write(tmp_path / "s.rec")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='NaN' WHERE key='sample_freq_hz'")
    with pytest.raises(UserError, match="damaged metadata"):
        load(path)


def test_missing_and_directory(tmp_path):
    with pytest.raises(UserError, match="no such recording"):
        load(tmp_path / "nope.rec")
    with pytest.raises(UserError, match="directory"):
        load(tmp_path)


def test_refuses_symlink(tmp_path):
    (tmp_path / "target").write_text("keep")
    (tmp_path / "link.rec").symlink_to(tmp_path / "target")
    with pytest.raises(UserError, match="symbolic link"):
        _write(tmp_path / "link.rec")
    assert (tmp_path / "target").read_text() == "keep"


# ------------------------------------------------------------------ schema v3: packed storage, views

def _load_size_benchmark():
    """benchmarks/recording_size.py (rewrite a recording through the current writer, compare)."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("recording_size", REPO / "benchmarks" / "recording_size.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write_v3(path, intervals=3, **kwargs):
    w = RecordingWriter(path, {"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
                               "interval_s": 1.0}, **kwargs)
    for i in range(intervals):
        w.write_interval(
            i, 100.0 + i, 101.0 + i,
            {"cpu_category": [(42, "network", "network.tcpip", 10, 0.1 + i / 7), (0, "idle", "idle", 5, 0.05),
                              (43, "kernel_other", "kernel_other.unsampled", 0, 0.000123456789)],
             "stack_samples": [(42, 1, 3), (42, 2, 1), (43, 300, 2)]},
            processes=[(42, 1, "worker", "worker --x", 1, 100.0, 101.0 + i)],
            stacks=[(1, "a;b_[k]", "network", "network.tcpip", "crypto"), (2, "", "idle", "idle"),
                    (300, ";".join(f"f{j}" for j in range(200)), "compute", "compute.python")] if i == 0 else [],
        )
    w.close(end_time=100.0 + intervals, exit_code=0)
    return path


def test_v3_round_trip_gives_the_v2_dataframes(tmp_path):
    rec = load(_write_v3(tmp_path / "r.rec"))
    assert rec.schema_version == SCHEMA_VERSION >= 3
    cat = rec.table("cpu_category")
    assert list(cat.columns) == ["interval", "pid", "category", "subcategory", "samples", "cpu_s"]
    row = cat[(cat["interval"] == 2) & (cat["pid"] == 42)].iloc[0]
    assert (row["category"], row["subcategory"], row["samples"]) == ("network", "network.tcpip", 10)
    assert row["cpu_s"] == pytest.approx(0.1 + 2 / 7, abs=1e-9)  # stored as integer ns
    assert cat.loc[cat["pid"] == 43, "cpu_s"].iloc[0] == pytest.approx(0.000123457, abs=1e-9)
    st = rec.table("stacks").set_index("stack_id")
    assert list(st.columns) == ["folded", "category", "subcategory", "cause"]
    assert st.loc[1].tolist() == ["a;b_[k]", "network", "network.tcpip", "crypto"]
    assert st.loc[2].tolist() == ["", "idle", "idle", ""]
    assert st.loc[300, "folded"] == ";".join(f"f{j}" for j in range(200))  # frame ids above 127
    ss = rec.table("stack_samples")
    assert list(ss.columns) == ["interval", "pid", "stack_id", "samples"] and ss["samples"].sum() == 18


def test_v3_views_answer_sql_without_decoding_blobs(tmp_path):
    path = _write_v3(tmp_path / "r.rec")
    rec = load(path)
    with sqlite3.connect(path) as db:
        # The views named like the v1/v2 tables give what the reader gives.
        folded = dict(db.execute("SELECT stack_id, folded FROM stacks").fetchall())
        assert folded == dict(zip(rec.table("stacks")["stack_id"], rec.table("stacks")["folded"]))
        by_cat = dict(db.execute("SELECT category, sum(cpu_s) FROM cpu_category GROUP BY 1").fetchall())
        want = rec.table("cpu_category").groupby("category")["cpu_s"].sum()
        assert by_cat == pytest.approx(dict(want))
        rows = db.execute("SELECT interval, pid, comm, category, subcategory, cpu_s, samples FROM v_cpu_by_category "
                          "WHERE pid = 42 AND interval = 0").fetchall()
        assert rows == [(0, 42, "worker", "network", "network.tcpip", pytest.approx(0.1), 10)]
        frames = db.execute("SELECT depth, name FROM v_stack_frames WHERE stack_id = 1 ORDER BY depth").fetchall()
        assert frames == [(0, "a"), (1, "b_[k]")]
        assert db.execute("SELECT count(*) FROM v_stack_frames WHERE stack_id = 300").fetchone()[0] == 200
        top = db.execute("SELECT s.folded, sum(ss.samples) FROM v_stack_samples ss JOIN v_stacks s USING (stack_id) "
                         "WHERE ss.category != 'idle' GROUP BY 1 ORDER BY 2 DESC LIMIT 1").fetchone()
        assert top == ("a;b_[k]", 9)
        proc = db.execute("SELECT comm, in_workload, samples FROM v_processes WHERE pid = 42").fetchone()
        assert proc == ("worker", 1, 30)
        ss = db.execute("SELECT interval, pid, stack_id, samples FROM stack_samples ORDER BY 1, 2, 3").fetchall()
        assert ss == sorted(rec.table("stack_samples").itertuples(index=False, name=None))
        cc = db.execute("SELECT * FROM cpu_category ORDER BY 1, 2, 4").fetchall()
        want = rec.table("cpu_category").sort_values(["interval", "pid", "subcategory"])
        assert [r[:5] for r in cc] == [r[:5] for r in want.itertuples(index=False, name=None)]


def test_v3_old_stack_samples_merge_into_buckets_at_close(tmp_path):
    rec = load(_write_v3(tmp_path / "r.rec", intervals=40, bucket_after_s=15.0, bucket_s=10.0))
    assert rec.meta["stack_buckets"] == {"before": 20, "intervals": 10}
    ss = rec.table("stack_samples")
    assert ss["samples"].sum() == 40 * 6  # nothing lost
    old = ss[ss["interval"] < 20]
    assert set(old["interval"]) == {0, 10} and (old.groupby("stack_id")["samples"].sum() == [60, 20, 40]).all()
    assert set(ss.loc[ss["interval"] >= 20, "interval"]) == set(range(20, 40))  # recent: per interval
    # A recorder killed before close keeps every interval as written.
    cut = load(_write_v3(tmp_path / "cut.rec", intervals=1))
    assert "stack_buckets" not in cut.meta or cut.meta["stack_buckets"] is None


def test_a_time_window_inside_a_merged_bucket_keeps_its_share_of_the_stacks(tmp_path):
    from types import SimpleNamespace

    from dpuprof.render.timewindow import cut

    rec = load(_write_v3(tmp_path / "r.rec", intervals=40, bucket_after_s=15.0, bucket_s=10.0))

    def samples(intervals):
        window = SimpleNamespace(intervals=list(intervals), as_dict=lambda: {})
        return cut(rec, window).table("stack_samples")

    # 6 samples an interval, 3 stacks: 3 of bucket 10's 10 intervals keep 3/10 of its 60 samples.
    inside = samples([12, 13, 14])
    assert inside["samples"].sum() == 18 and set(inside["interval"]) == {10}
    assert samples(range(40))["samples"].sum() == 240  # the whole run: nothing lost
    # Windows that split the buckets at their edges add up to the whole.
    assert samples(range(0, 20))["samples"].sum() + samples(range(20, 40))["samples"].sum() == 240
    assert samples(range(25, 30))["samples"].sum() == 30  # recent intervals: exact, per interval


def test_v3_damaged_blobs_and_ids_are_one_line_errors(tmp_path):
    for sql, needle in [("UPDATE stack_list SET frames = x'81' WHERE stack_id = 1", "stack_list"),
                        ("UPDATE stack_list SET frames = x'8f7f' WHERE stack_id = 1", "missing frame"),
                        ("UPDATE cpu_counts SET counts = x'2a630101' WHERE interval = 0",
                         "subcategory_id"),  # pid 42, subcategory 99, 1 sample, 1 ns
                        ("UPDATE cpu_counts SET counts = x'2a0101' WHERE interval = 1", "whole"),
                        ("UPDATE cpu_counts SET counts = 'x' WHERE interval = 1", "wrong value types"),
                        ("UPDATE stack_counts SET counts = x'0102ff' WHERE pid = 42", "stack_counts")]:
        path = _write_v3(tmp_path / "d.rec")
        assert_load_fails_in_one_line(path, sql, needle)
        path.unlink()


@pytest.mark.parametrize("name", ["ddp-plain-v1", "ddp-plain"])
def test_v1_and_v2_fixtures_rewritten_as_v3_load_the_same(name, fixture_copy, tmp_path):
    bench = _load_size_benchmark()
    src = fixture_copy(name)
    old = load(src)
    assert old.schema_version < 3
    out = tmp_path / "v3.rec"
    bench.rewrite(old, out)
    new = load(out)
    assert new.schema_version == SCHEMA_VERSION
    assert bench.compare(old, new) == []
    assert out.stat().st_size < src.stat().st_size


def test_packing_round_trip():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as hs

    from dpuprof.recording.packing import MAX_ID, pack_ids, unpack_ids

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hs.lists(hs.integers(0, MAX_ID), max_size=20))
    def run(ids):
        assert unpack_ids(pack_ids(ids)) == ids
    run()
    assert pack_ids([1, 127, 128, 16384]) == bytes([1, 127, 0x81, 0, 0x81, 0x80, 0])
    with pytest.raises(ValueError):
        unpack_ids(b"\x81")
