"""sched_waking's duty cycle (record --wait-duty, dpuprof/record/drain/waitduty.py) without root:
the schedule, the seconds attached per interval on a synthetic clock, the baselines seeded at
each attach, and the option's parsing. The probe itself: tests/test_threads_root.py."""

from __future__ import annotations

import ctypes as ct
import os

import pytest

from conftest import dpuprof
from dpuprof.cli.record import _wait_duty
from dpuprof.errors import UserError
from dpuprof.record.drain import waitduty
from dpuprof.record.load.loaded import Attached


class _Leaf(ct.Structure):  # sched_wait.bpf.c's struct sw_thread
    _fields_ = [("born_ts", ct.c_ulong), ("exit_ts", ct.c_ulong), ("on_ns", ct.c_ulong), ("runq_ns", ct.c_ulong),
                ("wake_ts", ct.c_ulong), ("nvcsw", ct.c_ulong), ("pad", ct.c_uint), ("tgid", ct.c_uint),
                ("comm", ct.c_char * 16)]


class _Table(dict):
    Leaf = _Leaf


class _Probes:
    """The part of a LoadedProbes that WaitDuty uses: sched_waking's raw tracepoint and sw_threads."""

    def __init__(self):
        self.raw_tracepoints = {"sched_waking": Attached(os.open(os.devnull, os.O_RDONLY), "sched_waking", "fn")}
        self.maps = {"sw_threads": _Table()}
        self.attaches = 0

    def __getitem__(self, name):
        return self.maps[name]

    def attach_raw_tracepoint(self, key, event, fn):
        assert key not in self.raw_tracepoints
        self.attaches += 1
        self.raw_tracepoints[key] = Attached(os.open(os.devnull, os.O_RDONLY), event, fn)


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_schedule_is_the_first_on_of_every_period():
    assert [waitduty.is_on(i, 2, 8) for i in range(10)] == [True, True] + [False] * 6 + [True, True]


def test_waits_are_read_in_on_parts_and_the_interval_after_each():
    duty = waitduty.WaitDuty(_Probes(), 1, 4, clock=_Clock(0.0), baseline=lambda pid: None)
    assert [duty.measures(i) for i in range(9)] == [True, True, False, False, True, True, False, False, True]


def test_seconds_attached_per_interval_follow_the_switches():
    """1-s intervals, on 1 of every 3; the drain that ends each interval takes 0.05 s, and the
    switch at its end falls in the next interval: those seconds are counted there."""
    probes, clock = _Probes(), _Clock(99.5)
    duty = waitduty.WaitDuty(probes, 1, 3, clock=clock, baseline=lambda pid: None)
    got = []
    for i in range(6):
        t0, t1 = 100.0 + i, 101.0 + i
        clock.t = t1 + 0.05  # the drain
        got.append(duty.covered(t0, t1))
        duty.turn(i + 1, [])
    assert got == pytest.approx([1.0, 0.05, 0.0, 0.95, 0.05, 0.0])
    assert probes.attaches == 2 and "sched_waking" in probes.raw_tracepoints  # on again for interval 6


def test_an_attach_seeds_the_live_main_threads_baselines():
    probes = _Probes()
    table = probes["sw_threads"]
    table[7] = _Leaf(born_ts=5, on_ns=1, tgid=7)
    table[8] = _Leaf(exit_ts=9, on_ns=2, tgid=8)  # exited: its totals at exit stay
    readings = {7: (1000, 200, 33), 8: (3000, 0, 1), 9: (4000, 5, 6)}
    duty = waitduty.WaitDuty(probes, 1, 2, baseline=readings.get)
    duty.turn(1, [])  # detach
    before = waitduty.time.monotonic_ns()
    duty.turn(2, [7, 8, 9, 10])  # 10 is gone: no reading
    seven, nine = table[7], table[9]
    assert (seven.on_ns, seven.runq_ns, seven.nvcsw, seven.born_ts, seven.tgid) == (1000, 200, 33, 5, 7)
    assert (nine.on_ns, nine.runq_ns, nine.nvcsw, nine.tgid) == (4000, 5, 6, 9)
    assert seven.wake_ts >= before and nine.wake_ts >= before
    assert table[8].on_ns == 2 and 10 not in table
    assert probes.attaches == 1


def test_baseline_reads_this_process_main_thread():
    on, runq, nvcsw = waitduty.read_baseline(os.getpid())
    with open(f"/proc/{os.getpid()}/schedstat") as fh:
        assert on <= int(fh.read().split()[0])
    assert runq >= 0 and nvcsw >= 0
    assert waitduty.read_baseline(2 ** 22 + 1) is None


def test_wait_duty_option_rounds_to_drains():
    assert _wait_duty("always", 1.0) is None
    assert _wait_duty("2s/8s", 1.0) == (2, 8)
    assert _wait_duty("0.4/3", 1.0) == (1, 3)  # at least one drain on
    assert _wait_duty("10s/1m", 5.0) == (2, 12)
    assert _wait_duty("2s/8s", 2.0, given=False) == (1, 4)  # the default at the default --interval
    assert _wait_duty("2s/8s", 1.0, given=False) == (2, 8)
    assert _wait_duty("2s/8s", 5.0, given=False) == (1, 2)  # at --interval 5 (--light's)
    for bad, interval in (("2s", 1.0), ("8s/2s", 1.0), ("1s/1.2s", 1.0), ("x/1m", 1.0)):
        with pytest.raises(UserError, match="--wait-duty"):
            _wait_duty(bad, interval)


def test_the_default_wait_duty_runs_at_any_interval(tmp_path):
    """--light's 5-s drains (and any --interval) with the default --wait-duty: no error."""
    proc = dpuprof("record", "--interval", "5", "--probes", "psutil", "-q", "-o", tmp_path / "x.rec", "--", "true")
    assert proc.returncode == 0, proc.stderr


def test_record_refuses_a_bad_wait_duty_in_one_line():
    proc = dpuprof("record", "--wait-duty", "8s/2s", "--", "true")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--wait-duty" in proc.stderr and "Traceback" not in proc.stderr
