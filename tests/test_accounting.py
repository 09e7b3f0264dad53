"""The exact-CPU policy (dpuprof/record/drain/accounting.py), on hand-made interval inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpuprof.record.drain.accounting import STEAL, UNSAMPLED, CpuRow, HostTimes, cpu_category_rows, split_by_samples


def test_split_gives_each_process_its_exact_time_in_sample_proportion():
    samples = {(7, "network.tcpip"): 30, (7, "compute.python"): 10, (9, "storage.fs"): 5, (0, "idle"): 4}
    ns = split_by_samples(samples, {7: 8e8, 11: 2e6}, rest_ns=None, period_ns=1e7)
    assert ns[(7, "network.tcpip")] == pytest.approx(6e8)
    assert ns[(7, "compute.python")] == pytest.approx(2e8)
    assert ns[(9, "storage.fs")] == pytest.approx(5e7)  # no exact time, no host times: a period each
    assert ns[(11, UNSAMPLED)] == 2e6  # ran shorter than a period
    assert (0, "idle") not in ns  # idle is cpu_category_rows' to add
    assert sum(v for (pid, _), v in ns.items() if pid == 7) == pytest.approx(8e8)


def test_the_rest_of_the_hosts_busy_time_is_shared_by_the_other_samples():
    samples = {(7, "compute.python"): 10, (9, "storage.fs"): 3, (12, "network.tcpip"): 1}
    ns = split_by_samples(samples, {7: 8e8}, rest_ns=4e8, period_ns=1e7)
    assert ns[(9, "storage.fs")] == pytest.approx(3e8)
    assert ns[(12, "network.tcpip")] == pytest.approx(1e8)
    assert ns[(7, "compute.python")] == pytest.approx(8e8)


def test_a_process_that_never_ran_gets_no_unsampled_row():
    assert split_by_samples({}, {5: 0}, rest_ns=None, period_ns=1e7) == {}


def test_a_short_lived_threads_cpu_is_the_workloads_and_no_steal_is_invented():
    # The workload ran 0.9 CPU-s (its threads ended within the interval: only the kernel's
    # process total has them), the host was busy 1.0 s, idle 1.0 s, steal 0: no steal row.
    host = HostTimes(busy=1e9, idle=1e9, steal=0.0)
    rows = cpu_category_rows({(10, "compute.python"): 30, (0, "idle"): 100, (3, "kernel_other.sched"): 2},
                             {10: 9e8}, host, period_ns=1e7)
    assert all(r.subcategory != STEAL for r in rows)
    assert sum(r.cpu_s for r in rows if r.pid == 10) == pytest.approx(0.9)
    assert sum(r.cpu_s for r in rows if r.pid == 3) == pytest.approx(0.1)
    assert sum(r.cpu_s for r in rows) == pytest.approx(2.0)


def test_steal_is_the_kernels_steal():
    host = HostTimes(busy=8e8, idle=2e8, steal=1e8)
    rows = cpu_category_rows({(10, "compute.python"): 70}, {10: 7e8}, host, period_ns=1e7)
    assert CpuRow(0, "idle", STEAL, 0, pytest.approx(0.1)) in rows
    assert CpuRow(0, "idle", "idle", 0, pytest.approx(0.2)) in rows
    # 0.7 busy + 0.2 idle + 0.1 steal: the other 0.1 busy had no sample outside the workload to carry it
    assert sum(r.cpu_s for r in rows) == pytest.approx(1.0)


def test_rows_are_the_cpu_category_table():
    rows = cpu_category_rows({(10, "compute.python"): 3, (10, "network.tcpip"): 1, (0, "idle"): 2},
                             {10: 4e8, 42: 1e6}, None, period_ns=1e7)
    assert rows == [CpuRow(0, "idle", "idle", 2, pytest.approx(0.02)),
                    CpuRow(10, "compute", "compute.python", 3, pytest.approx(0.3)),
                    CpuRow(10, "network", "network.tcpip", 1, pytest.approx(0.1)),
                    CpuRow(42, "kernel_other", UNSAMPLED, 0, pytest.approx(0.001))]


def test_interrupt_work_sampled_on_the_idle_task_is_busy_not_idle():
    host = HostTimes(busy=3e8, idle=7e8, steal=0.0)
    rows = cpu_category_rows({(0, "idle"): 70, (0, "network.softirq"): 10, (5, "compute.c"): 20},
                             {}, host, period_ns=1e7)
    assert CpuRow(0, "network", "network.softirq", 10, pytest.approx(0.1)) in rows
    assert CpuRow(0, "idle", "idle", 70, pytest.approx(0.7)) in rows


_pids = st.integers(0, 5)
_subs = st.sampled_from(["idle", "compute.python", "network.tcpip"])


@given(st.dictionaries(st.tuples(_pids, _subs), st.integers(1, 50)),
       st.dictionaries(st.integers(1, 5), st.integers(0, 10**9)),
       st.integers(0, 4 * 10**9), st.integers(0, 2 * 10**9), st.integers(0, 10**8))
def test_every_process_with_exact_time_is_charged_exactly_that(samples, exact, busy, idle, steal):
    host = HostTimes(float(busy), float(idle), float(steal))
    rows = cpu_category_rows(samples, exact, host, period_ns=1e7)
    for pid, want in exact.items():
        got = sum(r.cpu_s for r in rows if r.pid == pid and r.category != "idle")
        assert got * 1e9 == pytest.approx(want, abs=1e-3)
    assert sum(r.cpu_s for r in rows if r.subcategory == STEAL) * 1e9 == pytest.approx(steal, abs=1e-3)
    # When some sample outside the workload can carry it, the busy rows add up to the host's busy
    # time (or to the workload's, where its exact time exceeds it), and with idle and steal to all.
    others = any(sub != "idle" and pid not in exact for (pid, sub), _n in samples.items())
    if others:
        busy_s = sum(r.cpu_s for r in rows if r.category != "idle")
        assert busy_s * 1e9 == pytest.approx(max(busy, sum(exact.values())), abs=1e-2)


def test_the_report_notes_a_workload_cpu_off_the_kernels_count_by_more_than_2_percent():
    from dpuprof.render.notes import self_check_line

    wl = {"total_s": 0.85, "observer_s": 0.0, "kernel_s": 4.0}
    line = self_check_line(wl, split=True)
    assert line.startswith("self-check") and "-78.8 %" in line and "4.00 s" in line
    assert self_check_line({**wl, "total_s": 3.95, "observer_s": 0.02}, split=True) is None
    assert self_check_line({**wl, "kernel_s": None}, split=True) is None  # not covered: no check
    assert self_check_line(wl, split=False) is None
