"""Root tests: bcc's internals that dpuprof uses (dpuprof/record/load/libbcc.py) against the
installed bcc, and the maps by fd (load/bpfmap.py) against bcc's own tables on the same kernel maps."""

from __future__ import annotations

import ctypes as ct
import json
import os

import pytest

pytestmark = pytest.mark.root

# Where bcc's Python declares a function with other arguments than its C header, and why ours differ.
BCC_DECLARES_OTHERWISE = {
    "bpf_attach_uprobe": "bcc 0.26's Python leaves out ref_ctr_offset (the 7th argument): garbage is passed",
}

SOURCE = """
struct k { u32 a; u64 b; };
BPF_HASH(h, struct k, u64, 64);
BPF_ARRAY(arr, u64, 4);
BPF_PERCPU_ARRAY(pc, u64, 2);
BPF_PERCPU_ARRAY(pc32, u32, 1);
"""


def test_every_function_is_in_the_installed_libbcc_as_bcc_declares_it():
    from bcc import libbcc as bcc_lib

    from dpuprof.record.load import libbcc
    from dpuprof.record.load.bcc_loader import import_bcc

    import_bcc()
    ours = libbcc.lib()  # raises AttributeError for a symbol the installed libbcc lacks
    for name, (_restype, argtypes) in libbcc.SIGNATURES.items():
        assert getattr(ours, name).argtypes == argtypes
        theirs = getattr(bcc_lib.lib, name).argtypes  # None where bcc's Python declares nothing
        if theirs is not None and name not in BCC_DECLARES_OTHERWISE:
            assert len(theirs) == len(argtypes), name


def test_the_private_helpers_decode_a_type_and_resolve_a_symbol():
    from dpuprof.record.load import libbcc
    from dpuprof.record.load.bcc_loader import import_bcc

    import_bcc()
    struct = libbcc.decode_type(json.loads('["k", [["a","unsigned int"], ["b","unsigned long long"]], "struct"]'))
    assert [f[0] for f in struct._fields_] == ["a", "b"] and ct.sizeof(struct) == 16
    assert libbcc.decode_type("unsigned int") is ct.c_uint
    libc = next(line.split()[-1] for line in open("/proc/self/maps") if "libc.so" in line)
    path, offset = libbcc.resolve_symbol(libc, "getpid")
    assert os.path.samefile(path, libc) and offset > 0
    with pytest.raises(Exception, match="could not determine address"):
        libbcc.resolve_symbol(libc, "no_such_symbol_in_libc")


def test_maps_by_fd_read_what_bccs_tables_read():
    from dpuprof.record.load import bpfmap
    from dpuprof.record.load.bcc_loader import import_bcc

    bpf = import_bcc().BPF(text=SOURCE)
    try:
        def ours(name, map_type, key, leaf, entries):
            return bpfmap.from_description({"name": name, "type": map_type, "max_entries": entries,
                                            "key": json.dumps(key), "leaf": json.dumps(leaf)}, bpf[name].map_fd)

        h = ours("h", 1, ["k", [["a", "unsigned int"], ["b", "unsigned long long"]], "struct"], "unsigned long long", 64)
        theirs = bpf["h"]
        for i in range(10):
            key = theirs.Key()
            key.a, key.b = i, i * 2
            theirs[key] = ct.c_uint64(i * 7)
        assert sorted((k.a, k.b, v.value) for k, v in h.items()) == sorted((k.a, k.b, v.value) for k, v in theirs.items())
        assert h[h.Key(3, 6)].value == 21
        del h[h.Key(3, 6)]
        with pytest.raises(KeyError):
            h[h.Key(3, 6)]
        with pytest.raises(KeyError):
            del h[h.Key(3, 6)]
        assert len(h.keys()) == 9
        h.clear()
        assert h.items() == [] and list(theirs.items()) == []

        arr = ours("arr", 2, "int", "unsigned long long", 4)
        arr[2] = ct.c_uint64(5)
        assert [v.value for v in arr.values()] == [v.value for v in bpf["arr"].values()] == [0, 0, 5, 0]
        arr.clear()
        assert [v.value for v in arr.values()] == [0, 0, 0, 0]

        for name, leaf in (("pc", "unsigned long long"), ("pc32", "unsigned int")):
            pc, bcc_pc = ours(name, 6, "int", leaf, 1), bpf[name]
            bcc_pc[ct.c_int(0)] = bcc_pc.Leaf(*range(1, len(bcc_pc.Leaf()) + 1))
            assert list(pc.getvalue(ct.c_int(0))) == list(bcc_pc.getvalue(ct.c_int(0)))
            assert pc.sum(ct.c_int(0)).value == bcc_pc.sum(ct.c_int(0)).value
            del pc[ct.c_int(0)]  # a per-CPU slot is zeroed
            assert pc.sum(ct.c_int(0)).value == 0
    finally:
        bpf.cleanup()


def test_a_uprobe_falls_back_to_a_perf_event_where_links_are_refused():
    """Where the kernel refuses uprobe-multi links (before Linux 6.6), a uprobe is a perf event
    through libbcc's bpf_attach_uprobe (its seven arguments, ref_ctr_offset 0): it fires, and its
    detach stops it."""
    from dpuprof.record.load import probes, uprobe_link
    from dpuprof.record.load.bcc_loader import import_bcc

    loaded, used, _ = probes.load(import_bcc().BPF, ["proc_tree", "cpu_sample", "uprobes"])
    try:
        assert "uprobes" in used
        loaded.multi_refused = "refused here, to take the other way"
        libc = next(line.split()[-1] for line in open("/proc/self/maps") if "libc.so" in line)
        fd = uprobe_link.attach(loaded, libc, "getpid", "on_ddp_step")  # counts a hit in slot 29
        assert fd in loaded.uprobe_events and not loaded.links
        hits = loaded["hits"]
        before = hits.sum(ct.c_int(29)).value
        for _ in range(10):
            os.getpid()
        assert hits.sum(ct.c_int(29)).value >= before + 10
        loaded.detach_uprobe(fd)
        assert not loaded.uprobe_events
        after = hits.sum(ct.c_int(29)).value
        os.getpid()
        assert hits.sum(ct.c_int(29)).value == after
    finally:
        loaded.close()
