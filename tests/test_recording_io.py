"""The Recording file: incremental writes, validation on load, clear one-line errors."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from dpuprof.errors import UserError
from dpuprof.recording import SCHEMA_VERSION, load
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
])
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
    with sqlite3.connect(path) as db:
        db.execute("UPDATE cpu_category SET cpu_s = -1 WHERE pid = 42")
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
