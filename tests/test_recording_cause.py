"""The ``cause`` column of ``stacks`` (schema v2): written, read, and "" for files without it."""

from __future__ import annotations

import sqlite3

from dpuprof.recording import load
from factory import make_recording


def test_cause_round_trip(tmp_path):
    make_recording(tmp_path / "c.rec", meta={"command": ["x"], "sample_freq_hz": 99, "cpu_count": 2},
                   tables={"stack_samples": [(42, 1, 3), (42, 2, 1), (42, 3, 1)]},
                   stacks=[(1, "inflate (libz.so.1);exc_page_fault_[k]", "kernel_other", "kernel_other.mm",
                            "compression"),
                           (2, "main (app)", "compute", "compute.other", ""),
                           (3, "tcp_sendmsg_[k]", "network", "network.tcpip")])  # a 4-tuple: cause ""
    st = load(tmp_path / "c.rec").table("stacks").set_index("stack_id")
    assert list(st.columns) == ["folded", "category", "subcategory", "cause"]
    assert st["cause"].to_dict() == {1: "compression", 2: "", 3: ""}


def test_v1_fixture_reads_cause_empty(fixture_copy):
    path = fixture_copy("ddp-plain-v1")
    with sqlite3.connect(path) as db:
        cols = {r[1] for r in db.execute("PRAGMA table_info(stacks)")}
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert version == "1" and "cause" not in cols  # the fixture really is a file without the column
    st = load(path).table("stacks")
    assert len(st) > 100 and (st["cause"] == "").all()
    assert st["folded"].str.len().min() > 0


def test_v2_file_written_before_the_column_reads_cause_empty(fixture_copy):
    path = fixture_copy("long")
    with sqlite3.connect(path) as db:
        cols = {r[1] for r in db.execute("PRAGMA table_info(stacks)")}
    if "cause" in cols:  # re-recorded since: then its causes are real values
        assert load(path).table("stacks")["cause"].map(lambda v: isinstance(v, str)).all()
    else:
        assert (load(path).table("stacks")["cause"] == "").all()
