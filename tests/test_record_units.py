"""Record-stage pieces that need neither root nor bcc."""

from __future__ import annotations

import pytest

from dpuprof.record.drain import UNSAMPLED, _Cumulative, descendants, scale_to_exact
from dpuprof.record.symbols import module_label


def test_scale_to_exact_splits_exact_time_by_sample_counts():
    samples = {(7, "network.tcpip"): 30, (7, "compute.python"): 10, (9, "storage.fs"): 5}
    ns = scale_to_exact(samples, {7: 8e8, 0: 1e9, 11: 2e6}, period_ns=1e7)
    assert ns[(7, "network.tcpip")] == pytest.approx(6e8)
    assert ns[(7, "compute.python")] == pytest.approx(2e8)
    assert ns[(9, "storage.fs")] == pytest.approx(5e7)  # no exact time: one period per sample
    assert ns[(0, "idle")] == 1e9
    assert ns[(11, UNSAMPLED)] == 2e6
    assert sum(v for (pid, _), v in ns.items() if pid == 7) == pytest.approx(8e8)


def test_cumulative_deltas_never_negative():
    c = _Cumulative()
    assert c.deltas({"a": (10, 1)}) == {"a": (10, 1)}
    assert c.deltas({"a": (15, 1)}) == {"a": (5, 0)}
    assert c.deltas({"a": (3, 0)}) == {}  # a reset reads as nothing, not as negative


def test_descendants_follow_double_forks():
    parents = {100: 1, 200: 100, 300: 200, 400: 1, 201: 100}
    assert descendants(parents, 100) == {100, 200, 300, 201}


@pytest.mark.parametrize("path,label", [
    ("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "libz.so.1.2.13"),
    ("/venv/lib/python3.11/site-packages/cryptography/hazmat/bindings/_rust.abi3.so",
     "cryptography/hazmat/bindings/_rust.abi3.so"),
    ("/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so", "numpy/core/_multiarray_umath.so"),
    ("", "[anon]"),
    ("[vdso]", "[vdso]"),
])
def test_module_label(path, label):
    assert module_label(path) == label


def test_exact_times_charge_schedstat_and_keep_the_host_whole():
    from pathlib import Path

    from dpuprof.record.recorder import Options, Recorder

    r = Recorder(Options(command=["x"], output=Path("unused.rec")))
    # schedstat says more than sched_switch time: the surplus comes out of idle (pid 0).
    first = r._exact_times({0: 5e8, 10: 3e8, 20: 1e8}, {10: 0.35}, {10})
    assert first == {0: 4.5e8, 10: 3.5e8, 20: 1e8}
    assert sum(first.values()) == 9e8
    # A workload process that exited (no schedstat) keeps its switch time.
    third = r._exact_times({0: 5e8, 30: 2e8}, {}, {30})
    assert third == {0: 5e8, 30: 2e8}
