"""Root test: record/drain/mapio.py's batch reads and deletes agree with bcc's entry-by-entry walk on
real kernel hash maps (struct and integer keys), and a delete batch with a key already gone
still deletes the rest."""

from __future__ import annotations

import ctypes as ct

import pytest

pytestmark = pytest.mark.root

SOURCE = """
struct k { u32 a; u64 b; char c[16]; };
BPF_HASH(h, struct k, u64, 8192);
BPF_HASH(s, u32, u64, 8192);
"""


@pytest.fixture(scope="module")
def maps():
    from dpuprof.record.load.bcc_loader import import_bcc

    bpf = import_bcc().BPF(text=SOURCE)
    h, s = bpf["h"], bpf["s"]
    for i in range(3000):  # more than one batch of 1024
        key = h.Key()
        key.a, key.b = i, i * 3
        h[key] = ct.c_uint64(i * 7)
        s[ct.c_uint32(i)] = ct.c_uint64(i + 1)
    yield h, s
    bpf.cleanup()


def test_snapshot_equals_bccs_walk(maps):
    from dpuprof.record.drain.mapio import snapshot

    h, s = maps
    got = sorted((k.a, k.b, v.value) for k, v in snapshot(h))
    assert got == sorted((k.a, k.b, v.value) for k, v in h.items())
    assert len(got) == 3000 and got[5] == (5, 15, 35)
    ints = sorted((k.value, v.value) for k, v in snapshot(s))  # c_uint32 keys come back as objects
    assert ints == sorted((k.value, v.value) for k, v in s.items()) and len(ints) == 3000
    plain = snapshot(s, plain=True)  # the tree map's reading: Python ints, the same pairs
    assert all(type(k) is int and type(v) is int for k, v in plain) and sorted(plain) == ints
    structs = sorted((k.a, k.b, v) for k, v in snapshot(h, plain=True))  # a structure stays one
    assert structs == got


def test_delete_keys_in_batches_and_past_a_missing_key(maps):
    from dpuprof.record.drain.mapio import delete_keys, snapshot

    h, _ = maps
    even = [k for k, _v in snapshot(h) if k.a % 2 == 0]
    delete_keys(h, even)
    left = [k.a for k, _v in snapshot(h)]
    assert len(left) == 1500 and all(a % 2 for a in left)
    some = [k for k, _v in snapshot(h)][:10]
    del h[some[3]]  # gone before the batch: the kernel stops there, the rest go one by one
    delete_keys(h, some)
    assert len(snapshot(h)) == 1490
