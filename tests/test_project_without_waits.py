"""A recording made without the sched_wait probe (``record --light``) has per-thread times but no
waits: the projection's speedup falls back to the CPU-contention proxy, as ``record --help`` says,
instead of a critical path that would read every wait as "other"."""

import json
import sqlite3

from dpuprof.project import build_projection as project
from dpuprof.project.inputs import from_recording
from dpuprof.recording import load

from test_project_model import PROFILES  # noqa: E402  (same directory)


def _without_sched_wait(path):
    con = sqlite3.connect(path)
    probes = json.loads(con.execute("SELECT value FROM meta WHERE key = 'probes_used'").fetchone()[0])
    probes.remove("sched_wait")
    con.execute("UPDATE meta SET value = ? WHERE key = 'probes_used'", (json.dumps(probes),))
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.execute("DELETE FROM " + ("thread_wait_packed" if "thread_wait_packed" in tables else "thread_wait"))
    con.commit()
    con.close()


def test_without_measured_waits_the_speedup_is_the_proxy(fixture_copy, tmp_path):
    before = from_recording(load(fixture_copy("ddp-plain")))
    assert before.waits_measured and not before.table("thread_time").empty
    assert project(before, PROFILES["bluefield-3"]).speedup.regime != "unknown"
    light = fixture_copy("ddp-plain", into=tmp_path)
    _without_sched_wait(light)
    inp = from_recording(load(light))
    assert not inp.waits_measured and not inp.table("thread_time").empty and inp.table("thread_wait").empty
    sp = project(inp, PROFILES["bluefield-3"]).speedup
    assert sp.regime == "unknown" and "sched_wait" in sp.regime_why
    assert sp.expected == sp.contention_proxy


def test_a_window_with_no_second_of_measured_waits_says_so(fixture_copy, tmp_path):
    """record --wait-duty: when no attached second falls in the window, the proxy stands in and the
    reason names the duty cycle, not a missing probe (the words said "recorded without the
    sched_wait probe" until 2026-12-07)."""
    path = fixture_copy("ddp-plain", into=tmp_path)
    con = sqlite3.connect(path)
    columns = {row[1] for row in con.execute("PRAGMA table_info(intervals)")}
    if "waits_s" not in columns:  # a fixture older than schema v6
        con.execute("ALTER TABLE intervals ADD COLUMN waits_s REAL")
    con.execute("UPDATE intervals SET waits_s = 0")
    con.commit()
    con.close()
    inp = from_recording(load(path))
    assert inp.waits_measured and (inp.table("intervals")["waits_s"] == 0).all()
    sp = project(inp, PROFILES["bluefield-3"]).speedup
    assert sp.regime == "unknown" and "--wait-duty" in sp.regime_why and "sched_wait probe" not in sp.regime_why
    assert sp.expected == sp.contention_proxy
