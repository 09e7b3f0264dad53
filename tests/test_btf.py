"""dpuprof.record.load.btf: struct member offsets from BTF, on a hand-built blob and on this kernel."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from dpuprof.record.load import btf
from dpuprof.record.load.btf import Btf, BtfError


def _blob(types: list[bytes], strings: list[str]) -> tuple[bytes, dict[str, int]]:
    """A BTF blob: header, the packed ``types``, the string section; and {string: offset}."""
    offs, sec = {}, b"\0"
    for s in strings:
        offs[s] = len(sec)
        sec += s.encode() + b"\0"
    tsec = b"".join(types)
    hdr = struct.pack("<HBBIIIII", btf.MAGIC, 1, 0, 24, 0, len(tsec), len(tsec), len(sec))
    return hdr + tsec + sec, offs


def _t(name_off, kind, vlen, size_or_type, kflag=False, extra=b""):
    info = (kind << 24) | vlen | (1 << 31 if kflag else 0)
    return struct.pack("<III", name_off, info, size_or_type) + extra


def _members(*items):
    return b"".join(struct.pack("<III", n, t, o) for n, t, o in items)


@pytest.fixture
def synthetic():
    names = ["u32", "char", "dev", "next", "len", "sk_buff", "name", "net_device", "flags", "bits", "u32_t"]
    _, s = _blob([], names)
    types = [
        _t(s["u32"], btf.INT, 0, 4, extra=struct.pack("<I", 32)),                        # 1
        _t(s["char"], btf.INT, 0, 1, extra=struct.pack("<I", 8)),                        # 2
        _t(0, btf.PTR, 0, 8),                                                            # 3: net_device *
        _t(0, btf.ARRAY, 0, 0, extra=struct.pack("<III", 2, 1, 16)),                      # 4: char[16]
        _t(s["net_device"], btf.STRUCT, 2, 40, extra=_members((s["flags"], 1, 0), (s["name"], 4, 64))),  # 5
        _t(0, btf.UNION, 2, 8, extra=_members((s["dev"], 3, 0), (s["bits"], 1, 0))),        # 6: anon union
        _t(0, btf.STRUCT, 2, 16, extra=_members((s["next"], 3, 0), (0, 6, 64))),           # 7: anon struct
        _t(s["u32_t"], btf.TYPEDEF, 0, 1),                                               # 8
        _t(0, btf.CONST, 0, 8),                                                          # 9
        # sk_buff: anon struct at 0, len (const u32_t) at byte 24, a 3-bit bitfield at bit 226
        _t(s["sk_buff"], btf.STRUCT, 3, 32, kflag=True,
           extra=_members((0, 7, 0), (s["len"], 9, 192), (s["flags"], 1, (3 << 24) | 226))),  # 10
    ]
    data, _ = _blob(types, names)
    return Btf(data)


def test_offsets_through_anonymous_members_and_qualifiers(synthetic):
    assert synthetic.member("sk_buff", "dev") == btf.Member(8, 8)    # anon struct -> anon union
    assert synthetic.member("sk_buff", "next") == btf.Member(0, 8)
    assert synthetic.member("sk_buff", "len") == btf.Member(24, 4)   # const typedef u32: 4 bytes
    assert synthetic.member("net_device", "name") == btf.Member(8, 16)  # char[16]
    assert synthetic.name(synthetic.find("net_device")) == "net_device"


def test_enumerators_of_enum_and_enum64():
    names = ["req_op", "REQ_OP_READ", "REQ_OP_DRV_IN", "big", "NEG", "HUGE"]
    _, s = _blob([], names)
    types = [
        _t(s["req_op"], btf.ENUM, 2, 4, extra=struct.pack("<IIII", s["REQ_OP_READ"], 0, s["REQ_OP_DRV_IN"], 34)),
        _t(s["big"], btf.ENUM64, 2, 8, kflag=True,  # signed: the high bit makes a negative value
           extra=struct.pack("<IIIIII", s["NEG"], 0xFFFFFFFE, 0xFFFFFFFF, s["HUGE"], 1, 2)),
    ]
    data, _ = _blob(types, names)
    b = Btf(data)
    assert b.enumerator("REQ_OP_READ") == 0 and b.enumerator("REQ_OP_DRV_IN") == 34
    assert b.enumerator("NEG") == -2 and b.enumerator("HUGE") == (2 << 32) | 1
    with pytest.raises(BtfError, match="no enumerator"):
        b.enumerator("REQ_OP")  # a prefix of a name is not the name
    with pytest.raises(BtfError, match="no enumerator"):
        b.enumerator("req_op")  # a type's name is not an enumerator


def test_errors_are_btf_errors(synthetic):
    with pytest.raises(BtfError, match="no member"):
        synthetic.member("sk_buff", "nope")
    with pytest.raises(BtfError, match="bitfield"):
        synthetic.member("sk_buff", "flags")
    with pytest.raises(BtfError, match="no struct"):
        synthetic.member("task_struct", "mm")
    with pytest.raises(BtfError, match="magic"):
        Btf(b"\0" * 32)
    with pytest.raises(BtfError, match="cannot read"):
        Btf.load("/nonexistent/vmlinux")


def test_per_cpu_variables_from_the_per_cpu_section_only():
    names = ["int", "__preempt_count", "runqueues", ".data..percpu", ".data", "jiffies"]
    _, s = _blob([], names)
    types = [
        _t(s["int"], btf.INT, 0, 4, extra=struct.pack("<I", 32)),                    # 1
        _t(s["__preempt_count"], btf.VAR, 0, 1, extra=struct.pack("<I", 1)),          # 2
        _t(s["runqueues"], btf.VAR, 0, 1, extra=struct.pack("<I", 1)),                # 3
        _t(s["jiffies"], btf.VAR, 0, 1, extra=struct.pack("<I", 1)),                  # 4
        _t(s[".data"], btf.DATASEC, 1, 8, extra=struct.pack("<III", 4, 64, 8)),       # 5: not per-CPU
        _t(s[".data..percpu"], btf.DATASEC, 2, 4096,
           extra=struct.pack("<IIIIII", 2, 16, 4, 3, 512, 3584)),                    # 6
    ]
    data, _ = _blob(types, names)
    b = Btf(data)
    assert b.percpu_var("__preempt_count") == btf.Member(16, 4)
    assert b.percpu_var("runqueues") == btf.Member(512, 3584)
    with pytest.raises(BtfError, match="no per-CPU variable"):
        b.percpu_var("jiffies")  # a variable of another section


@pytest.mark.skipif(not btf.VMLINUX.exists() or not shutil.which("bpftool"), reason="needs BTF and bpftool")
def test_per_cpu_offsets_match_bpftool():
    """sched_wait finds the preempt count at __preempt_count's distance from runqueues."""
    dump = subprocess.run(["bpftool", "btf", "dump", "file", str(btf.VMLINUX)], capture_output=True,
                          text=True, check=True).stdout
    section = dump[dump.index("DATASEC '.data..percpu'"):]
    k = Btf.load()
    for name in ("__preempt_count", "runqueues"):
        line = next(ln for ln in section.splitlines() if f"(VAR '{name}')" in ln)
        offset, size = (int(ln.split("=")[1]) for ln in line.split()[1:3])
        assert k.percpu_var(name) == btf.Member(offset, size)


# Members whose offsets the probes use, plus a few deep in big structs as a check of the reader.
KERNEL_MEMBERS = [("sk_buff", "len"), ("sk_buff", "dev"), ("net_device", "name"),
                  ("request", "q"), ("request", "cmd_flags"), ("request_queue", "disk"),
                  ("gendisk", "major"), ("gendisk", "first_minor"),
                  ("net_device", "ifindex"), ("task_struct", "mm"), ("task_struct", "tgid"),
                  ("sock", "sk_rcvbuf"), ("file", "f_inode")]
KERNEL_ENUMS = ["__REQ_FAILFAST_DEV", "REQ_OP_READ", "REQ_OP_WRITE", "REQ_OP_DRV_IN", "TCP_CLOSE"]


@pytest.mark.skipif(not btf.VMLINUX.exists() or not shutil.which("bpftool") or not shutil.which("gcc"),
                    reason="needs /sys/kernel/btf/vmlinux, bpftool and gcc")
def test_offsets_match_the_compiler_on_bpftool_vmlinux_h(tmp_path):
    """Ground truth: the C compiler's offsetof on the header bpftool generates from the same BTF."""
    header = tmp_path / "vmlinux.h"
    with open(header, "w") as fh:
        subprocess.run(["bpftool", "btf", "dump", "file", str(btf.VMLINUX), "format", "c"], stdout=fh, check=True)
    prints = "\n".join(f'printf("%lu\\n", (unsigned long)&((struct {s} *)0)->{m});' for s, m in KERNEL_MEMBERS)
    prints += "\n".join(f'printf("%ld\\n", (long){e});' for e in KERNEL_ENUMS)
    src = tmp_path / "off.c"
    src.write_text(f'#include "vmlinux.h"\nint printf(const char *, ...);\nint main(void) {{ {prints} return 0; }}\n')
    subprocess.run(["gcc", "-w", "-o", str(tmp_path / "off"), str(src)], check=True)
    truth = [int(x) for x in subprocess.run([str(tmp_path / "off")], capture_output=True, text=True,
                                            check=True).stdout.split()]
    k = Btf.load()
    assert [k.member(s, m).offset for s, m in KERNEL_MEMBERS] + [k.enumerator(e) for e in KERNEL_ENUMS] == truth
    assert k.member("sk_buff", "len").size == 4 and k.member("net_device", "name").size == 16
