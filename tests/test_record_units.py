"""Record-stage pieces that need neither root nor bcc."""

from __future__ import annotations

import pytest

from dpuprof.record.drain import UNSAMPLED, _Cumulative, descendants, scale_to_exact
from dpuprof.record.symbols import module_label


def test_scale_to_exact_keeps_the_mix_and_hits_the_total():
    cpu = {(7, "network.tcpip"): [30, 3e8], (7, "compute.python"): [10, 1e8], (9, "storage.fs"): [5, 5e7]}
    scale_to_exact(cpu, {7: 8e8, 0: 1e9, 11: 2e6})
    assert cpu[(7, "network.tcpip")][1] == pytest.approx(6e8)
    assert cpu[(7, "compute.python")][1] == pytest.approx(2e8)
    assert cpu[(9, "storage.fs")][1] == pytest.approx(5e7)  # no exact time: sample weights stay
    assert cpu[(0, "idle")] == [0, 1e9]
    assert cpu[(11, UNSAMPLED)] == [0, 2e6]


def test_scale_with_zero_weight_samples_splits_by_count():
    cpu = {(3, "a.x"): [3, 0], (3, "b.y"): [1, 0]}
    scale_to_exact(cpu, {3: 4e6})
    assert cpu[(3, "a.x")][1] == pytest.approx(3e6)


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
