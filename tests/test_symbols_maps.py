"""Unit tests of record/stacks/symbols.py's maps view of a process: code lookup, data areas, and when a
miss is worth re-reading /proc/PID/maps for."""

from __future__ import annotations

import ctypes
import os

from conftest import unmapped_address
from dpuprof.record.stacks.procmaps import (GUESS_BACKOFF, MAX_BACKOFF, MIN_MAP_ADDR, USER_SPACE_END, ProcessMaps,
                                           could_be_code, worth_rereading)


def _own():
    return ProcessMaps(os.getpid())


def test_code_address_maps_to_its_library_and_data_is_known_as_data():
    maps = _own()
    libc = ctypes.CDLL(None)
    code = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    path = maps.lookup(code)
    assert path is not None and "libc" in os.path.basename(path), path
    assert not maps.in_data(code)
    buf = ctypes.create_string_buffer(1 << 20)  # heap or an anonymous mapping, not code
    addr = ctypes.addressof(buf)
    maps.reload()
    assert maps.lookup(addr) is None
    assert maps.in_data(addr)


def test_misses_reread_only_for_possible_code_and_back_off_while_nothing_changes():
    maps = ProcessMaps(os.getpid(), generation=3)
    data = ctypes.addressof(ctypes.create_string_buffer(4096))
    maps.reload(3)
    unmapped = unmapped_address(maps)  # a hole: no area holds it
    assert not could_be_code(maps, data)
    assert not could_be_code(maps, MIN_MAP_ADDR - 8)
    assert not could_be_code(maps, 0x8B48000000000000)  # bytes of code taken for an address
    assert could_be_code(maps, unmapped)
    assert not worth_rereading(maps, unmapped, generation=3)  # read in this generation
    # Each re-read that finds the same code doubles the wait, up to MAX_BACKOFF drains.
    gen, gaps = 3, []
    for _ in range(6):
        wait = next(g for g in range(1, 100) if worth_rereading(maps, unmapped, gen + g))
        gaps.append(wait)
        gen += wait
        maps.reload(gen)
    assert gaps == [2, 4, 8, 8, 8, 8] and MAX_BACKOFF == 8, gaps  # the test's reload(3) was the first
    # New code resets the wait: a library loaded after the first read.
    maps.entries = maps.entries[1:]
    maps.starts = maps.starts[1:]
    maps.reload(gen + MAX_BACKOFF)
    assert maps.backoff == 1


def test_an_outer_frames_miss_rereads_the_maps_only_every_guess_backoff_drains():
    """An outer frame of a frame-pointer walk may be a broken walk's guess: beside DDP training
    such misses re-read a rank's maps (0.76 ms each) every MAX_BACKOFF drains. The innermost
    frame is an instruction the process was at, so new code is found from it."""
    maps = ProcessMaps(os.getpid(), generation=10)
    unmapped = unmapped_address(maps)
    assert worth_rereading(maps, unmapped, 10 + maps.backoff)
    assert not worth_rereading(maps, unmapped, 10 + MAX_BACKOFF, exact=False)
    assert worth_rereading(maps, unmapped, 10 + GUESS_BACKOFF, exact=False)
    assert GUESS_BACKOFF > MAX_BACKOFF
