"""The exact-CPU policy (dpuprof/record/drain/accounting.py), on hand-made interval inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpuprof.record.drain.accounting import (STEAL, UNSAMPLED, CpuRow, cpu_category_rows, deficit_ns, exact_times,
                                       split_by_samples)


def test_split_gives_each_process_its_exact_time_in_sample_proportion():
    samples = {(7, "network.tcpip"): 30, (7, "compute.python"): 10, (9, "storage.fs"): 5}
    ns = split_by_samples(samples, {7: 8e8, 0: 1e9, 11: 2e6}, period_ns=1e7)
    assert ns[(7, "network.tcpip")] == pytest.approx(6e8)
    assert ns[(7, "compute.python")] == pytest.approx(2e8)
    assert ns[(9, "storage.fs")] == pytest.approx(5e7)  # no exact time: one period per sample
    assert ns[(0, "idle")] == 1e9  # idle ran, never sampled: still idle
    assert ns[(11, UNSAMPLED)] == 2e6  # ran shorter than a period
    assert sum(v for (pid, _), v in ns.items() if pid == 7) == pytest.approx(8e8)


def test_a_process_that_never_ran_gets_no_unsampled_row():
    assert split_by_samples({}, {5: 0}, period_ns=1e7) == {}


def test_schedstat_surplus_comes_out_of_idle_and_the_host_stays_whole():
    switch = {0: 5e8, 10: 3e8, 20: 1e8}
    exact = exact_times(switch, {10: 3.5e8})
    assert exact == {0: 4.5e8, 10: 3.5e8, 20: 1e8}
    assert sum(exact.values()) == sum(switch.values())
    assert deficit_ns(switch, {10: 3.5e8}) == 0


def test_a_workload_process_that_exited_keeps_its_switch_time():
    assert exact_times({0: 5e8, 30: 2e8}, {}) == {0: 5e8, 30: 2e8}


def test_idle_never_goes_negative():
    assert exact_times({0: 1e7, 10: 1e8}, {10: 5e8})[0] == 0.0


def test_a_schedstat_deficit_is_charged_to_nobody_and_reported():
    # schedstat below switch time (steal under CONFIG_PARAVIRT_TIME_ACCOUNTING): idle keeps its
    # time, the workload gets schedstat, and the difference is the deficit.
    switch = {0: 2e8, 10: 8e8}
    exact = exact_times(switch, {10: 7e8})
    assert exact == {0: 2e8, 10: 7e8}
    assert deficit_ns(switch, {10: 7e8}) == pytest.approx(1e8)
    assert sum(switch.values()) - sum(exact.values()) == pytest.approx(deficit_ns(switch, {10: 7e8}))


def test_rows_are_the_cpu_category_table():
    rows = cpu_category_rows({(10, "compute.python"): 3, (10, "network.tcpip"): 1, (0, "idle"): 2},
                             {0: 5e8, 10: 3e8, 42: 1e6}, {10: 4e8}, period_ns=1e7)
    assert rows == [CpuRow(0, "idle", "idle", 2, pytest.approx(0.4)),
                    CpuRow(10, "compute", "compute.python", 3, pytest.approx(0.3)),
                    CpuRow(10, "network", "network.tcpip", 1, pytest.approx(0.1)),
                    CpuRow(42, "kernel_other", UNSAMPLED, 0, pytest.approx(0.001))]


def test_a_deficit_is_written_as_steal_and_the_host_adds_up():
    # A VM: the workload was current for 0.8 s by sched_switch, schedstat charges it 0.7 s (steal
    # left out of rq_clock_task); idle ran 0.2 s, a kernel thread 0.1 s: 1.1 CPU-s in all.
    switch = {0: 2e8, 10: 8e8, 3: 1e8}
    rows = cpu_category_rows({(10, "compute.python"): 70}, switch, {10: 7e8}, period_ns=1e7)
    assert CpuRow(0, "idle", STEAL, 0, pytest.approx(0.1)) in rows
    assert sum(r.cpu_s for r in rows) == pytest.approx(1.1)
    assert sum(r.cpu_s for r in rows if r.category != "idle") == pytest.approx(0.8)


def test_a_surplus_writes_no_steal_row():
    rows = cpu_category_rows({(10, "compute.python"): 4}, {0: 5e8, 10: 3e8}, {10: 4e8}, period_ns=1e7)
    assert all(r.subcategory != STEAL for r in rows)


_pids = st.integers(0, 5)
_subs = st.sampled_from(["idle", "compute.python", "network.tcpip"])


@given(st.dictionaries(st.tuples(_pids, _subs), st.integers(1, 50)),
       st.dictionaries(_pids, st.integers(0, 10**9)),
       st.dictionaries(st.integers(1, 5), st.integers(0, 10**9)))
def test_every_process_with_exact_time_is_charged_exactly_that(samples, switch, sched):
    # With the deficit written as steal, the timed rows cover the switch total whenever idle
    # could pay the surplus.
    rows = cpu_category_rows(samples, switch, sched, period_ns=1e7)
    net = sum(v - switch.get(p, 0) for p, v in sched.items())
    if net <= 0 or switch.get(0, 0) >= net:
        # (the steal row is pid 0's even when idle itself did not run: switch may lack pid 0)
        timed = sum(r.cpu_s for r in rows if r.pid in switch or r.pid in sched or r.subcategory == STEAL)
        assert timed * 1e9 == pytest.approx(sum(switch.values()), abs=1e-2)
    exact = exact_times(switch, sched)
    ns = split_by_samples(samples, exact, period_ns=1e7)
    for pid, want in exact.items():
        got = sum(v for (p, _), v in ns.items() if p == pid)
        assert got == pytest.approx(want, abs=1e-3)
    # Idle pays the workload's net surplus as far as it can, and nothing for a deficit.
    net = sum(v - switch.get(p, 0) for p, v in sched.items())
    if 0 in switch:
        assert exact[0] == (max(0.0, switch[0] - net) if net > 0 and switch[0] else switch[0])
    # So the host's total is the switch total, plus the surplus idle could not pay, less the deficit.
    paid = switch.get(0, 0) - exact.get(0, 0)
    assert sum(exact.values()) == pytest.approx(sum(switch.values()) + net - paid, abs=1e-3)
    assert deficit_ns(switch, sched) == max(0.0, -net)
