"""The critical-path speedup model (dpuprof.project.critical_path) on hand-derivable cases.

Every JobPaths here is synthetic: it tests the formulas, it is not a measurement.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpuprof.project import critical_path
from dpuprof.project.paths import JobPaths, Loader, RankThread
from dpuprof.projection.window import Window

D = 10.0


def waits(loader=0.0, peer=0.0, io=0.0, other=0.0):
    return {"loader": loader, "peer": peer, "io": io, "other": other}


def job(ranks, loaders=(), cpus=2, busy=None, freed=0.0, gpu=None, net=0.0):
    busy = sum(r.on_cpu_s for r in ranks) + sum(ld.busy_s for ld in loaders) if busy is None else busy
    return JobPaths(Window(0.0, D, tuple(range(10)), "test"), cpus, busy, freed, 0.0, tuple(ranks), tuple(loaders),
                    gpu, net)


def rank(on, runq=0.0, freed=0.0, pid=10, **w):
    wt = waits(**w)
    wt["other"] += D - on - runq - sum(wt.values())
    return RankThread(pid, pid, "pt_main_thread", D, on, runq, wt, freed)


def test_inline_work_comes_off_the_rank_path():
    # W = D = 10 s, 4 s of it freed on the rank thread: 10 / (10 - 4)
    s = critical_path.speedup(job([rank(10.0, freed=4.0)], freed=4.0))
    assert s["expected"] == pytest.approx(10 / 6)
    assert s["regime"] == "inline"


def test_worker_with_slack_gains_nothing():
    # the rank never waits on its worker (busy 6 s of 10); freeing 3 s of the worker changes nothing
    r = rank(5.0)
    s = critical_path.speedup(job([r], [Loader(11, 10, 6.0, 0.0, 3.0)], freed=3.0))
    assert s["expected"] == pytest.approx(1.0)
    assert s["regime"] == "worker-with-slack"


def test_loader_bound_job_follows_the_loader():
    # the rank waits 7 s on a worker that is busy all 10 s; 4 s freed in the worker: 10 / 6
    r = rank(3.0, loader=7.0)
    s = critical_path.speedup(job([r], [Loader(11, 10, 10.0, 0.0, 4.0)], freed=4.0))
    assert s["expected"] == pytest.approx(10 / 6)
    assert s["regime"] == "loader-bound"


def test_cpu_contended_runqueue_shrinks_with_competitors_freed_share():
    # 2 CPUs busy 20 s in 10 s (saturated: K = 10 = P); the rank: 4 s on CPU, 4 s in the run queue,
    # 2 s other. 5 s freed elsewhere: utilisation 1 -> 0.75 all but empties the run queue, and on a
    # saturated host the job cannot beat the capacity bound K' = (20 - 5) / 2 = 7.5 s.
    r = rank(4.0, runq=4.0)
    s = critical_path.speedup(job([r], busy=20.0, freed=5.0))
    assert s["expected"] == pytest.approx(10 / 7.5)
    assert s["regime"] == "cpu-contended"
    assert s["high"] == pytest.approx(10 / 7.5)  # the capacity bound: nothing can beat it
    assert s["low"] == pytest.approx(1.0)


def test_unsaturated_runqueue_shrinks_as_a_queue_does():
    # 4 CPUs: K = 20 / 4 = 5 < P = 10 (not saturated). Utilisation 0.5 -> 0.375: the run-queue delay
    # scales by q(0.375) / q(0.5) = 0.6 / 1.0, so R' = 2.4 s
    r = rank(4.0, runq=4.0)
    s = critical_path.speedup(job([r], cpus=4, busy=20.0, freed=5.0))
    assert s["expected"] == pytest.approx(10 / (4 + 4 * 0.6 + 2))


def test_gpu_bound_job_cannot_gain():
    s = critical_path.speedup(job([rank(10.0, freed=4.0)], freed=4.0, gpu=1.0))
    assert s["expected"] == pytest.approx(1.0)
    assert s["regime"] == "gpu-bound"


def test_waits_on_peers_shrink_with_freed_network_work():
    # half of the rank's time is waiting on the collective; an ideal network offload frees it all
    r = rank(5.0, peer=5.0)
    s = critical_path.speedup(job([r], net=1.0))
    assert s["expected"] == pytest.approx(2.0)
    assert s["low"] == pytest.approx(1.0)


@settings(max_examples=300, deadline=None)
@given(on=st.floats(0.1, 10), rq=st.floats(0, 5), ld=st.floats(0, 5), peer=st.floats(0, 5),
       f_m=st.floats(0, 1), f_l=st.floats(0, 1), busy_l=st.floats(0, 10), extra=st.floats(0, 30),
       f_host=st.floats(0, 1), sd=st.floats(0, 2), net=st.floats(0, 1), cpus=st.integers(1, 64),
       gpu=st.one_of(st.none(), st.floats(0, 1)))
@example(on=1.0, rq=0.0, ld=0.0, peer=0.0, f_m=1.0, f_l=0.0, busy_l=0.0, extra=0.0, f_host=1.0, sd=0.0,
         net=0.0, cpus=1, gpu=None)  # all of the path freed: expected and high unbounded (None)
def test_low_expected_high_are_ordered(on, rq, ld, peer, f_m, f_l, busy_l, extra, f_host, sd, net, cpus, gpu):
    wall = on + rq + ld + peer
    r = RankThread(10, 10, "x", wall, on, rq, waits(loader=ld, peer=peer), f_m * on, sd)
    lo = Loader(11, 10, busy_l, min(rq, busy_l), f_l * busy_l, sd)
    busy = on + busy_l + extra
    j = JobPaths(Window(0.0, wall, (0,), "t"), cpus, busy, f_host * busy, sd, (r,), (lo,), gpu, net)
    s = critical_path.speedup(j)
    # None means unbounded: every second on the path after the offload was freed (the bound is 0;
    # e.g. one rank whose on-CPU time is all offloadable and that never waits). Hypothesis found it.
    inf = float("inf")
    for case in ("low", "expected", "high"):
        if s[case] is None:
            assert max(s["bounds"][case]["after"].values()) < 1e-9, (case, s["bounds"][case])
    assert s["low"] is not None  # the capacity bound keeps the host's unfreed work
    expected = inf if s["expected"] is None else s["expected"]
    high = inf if s["high"] is None else s["high"]
    assert 1.0 - 1e-9 <= s["low"] <= expected + 1e-9
    assert expected <= high + 1e-9


def test_peer_wait_regime_is_named():
    s = critical_path.speedup(job([rank(5.0, peer=5.0)], net=1.0))
    assert s["regime"] == "peer-wait"
    assert s["evidence"]["path_gains_s"]["peer"] == pytest.approx(5.0)
