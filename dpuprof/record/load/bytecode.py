"""BPF bytecode outside bcc's module: rewriting its map fds, and loading it as a program.

bcc loads a program from the module it compiled. The compile child (compile_child.py) and the
probe cache (probe_cache.py) have only the bytecode: bcc's instructions with the map fds that
bcc wrote into them, which are another process's or another load's fds."""

from __future__ import annotations

import base64
import ctypes as ct
import os
import platform
import struct

from dpuprof.record.load.libbcc import lib

BPF_TRACE_UPROBE_MULTI = 48  # enum bpf_attach_type (include/uapi/linux/bpf.h)

_BPF_PROG_LOAD = 5
_BPF_PROG_TYPE_KPROBE = 2
_SYS_BPF = {"x86_64": 321, "aarch64": 280}  # the bpf(2) syscall number


def of_function(mod, name: bytes) -> str | None:
    """Function ``name``'s bytecode in bcc module ``mod``, base64 (as the child and the cache
    carry it in JSON); None when the module has no such function."""
    start = lib().bpf_function_start(mod, name)
    if not start:
        return None
    return base64.b64encode(ct.string_at(start, lib().bpf_function_size(mod, name))).decode()


def relocate(insns: bytes, fd_map: dict[int, int]) -> bytes:
    """``insns`` (BPF bytecode) with each map fd that bcc wrote into a 64-bit immediate load
    (BPF_LD | BPF_IMM | BPF_DW with src_reg BPF_PSEUDO_MAP_FD) replaced through ``fd_map``: the
    fds bcc wrote are another process's (the compile child's) or another load's (a cached one).
    An fd missing from ``fd_map`` is a ValueError."""
    out = bytearray(insns)
    i = 0
    while i + 8 <= len(out):
        if out[i] == 0x18:  # ld_imm64: two instruction slots
            if out[i + 1] >> 4 == 1:  # BPF_PSEUDO_MAP_FD
                (fd,) = struct.unpack_from("<i", out, i + 4)
                if fd not in fd_map:
                    raise ValueError(f"bytecode refers to map fd {fd}, which is not among the maps")
                struct.pack_into("<i", out, i + 4, fd_map[fd])
            i += 16
        else:
            i += 8
    return bytes(out)


def prog_load(prog_type: int, name: bytes, insns: bytes, license: bytes, kern_version: int) -> int:
    """libbcc's bcc_prog_load (bcc's Python declares it not): the program's fd; a bare Exception
    with the verifier's first line when the kernel refuses it (as bcc's load_func)."""
    log = ct.create_string_buffer(1 << 16)
    fd = lib().bcc_prog_load(prog_type, name, insns, len(insns), license, kern_version, 0, log, len(log))
    if fd < 0:
        detail = log.value.decode(errors="replace").strip().splitlines()
        raise Exception(f"Failed to load BPF program {name.decode()}: {os.strerror(ct.get_errno() or 22)}"
                        + (f" ({detail[-1]})" if detail else ""))
    os.set_inheritable(fd, False)
    return fd


class _ProgLoadAttr(ct.Structure):
    """The BPF_PROG_LOAD part of union bpf_attr, up to expected_attach_type."""
    _fields_ = [("prog_type", ct.c_uint32), ("insn_cnt", ct.c_uint32), ("insns", ct.c_uint64),
                ("license", ct.c_uint64), ("log_level", ct.c_uint32), ("log_size", ct.c_uint32),
                ("log_buf", ct.c_uint64), ("kern_version", ct.c_uint32), ("prog_flags", ct.c_uint32),
                ("prog_name", ct.c_char * 16), ("prog_ifindex", ct.c_uint32), ("expected_attach_type", ct.c_uint32)]


def load_uprobe_multi(insns: bytes, name: str, license: bytes) -> int:
    """Program ``insns`` loaded as a uprobe-multi program (uprobe_link.py); its fd, or -1 with
    errno set."""
    code, lic = ct.create_string_buffer(insns, len(insns)), ct.create_string_buffer(license)
    attr = _ProgLoadAttr(prog_type=_BPF_PROG_TYPE_KPROBE, insn_cnt=len(insns) // 8, insns=ct.addressof(code),
                         license=ct.addressof(lic), prog_name=name.encode("latin-1")[:15],
                         expected_attach_type=BPF_TRACE_UPROBE_MULTI)
    libc = ct.CDLL(None, use_errno=True)
    libc.syscall.restype = ct.c_long
    return libc.syscall(_SYS_BPF[platform.machine()], _BPF_PROG_LOAD, ct.byref(attr), ct.sizeof(attr))
