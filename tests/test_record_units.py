"""Record-stage pieces that need neither root nor bcc."""

from __future__ import annotations

import pytest

from dpuprof.record.drain import _Cumulative, descendants
from dpuprof.record.symbols import module_label


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
