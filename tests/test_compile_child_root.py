"""Root tests: the probes compile in a short-lived child process (dpuprof/record/load/compile_child.py)
into an entry, and the recorder loads working probes from it without ever holding the compiler."""

from __future__ import annotations

import os
import time

import pytest

from conftest import open_fds
from dpuprof.errors import UserError

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _no_stored_entries(monkeypatch):
    """These tests are about the child compile: no stored entry is used or written."""
    from dpuprof.record.load import probe_cache

    monkeypatch.setenv(probe_cache.ENV, "off")


def _key(wanted):
    return "-".join(wanted)


def test_default_compiles_in_a_child():
    from dpuprof.record.load import compile_child
    from dpuprof.record.load.bcc_loader import import_bcc

    def load_fn(bpf_cls, wanted):
        raise UserError(f"loaded in {os.getpid()}")  # comes back from the child as it is

    with pytest.raises(UserError) as raised:
        compile_child.load(import_bcc().BPF, [], load_fn, (), _key)
    assert str(raised.value) != f"loaded in {os.getpid()}"


def _rss_file_kb(lib: str) -> int:
    """kB of this process's RSS in mappings of ``lib``."""
    total, cur = 0, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split(None, 5)
            if len(head) >= 5 and "-" in head[0] and len(head[1]) == 4:
                cur = len(head) == 6 and lib in head[5]
            elif cur and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_probes_compiled_in_a_child_work_here_and_close_cleanly():
    from dpuprof.record.load import probes
    from dpuprof.record.load.bcc_loader import import_bcc

    bcc = import_bcc()
    before = open_fds()
    bpf, used, unavailable = probes.load(bcc.BPF, ["proc_tree", "cpu_sample", "uprobes"])
    try:
        assert type(bpf).__name__ == "LoadedProbes"
        assert used == ["proc_tree", "cpu_sample", "uprobes"] and unavailable == {}
        # The compile ran elsewhere: this process holds (almost) none of libclang's pages.
        assert _rss_file_kb("libclang-cpp") < 8 * 1024
        new = open_fds() - before
        assert new and not any(os.get_inheritable(fd) for fd in new)  # the command inherits no probe
        bpf.attach_perf_event("on_sample", bcc.PerfType.SOFTWARE, bcc.PerfSWConfig.CPU_CLOCK, 99)
        end = time.time() + 0.5
        while time.time() < end:
            pass  # on-CPU, so the sampler fires
        counts = bpf["counts"]
        assert counts.max_entries > 0 and len(list(counts.items())) > 0  # the shipped map is live
        tree = bpf["tree"]
        tree[tree.Key(os.getpid())] = tree.Leaf(0)  # seeded as the recorder seeds the command
        pid = os.fork()  # proc_tree's fork tracepoint, attached by the child, follows this fork
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        assert tree[tree.Key(pid)].value == os.getpid()
        # A kprobe-type copy of a uprobe function loads here from the child's bytecode, its
        # map fds rewritten to this process's (the verifier refuses an fd that is not a map).
        fd = bpf.program("on_ddp_step")
        assert fd >= 0 and not os.get_inheritable(fd) and bpf.program("on_ddp_step") == fd
        with pytest.raises(Exception, match="cannot load"):
            bpf.program("no_such_function")
    finally:
        bpf.close()
    assert open_fds() - before == set()  # every map, program and attachment closed


def test_a_child_that_delivers_nothing_is_one_clear_error():
    from dpuprof.record.load import compile_child
    from dpuprof.record.load.bcc_loader import import_bcc

    def load_fn(bpf_cls, wanted):
        os._exit(3)  # the child dies before writing anything

    with pytest.raises(UserError, match=r"compile child ended without a result \(exit status 3\)"):
        compile_child.load(import_bcc().BPF, ["x"], load_fn, (), _key)


def test_a_user_error_in_the_child_is_raised_here():
    from dpuprof.record.load import compile_child
    from dpuprof.record.load.bcc_loader import import_bcc

    def load_fn(bpf_cls, wanted):
        raise UserError("DPUPROF_MAP_ENTRIES: expected NAME=ENTRIES")

    with pytest.raises(UserError, match="DPUPROF_MAP_ENTRIES"):
        compile_child.load(import_bcc().BPF, ["x"], load_fn, (), _key)


def test_a_compile_that_raises_is_one_line_and_no_probes_is_none():
    from dpuprof.record.load import compile_child
    from dpuprof.record.load.bcc_loader import import_bcc

    def broken(bpf_cls, wanted):
        raise Exception("clang: error: no such header\nmore detail")  # bcc raises bare Exceptions

    with pytest.raises(UserError, match=r"^cannot compile the probes: clang: error: no such header$"):
        compile_child.load(import_bcc().BPF, ["x"], broken, (), _key)
    unavailable = {"x": "tracepoint missing on this kernel: a:b"}
    assert compile_child.load(import_bcc().BPF, ["x"], lambda c, w: (None, [], unavailable), (), _key) == \
        (None, [], unavailable)


def test_relocate_rewrites_only_map_fd_immediates():
    import struct

    from dpuprof.record.load.bytecode import relocate

    def insn(code, regs, off, imm):
        return struct.pack("<BBhi", code, regs, off, imm)

    prog = (insn(0x18, 0x11, 0, 7) + insn(0, 0, 0, 0)      # r1 = map fd 7 (ld_imm64, 2 slots)
            + insn(0x18, 0x02, 0, 7) + insn(0, 0, 0, 7)    # r2 = the constant 7: not a map
            + insn(0xb7, 0x01, 0, 7)                       # r1 = 7 (mov)
            + insn(0x95, 0, 0, 0))                         # exit
    out = relocate(prog, {7: 42})
    assert struct.unpack_from("<i", out, 4)[0] == 42
    assert out[8:] == prog[8:]
    with pytest.raises(ValueError):
        relocate(prog, {})
