"""Unit tests of user-frame resolution that outlives the process: ELF symbols by file offset
(record/stacks/elfsyms.py), maps captured at exec and kept until drained (Symbolizer.capture,
dead, forget, a forked child borrowing its parent's maps), and the exec watcher's schedule
(record/drain/execs.py). No root needed: nothing here loads a probe."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

from conftest import poll_until, unmapped_address
from dpuprof.record.drain.execs import ExecWatcher
from dpuprof.record.stacks.elfsyms import ElfSymbols, demangle
from dpuprof.record.stacks.procmaps import MAX_BACKOFF, USER_SPACE_END, ProcessMaps, worth_rereading
from dpuprof.record.stacks.symbols import UNKNOWN, Symbolizer


class _NoKernel:
    @staticmethod
    def ksym(addr):
        return b"k"


def _libc_getpid() -> tuple[int, tuple]:
    """getpid's address in this process (from the dynamic linker) and the mapping holding it."""
    addr = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value
    entry = ProcessMaps(os.getpid()).mapping(addr)
    assert entry is not None
    return addr, entry


def test_elf_symbols_name_a_file_offset_as_the_dynamic_linker_does():
    addr, (start, _end, path, offset, _inode) = _libc_getpid()
    elf = ElfSymbols(path)
    assert elf.build_id and len(elf.starts) > 1000, (elf.build_id, len(elf.starts))
    assert elf.name(addr - start + offset) in ("getpid", "__getpid")
    assert elf.name(0) is None  # the ELF header is in no function
    assert ElfSymbols("/nonexistent").name(0) is None
    assert len(ElfSymbols(sys.argv[0] if sys.argv[0].endswith(".py") else __file__).starts) == 0  # not ELF


def test_cxx_names_are_demangled_and_c_names_kept():
    assert demangle("_ZN4gloo3sumIfEEvPvPKvS3_m") == "void gloo::sum<float>(void*, void const*, void const*, unsigned long)"
    assert demangle("aesni_ctr32_encrypt_blocks") == "aesni_ctr32_encrypt_blocks"
    assert demangle("_Znot a mangled name") == "_Znot a mangled name"


def test_maps_captured_while_alive_resolve_after_exit_until_forgotten():
    sym = Symbolizer(_NoKernel)
    child = subprocess.Popen([sys.executable, "-c", "print(flush=True); import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdout.readline()  # its libraries are mapped
        assert sym.capture(child.pid)
    finally:
        child.communicate(b"")
    # The child's libc is this process's libc (same file), at an address of its own.
    _addr, (_s, _e, path, offset, inode) = _libc_getpid()
    theirs = next(e for e in sym._maps[child.pid].entries if e[2] == path and e[3] == offset)
    frame = sym.user(child.pid, theirs[0] + (_addr - _s), symbols=True)
    assert frame in ("getpid (libc.so.6)", "__getpid (libc.so.6)"), frame
    assert not sym.capture(child.pid)  # gone: the maps read while it lived stay
    held = sym._maps[child.pid]
    hole = unmapped_address(held)
    assert worth_rereading(held, hole, 100)
    assert not held.reload(5) and held.gone and held.entries
    assert not worth_rereading(held, hole, 100)  # gone: no retry per miss
    assert child.pid in sym.dead()
    sym.forget(sym.dead())
    assert child.pid not in sym._maps and child.pid not in sym.dead()


def test_exec_replaces_the_image_and_drops_its_cached_frames():
    sym = Symbolizer(_NoKernel)
    pid = os.getpid()
    addr, _entry = _libc_getpid()
    sym.user(pid, addr)
    assert addr in sym._ucache[pid]
    sym._maps[pid].entries = sym._maps[pid].entries[1:]  # as if the image had changed
    assert sym.capture(pid)
    assert pid not in sym._ucache


def test_a_forked_child_gone_before_its_maps_were_read_borrows_its_parents():
    parent = os.getpid()
    gone = 2 ** 22 + 12345  # above pid_max's default: no such process
    sym = Symbolizer(_NoKernel, parent_of=lambda pid: parent if pid == gone else None)
    addr, _entry = _libc_getpid()
    assert sym.user(gone, addr) == UNKNOWN  # the parent's maps are not held yet
    sym.forget([gone])
    assert sym.capture(parent)
    assert sym.user(gone, addr) in ("getpid (libc.so.6)", "__getpid (libc.so.6)")


class _FakeMap(dict):
    """The bcc hash map's interface as ExecWatcher uses it: items() of ctypes keys and values."""

    def items(self):
        return [(ctypes.c_uint32(k), ctypes.c_uint64(v)) for k, v in dict.items(self)]

    def __delitem__(self, key):
        dict.__delitem__(self, key.value)


def test_watcher_reads_each_exec_at_its_ages_and_stops_when_the_process_is_gone():
    execs = _FakeMap({7: 1_000_000, 8: 1_000_000})
    calls = []
    alive = {7}
    watcher = ExecWatcher(execs, lambda pid: calls.append(pid) or pid in alive, ages=(0.005, 0.05, 0.5))
    ms = 1_000_000
    watcher.poll_once(1 * ms + 2 * ms)  # 2 ms after exec: too early
    assert calls == [] and not execs and set(watcher.pending) == {7, 8}
    watcher.poll_once(1 * ms + 6 * ms)
    assert sorted(calls) == [7, 8] and set(watcher.pending) == {7}  # 8 had exited
    watcher.poll_once(1 * ms + 600 * ms)  # late: one read for the two ages passed
    assert sorted(calls) == [7, 7, 8] and not watcher.pending and watcher.captures == 2
    execs[7] = 700 * ms  # exec'd again: starts over
    watcher.poll_once(706 * ms)
    assert calls[-1] == 7 and watcher.pending == {7: (700 * ms, 1)}


class _FakeWake:
    """The perf buffer ExecWatcher sleeps on: a pipe, readable once an exec was written."""

    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)

    def open_perf_buffer(self, callback, page_cnt=8, lost_cb=None):
        pass

    def reader_fds(self):
        return [self.r]

    def poll(self, timeout_ms=0):
        try:
            os.read(self.r, 4096)
        except BlockingIOError:
            pass

    def exec(self, execs, pid):
        execs[pid] = time.monotonic_ns()
        os.write(self.w, b"x")


def test_watcher_sleeps_until_an_exec_wakes_it_and_stops_at_once():
    execs, wake, calls = _FakeMap(), _FakeWake(), []
    watcher = ExecWatcher(execs, lambda pid: calls.append(pid) or False, wake=wake)
    passes = []
    real = watcher.poll_once
    watcher.poll_once = lambda now: passes.append(now) or real(now)
    watcher.start()
    try:
        time.sleep(0.2)  # a negative check: nothing happens while no exec comes
        assert passes == []
        wake.exec(execs, 42)
        assert poll_until(lambda: calls == [42], timeout=5, every=0.005)
        assert poll_until(lambda: not watcher.pending, timeout=5, every=0.005)  # gone: nothing more to read
    finally:
        thread = watcher._thread
        watcher.stop()  # wakes the thread through its own pipe: no timed wait to run out
    assert not thread.is_alive()
    os.close(wake.r)
    os.close(wake.w)


def test_a_user_walk_is_cut_where_a_return_address_lies_in_data():
    """From the leaf outwards, the first address in the process's data (a frame-pointer walk
    through code without frame pointers) ends the stack as one UNKNOWN root frame: the addresses
    outward of it were read through the same broken chain. An address that may still be code
    (unmapped: not yet read in the maps) does not cut."""
    sym = Symbolizer(_NoKernel)
    code, _entry = _libc_getpid()
    heap = ctypes.addressof(ctypes.create_string_buffer(1 << 16))
    pid = os.getpid()
    sym._process_maps(pid).reload()  # the buffer's mapping is known
    whole = sym.user_stack(pid, (code, code, heap + 64, heap, code))
    assert whole == [UNKNOWN, whole[-1]] and whole[-1].endswith("(libc.so.6)"), whole
    assert sym.user_stack(pid, (heap, heap + 8)) == [UNKNOWN]
    assert sym.user_stack(pid, (code, USER_SPACE_END + 4096, code)) == [UNKNOWN, whole[-1]]
    intact = sym.user_stack(pid, (code, code))
    assert intact == [whole[-1], whole[-1]]
    hole = unmapped_address(sym._process_maps(pid))
    assert sym.user_stack(pid, (code, hole, code)) == [whole[-1], UNKNOWN, whole[-1]]


def test_only_a_stacks_innermost_frame_rereads_the_maps_for_a_miss():
    """A miss in an outer frame (unmapped: it may be a broken walk's guess) leaves the maps as they
    were read; the same address as the innermost frame (where the process was) re-reads them."""
    sym = Symbolizer(_NoKernel)
    code, _entry = _libc_getpid()
    pid = os.getpid()
    maps = sym._process_maps(pid)
    hole = unmapped_address(maps)
    for _ in range(MAX_BACKOFF + 1):
        sym.new_generation()
    read_in = maps.read_in
    assert sym.user_stack(pid, (hole, code))[0] == UNKNOWN  # outermost first: hole is an outer frame
    assert maps.read_in == read_in
    assert sym.user_stack(pid, (code, hole))[-1] == UNKNOWN  # hole is the innermost frame
    assert maps.read_in == sym._generation
