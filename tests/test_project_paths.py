"""Roles, waits and freed CPU read from per-thread tables (dpuprof.project.paths), and the steady
window (dpuprof.projection.window), on synthetic tables built for the test (not measurements)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpuprof.errors import UserError
from dpuprof.project import paths
from dpuprof.projection import window
from dpuprof.recording.schema import TABLES

NS = 1_000_000_000


def frame(name, rows):
    return pd.DataFrame(rows, columns=list(TABLES[name]))


def tables():
    """A rank (pid 10, main thread + a gloo thread 12), its DataLoader worker (pid 11), 2 intervals."""
    iv = frame("intervals", [(0, 100.0, 101.0), (1, 101.0, 102.0)])
    procs = frame("processes", [(10, 1, "python", "", 1, 100.0, 102.0), (11, 10, "python", "", 1, 100.0, 102.0)])
    threads = frame("threads", [(10, 10, "pt_main_thread", 100.0, 102.0), (12, 10, "gloo", 100.0, 102.0),
                                (11, 11, "pt_data_worker", 100.0, 102.0)])
    tt = frame("thread_time", [(i, 10, NS // 2, NS // 10, 4 * NS // 10) for i in (0, 1)]
               + [(i, 11, 8 * NS // 10, 0, 2 * NS // 10) for i in (0, 1)])
    tw = frame("thread_wait", [(i, 10, "sleep", 11, 11, NS // 10, 5) for i in (0, 1)]      # woken by its worker
               + [(i, 10, "sleep", 10, 12, 2 * NS // 10, 5) for i in (0, 1)]               # by its gloo thread
               + [(i, 10, "io", 0, 0, NS // 20, 1) for i in (0, 1)]
               + [(i, 11, "sleep", 10, 10, 2 * NS // 10, 5) for i in (0, 1)])              # worker waits for the rank
    cpu = frame("cpu_category", [(i, 10, "compute", "compute.torch", 50, 0.5) for i in (0, 1)]
                + [(i, 11, "crypto", "crypto.user", 40, 0.4) for i in (0, 1)]
                + [(i, 11, "compute", "compute.python", 40, 0.4) for i in (0, 1)])
    tcat = frame("thread_category", [(i, 10, "compute.torch", 50) for i in (0, 1)])
    return {"intervals": iv, "processes": procs, "threads": threads, "thread_time": tt, "thread_wait": tw,
            "cpu_category": cpu, "thread_category": tcat, "gpu": frame("gpu", [])}


def rows(frac):
    """Evaluated-model rows freeing ``frac`` of crypto.user."""
    return pd.DataFrame([{"category": "crypto", "subcategory": "crypto.user", "before_s": 0.8,
                          "workload_before_s": 0.8, "freed_s": 0.8 * frac, "workload_freed_s": 0.8 * frac}])


def test_roles_waits_and_freed_cpu():
    f = tables()
    win = window.Window(0.0, 2.0, (0, 1), "test")
    job = paths.build(f, {10, 11}, 2, win, rows(1.0))
    (r,) = job.ranks
    assert (r.pid, r.comm) == (10, "pt_main_thread")
    assert r.on_cpu_s == pytest.approx(1.0) and r.runq_s == pytest.approx(0.2)
    assert r.wait_s["loader"] == pytest.approx(0.2)
    assert r.wait_s["peer"] == pytest.approx(0.4)
    assert r.wait_s["io"] == pytest.approx(0.1)
    assert r.wait_s["other"] == pytest.approx(0.1)  # 0.8 s off-CPU, 0.7 s of it seen by the wake-up probe
    assert r.freed_s == 0.0  # no crypto on the rank thread
    (ld,) = job.loaders
    assert ld.pid == 11 and ld.rank_pid == 10
    assert ld.busy_s == pytest.approx(2.0 - 0.4)  # wall minus the time it waited for the rank
    assert ld.freed_s == pytest.approx(0.8)
    assert job.host_freed_s == pytest.approx(0.8)


def test_a_launcher_is_no_rank_and_its_rank_no_loader():
    """A process that started the rank and waits on it (train_ddp's parent, torchrun's agent), 10 %
    busy: without the launcher rule it was a rank whose path (the wall time) bound the projection,
    and its waits, woken by the rank, made the rank its loader (a 3-s c_inline_w1 run projected
    1.0002x, 2026-12-07). Its child candidate is 50 % busy: it is no rank."""
    f = tables()
    f["processes"] = pd.concat([frame("processes", [(5, 1, "python", "", 1, 100.0, 102.0)]),
                                f["processes"].assign(ppid=[5, 10])], ignore_index=True)
    f["threads"] = pd.concat([frame("threads", [(5, 5, "python", 100.0, 102.0)]), f["threads"]], ignore_index=True)
    f["thread_time"] = pd.concat([frame("thread_time", [(i, 5, NS // 10, 0, 9 * NS // 10) for i in (0, 1)]),
                                  f["thread_time"]], ignore_index=True)
    f["thread_wait"] = pd.concat([frame("thread_wait", [(i, 5, "sleep", 10, 10, 9 * NS // 10, 9) for i in (0, 1)]),
                                  f["thread_wait"]], ignore_index=True)
    win = window.Window(0.0, 2.0, (0, 1), "test")
    job = paths.build(f, {5, 10, 11}, 2, win, rows(1.0))
    assert [r.pid for r in job.ranks] == [10]
    assert [(ld.pid, ld.rank_pid) for ld in job.loaders] == [(11, 10)]
    busy = {5: (0.2, 0.0, 2.0), 10: (1.0, 0.2, 2.0)}
    assert paths.launchers(busy, f["processes"].set_index("pid")) == {5}
    busy[5] = (0.6, 0.0, 2.0)  # as busy as a rank (rank 0 in the parent): it stays one
    assert paths.launchers(busy, f["processes"].set_index("pid")) == set()


def test_v1_recording_has_no_paths():
    f = tables()
    f["thread_time"] = f["thread_time"].iloc[0:0]
    assert paths.build(f, {10, 11}, 2, window.Window(0, 2, (0, 1), "t"), rows(1.0)) is None


def test_window_from_markers_skips_warmup():
    f = tables()
    iv = frame("intervals", [(i, 100.0 + i, 101.0 + i) for i in range(10)])
    marks = frame("markers", [(10, 10, "step", 100.0 + 0.5 * k) for k in range(19)])
    w = window.choose(iv, f["cpu_category"], {10, 11}, marks)
    assert w.start == pytest.approx(1.5) and w.end == pytest.approx(9.0)
    assert "warm-up" in w.how


def test_window_from_data_drops_startup():
    iv = frame("intervals", [(i, 100.0 + i, 101.0 + i) for i in range(8)])
    cpu = frame("cpu_category", [(i, 10, "compute", "compute.x", 10, 0.1 if i < 2 else 1.0) for i in range(8)])
    w = window.choose(iv, cpu, {10}, frame("markers", []))
    assert w.intervals == tuple(range(2, 8))


def test_explicit_window_and_bad_ranges():
    iv = frame("intervals", [(i, 100.0 + i, 101.0 + i) for i in range(8)])
    w = window.choose(iv, frame("cpu_category", []), set(), frame("markers", []), window.parse_range("2:4"))
    assert w.intervals == (2, 3)
    for bad in ("x", "4:2", "1:2:3", "-1:2"):
        with pytest.raises(UserError):
            window.parse_range(bad)
    with pytest.raises(UserError):
        window.choose(iv, frame("cpu_category", []), set(), frame("markers", []), (50.0, 60.0))


def test_waits_longer_than_the_off_cpu_time_are_scaled_to_fit():
    # a wake-up in the window counts a wait that began before it: never more than the off-CPU time
    f = tables()
    f["thread_wait"].loc[f["thread_wait"]["tid"] == 10, "ns"] *= 10
    job = paths.build(f, {10, 11}, 2, window.Window(0.0, 2.0, (0, 1), "test"), rows(1.0))
    (r,) = job.ranks
    assert sum(r.wait_s.values()) == pytest.approx(r.wall_s - r.on_cpu_s - r.runq_s)


def test_waits_of_a_duty_cycle_stand_for_the_window():
    """--wait-duty (schema v6): interval 1's waits were not measured (waits_s 0), interval 0's for
    all of it; the waits seen are scaled by the window's seconds over the attached ones (2 / 1),
    and give the same reasons as the two intervals measured throughout."""
    f = tables()
    f["intervals"] = f["intervals"].assign(waits_s=[1.0, 0.0])
    f["thread_wait"] = f["thread_wait"][f["thread_wait"]["interval"] == 0]
    win = window.Window(0.0, 2.0, (0, 1), "test")
    assert paths.wait_coverage(f["intervals"], {0, 1}) == pytest.approx(0.5)
    (r,) = paths.build(f, {10, 11}, 2, win, rows(1.0)).ranks
    full = paths.build(tables(), {10, 11}, 2, win, rows(1.0)).ranks[0]
    assert r.wait_s == pytest.approx(full.wait_s)
    (ld,) = paths.build(f, {10, 11}, 2, win, rows(1.0)).loaders
    assert ld.busy_s == pytest.approx(2.0 - 0.4)


def test_wait_coverage_counts_intervals_without_waits_s_whole():
    iv = frame("intervals", [(0, 100.0, 101.0), (1, 101.0, 103.0), (2, 103.0, 104.0)])
    assert paths.wait_coverage(iv, {0, 1, 2}) == 1.0  # an older file: no waits_s column
    iv = iv.assign(waits_s=[None, 0.5, 0.0])
    assert paths.wait_coverage(iv, {0, 1, 2}) == pytest.approx(1.5 / 4)
    assert paths.wait_coverage(iv, {2}) == 0.0
    f = tables()
    f["intervals"] = f["intervals"].assign(waits_s=[0.0, 0.0])  # the window fell in off parts
    assert paths.build(f, {10, 11}, 2, window.Window(0.0, 2.0, (0, 1), "t"), rows(1.0)) is None
