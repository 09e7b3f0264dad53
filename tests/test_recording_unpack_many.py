"""packing.unpack_many decodes many packed blobs at once: the same ids as unpack_ids blob by blob,
and None wherever unpack_ids would raise (the reader then names the damage row by row)."""

from __future__ import annotations

import random

import pytest

from dpuprof.recording.packing import MAX_ID, pack_ids, unpack_ids, unpack_many


def _blobs(rng: random.Random) -> list[bytes]:
    values = [0, 1, 127, 128, 16383, 16384, 2 ** 53, MAX_ID]
    return [pack_ids(rng.choice(values + [rng.randint(0, MAX_ID)]) for _ in range(rng.randint(0, 12)))
            for _ in range(rng.randint(0, 30))]


@pytest.mark.parametrize("seed", range(40))
def test_the_same_ids_as_one_blob_at_a_time(seed):
    blobs = _blobs(random.Random(seed))
    got = unpack_many(blobs)
    assert got is not None
    ids, counts = got
    assert counts.tolist() == [len(unpack_ids(b)) for b in blobs]
    assert ids.tolist() == [i for b in blobs for i in unpack_ids(b)]


@pytest.mark.parametrize("bad", [b"\x81", b"\x01\x80", b"\x81" * 9 + b"\x01"])
def test_damage_anywhere_gives_none(bad):
    blobs = [pack_ids([1, 300]), bad, pack_ids([5])]
    with pytest.raises(ValueError):
        unpack_ids(bad)
    assert unpack_many(blobs) is None


def test_nine_bytes_is_the_longest_id_and_fits():
    blob = b"\xff" * 8 + b"\x7f"  # 63 bits set
    assert unpack_ids(blob) == [2 ** 63 - 1]
    assert unpack_many([blob])[0].tolist() == [2 ** 63 - 1]
    assert unpack_many([]) is not None and unpack_many([b""])[1].tolist() == [0]


@pytest.mark.parametrize("name", ["ddp-encrypted", "long"])
def test_reader_fast_path_reads_the_frames_of_the_row_by_row_reader(name, fixture_copy, monkeypatch):
    from dpuprof.recording import load, reader

    rec = fixture_copy(name)
    fast = load(rec)
    monkeypatch.setattr(reader, "unpack_many", lambda blobs: None)  # every table row by row
    slow = load(rec)
    for table in ("cpu_category", "stack_samples", "stacks"):
        a, b = fast.table(table), slow.table(table)
        assert list(a.dtypes) == list(b.dtypes), table
        assert a.equals(b), table
        assert len(a) > 0, table
