"""Packed frame-id lists of schema v3 (``stack_list.frames``).

Each frame id is written in base 128, most significant group first; every byte of an id but its
last has the top bit set (the variable-length quantity of MIDI and of ASN.1 object ids). A stack
of 12 frames with ids below 16384 takes 24 bytes, against 40 as space-separated decimal text.
Most significant first makes the SQL view that unpacks it (``schema.VIEWS``) a running
``acc * 128 + low7`` with no shift to carry.
"""

from __future__ import annotations

from itertools import accumulate

#: Ids above this are damage (and would not fit SQLite's 64-bit integers once read back).
MAX_ID = (1 << 62) - 1
#: Longest encoding of one id (62 bits in 7-bit groups).
_MAX_BYTES = 9
#: The shifts of an id's leading 7-bit groups, by its number of groups less one.
_SHIFTS = [tuple(range(k * 7, 0, -7)) for k in range(_MAX_BYTES)]


def pack_ids(ids) -> bytes:
    """The packed bytes of the non-negative integers ``ids`` (in order)."""
    out = bytearray()
    append = out.append
    for value in ids:
        if type(value) is not int:  # numpy integers, floats: whole values only
            if value != int(value):
                raise ValueError(f"packed value {value} is not an integer from 0 to 2**62-1")
            value = int(value)
        if 0 <= value < 0x80:  # most values (deltas, small ids, counts): one byte, one append
            append(value)
            continue
        if not 0 <= value <= MAX_ID:
            raise ValueError(f"packed value {value} is not an integer from 0 to 2**62-1")
        for shift in _SHIFTS[(value.bit_length() - 1) // 7]:
            append(0x80 | (value >> shift) & 0x7F)
        append(value & 0x7F)
    return bytes(out)


def unpack_ids(data: bytes) -> list[int]:
    """The ids packed in ``data``; ValueError if it is not a whole number of ids."""
    ids, acc, width = [], 0, 0
    for byte in data:
        acc = (acc << 7) | (byte & 0x7F)
        width += 1
        if byte < 0x80:
            ids.append(acc)
            acc, width = 0, 0
        elif width >= _MAX_BYTES:
            raise ValueError("frame id longer than 9 bytes")
    if width:
        raise ValueError("packed frame ids end in the middle of an id")
    return ids


def pack_counts(counts: dict[int, int]) -> bytes:
    """``{stack_id: samples}`` as packed (stack_id, samples) pairs, stack_id ascending."""
    return pack_ids(v for item in sorted(counts.items()) for v in item)


def unpack_counts(data: bytes) -> list[tuple[int, int]]:
    """The (stack_id, samples) pairs of ``pack_counts``; ValueError if ``data`` is not pairs."""
    ids = unpack_ids(data)
    if len(ids) % 2:
        raise ValueError("packed counts hold an odd number of values")
    return list(zip(ids[0::2], ids[1::2]))


def zigzag(value: int) -> int:
    """A signed integer as a non-negative one (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...), so a small
    negative delta stays one byte."""
    return value * 2 if value >= 0 else -value * 2 - 1


def unzigzag(value: int) -> int:
    """The inverse of ``zigzag``."""
    return -(value + 1) // 2 if value & 1 else value // 2


def pack_tuples(rows, codes: str) -> bytes:
    """Integer tuples of ``len(codes)`` fields, packed in order (schema v4's per-thread blobs).

    ``codes`` gives each field's coding: ``u`` the value (>= 0), ``z`` a signed value zigzagged,
    ``d`` the difference from the previous tuple's field (the first tuple's from 0), zigzagged:
    a field that repeats or rises slowly (a sorted tid) costs one byte."""
    prev = [0] * len(codes)
    out = []
    for row in rows:
        if len(row) != len(codes):
            raise ValueError(f"packed tuple {row!r} does not have {len(codes)} fields")
        for i, (code, value) in enumerate(zip(codes, row)):
            if code == "d":
                out.append(zigzag(value - prev[i]))
                prev[i] = value
            else:
                out.append(zigzag(value) if code == "z" else value)
    return pack_ids(out)


def unpack_tuples(data: bytes, codes: str) -> list[tuple]:
    """The tuples of ``pack_tuples``; ValueError if ``data`` is not whole tuples."""
    values = unpack_ids(data)
    width = len(codes)
    if len(values) % width:
        raise ValueError(f"packed rows are not whole tuples of {width} values")
    # Column by column: a "d" column is the running sum of its deltas.
    cols = []
    for i, code in enumerate(codes):
        col = values[i::width]
        if code != "u":
            col = map(unzigzag, col)
        cols.append(accumulate(col) if code == "d" else col)
    return list(zip(*cols))


def unpack_many(blobs: list[bytes]):
    """The ids of all ``blobs`` at once: ``(ids, counts)``, numpy int64 arrays of every id in order
    and of how many ids each blob holds; None when some blob is not a whole number of ids of at
    most ``_MAX_BYTES`` bytes (decode those with ``unpack_ids`` for the error). The same ids as
    ``unpack_ids`` blob by blob, decoded in a few array passes instead of a Python loop per byte."""
    import numpy as np  # noqa: PLC0415 -- numpy: the recorder and agent import dpuprof.recording without it

    lens = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    if not data.size:
        return np.zeros(0, dtype=np.int64), np.zeros(len(blobs), dtype=np.int64)
    last = data < 0x80  # the last byte of each id
    bounds = np.cumsum(lens)
    if not last[bounds[lens > 0] - 1].all():  # a blob ends in the middle of an id
        return None
    ends = np.flatnonzero(last)
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    widths = ends - starts + 1
    if int(widths.max()) > _MAX_BYTES:
        return None
    low = (data & 0x7F).astype(np.int64)
    ids = low[starts].copy()
    for k in range(1, int(widths.max())):  # at most 9 bytes: 63 bits, within int64
        more = widths > k
        ids[more] = (ids[more] << 7) | low[starts[more] + k]
    seen = np.concatenate(([0], np.cumsum(last)))  # ids ended before each byte offset
    return ids, seen[bounds] - seen[bounds - lens]
