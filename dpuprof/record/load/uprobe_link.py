"""uprobes as BPF links (``BPF_TRACE_UPROBE_MULTI``, Linux >= 6.6) rather than perf events.

Why: a uprobe attached as a perf event (bcc's way) waits for grace periods under a global lock
when it is closed, one detach after another (about 0.1 s each on the 2-vCPU development VM, 1.5 s
for the 15 of a DDP run with --codec-uprobes, closed in parallel or not). A uprobe-multi link's
release waits too, but without that lock, so links closed together wait once: 15 took 0.06-0.1 s
there. The programs are the same; only the attachment differs (each uprobe function is loaded
with the uprobe-multi attach type: the compile child checks that the kernel takes such a program,
and the recorder loads its copies from the entry: bytecode.load_uprobe_multi). Where the kernel refuses a
link, ``attach`` attaches a perf-event uprobe instead (after ENOSYS/EOPNOTSUPP, every later one
too). The links are kept in the LoadedProbes (``links``), which closes them with the rest.
"""

from __future__ import annotations

import ctypes as ct
import errno
import os

from dpuprof.record.load.bytecode import BPF_TRACE_UPROBE_MULTI
from dpuprof.record.load.libbcc import resolve_symbol

_NR_BPF = 321 if os.uname().machine == "x86_64" else 280  # aarch64 (asm-generic)
_BPF_LINK_CREATE = 28
BPF_F_UPROBE_MULTI_RETURN = 1
_libc = ct.CDLL(None, use_errno=True)


class _UprobeMultiAttr(ct.Structure):
    # union bpf_attr, the BPF_LINK_CREATE member with its uprobe_multi arm (UAPI, stable).
    _fields_ = [("prog_fd", ct.c_uint32), ("target_fd", ct.c_uint32), ("attach_type", ct.c_uint32),
                ("flags", ct.c_uint32), ("path", ct.c_uint64), ("offsets", ct.c_uint64),
                ("ref_ctr_offsets", ct.c_uint64), ("cookies", ct.c_uint64), ("cnt", ct.c_uint32),
                ("um_flags", ct.c_uint32), ("pid", ct.c_uint32), ("_pad", ct.c_uint32 * 8)]


def link_create(prog_fd: int, path: bytes, offset: int, ret: bool) -> int:
    """A uprobe-multi link of ``prog_fd`` at file ``offset`` of ``path`` (a uretprobe when
    ``ret``); returns its fd or raises OSError."""
    path_buf = ct.create_string_buffer(path)
    offsets = (ct.c_uint64 * 1)(offset)
    attr = _UprobeMultiAttr(prog_fd=prog_fd, attach_type=BPF_TRACE_UPROBE_MULTI,
                            path=ct.addressof(path_buf), offsets=ct.addressof(offsets), cnt=1,
                            um_flags=BPF_F_UPROBE_MULTI_RETURN if ret else 0)
    fd = _libc.syscall(_NR_BPF, _BPF_LINK_CREATE, ct.byref(attr), ct.sizeof(attr))
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def attach(probes, name: str, sym: str, fn_name: str, ret: bool = False) -> int:
    """Attach function ``fn_name`` of ``probes`` (loaded.LoadedProbes) to ``sym`` in file
    ``name``: a uprobe-multi link, or a perf-event uprobe where the kernel refuses links. Its fd
    (``probes.detach_uprobe`` closes it). Raises a bare Exception when the symbol cannot be
    resolved (as bcc), OSError when neither attachment is possible.

    A refusal is not only an old kernel: a uprobe at the same place registered with another
    ref_ctr_offset (by another tool) is refused too ("ref_ctr_offset mismatch" in dmesg)."""
    path, addr = resolve_symbol(name, sym)
    if probes.multi_refused is None and fn_name in probes.multi:
        try:
            fd = link_create(probes.multi[fn_name], path, addr, ret)
        except OSError as err:
            if err.errno in (errno.ENOSYS, errno.EOPNOTSUPP):
                probes.multi_refused = f"uprobe-multi link refused ({err.strerror})"
        else:
            os.set_inheritable(fd, False)
            probes.links[(path, addr, ret, fn_name)] = fd
            return fd
    return probes.attach_uprobe(path, addr, fn_name, ret)
