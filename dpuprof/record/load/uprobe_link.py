"""uprobes as BPF links (``BPF_TRACE_UPROBE_MULTI``, Linux >= 6.6) rather than bcc's perf events.

Why: bcc 0.26 attaches a uprobe as a perf event, and closing one waits for grace periods under a
global lock, one detach after another (about 0.1 s each on the 2-vCPU development VM, 1.5 s for
the 15 of a DDP run with --codec-uprobes, closed in parallel or not). A uprobe-multi link's
release waits too, but without that lock, so links closed together wait once: 15 took 0.06-0.1 s
there. The programs are the same; only the attachment differs (each is loaded a second time with
the uprobe-multi attach type). Where the kernel refuses a link, ``attach`` returns None and that
attachment goes through bcc (after ENOSYS/EOPNOTSUPP, every later one too).

The link and program fds are kept on the bcc object (``bpf.dpuprof_links``,
``bpf.dpuprof_multi_funcs``) so that the cleanup in dpuprof/record/load/probes.py closes them together
with the tracepoints, and record/drain/progstats.py counts the programs.
"""

from __future__ import annotations

import ctypes as ct
import errno
import os

_NR_BPF = 321 if os.uname().machine == "x86_64" else 280  # aarch64 (asm-generic)
_BPF_LINK_CREATE = 28
BPF_TRACE_UPROBE_MULTI = 48  # enum bpf_attach_type (include/uapi/linux/bpf.h)
BPF_F_UPROBE_MULTI_RETURN = 1
_libc = ct.CDLL(None, use_errno=True)
_unsupported: list[str] = []  # the reason, once the kernel refused a link (for this process)


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


def attach(bpf, name: str, sym: str, fn_name: str, ret: bool = False) -> int | None:
    """Attach BPF function ``fn_name`` to ``sym`` in file ``name`` as a link; its fd, or None
    when the kernel refuses the link (the caller then uses bcc for this one). Raises (as bcc
    does) a bare Exception when the symbol cannot be resolved.

    A refusal is not only an old kernel: a uprobe at the same place registered by bcc's Python
    (by another tool, or a fallback here) carries a garbage ref_ctr_offset (bcc 0.26's ctypes
    signature of bpf_attach_uprobe lacks that argument), and the kernel refuses a second
    registration with another one ("ref_ctr_offset mismatch" in dmesg)."""
    if _unsupported:
        return None
    from bcc import BPF

    path, addr = BPF._check_path_symbol(name.encode(), sym.encode(), None, -1, 0)
    fn_b = fn_name.encode()
    funcs = programs(bpf)
    if fn_b not in funcs:
        # A copy of the program whose expected attach type says "uprobe multi", kept apart from
        # bcc's own (``bpf.funcs``): a multi program cannot be attached as a perf event.
        try:
            funcs[fn_b] = _load_multi(bpf, fn_b)
        except OSError as err:
            _unsupported.append(f"uprobe-multi program refused ({err.strerror})")
            return None
    try:
        fd = link_create(funcs[fn_b], path, addr, ret)
    except OSError as err:
        if err.errno in (errno.ENOSYS, errno.EOPNOTSUPP):
            _unsupported.append(f"uprobe-multi link refused ({err.strerror})")
        return None
    _links(bpf)[(path, addr, ret, fn_b)] = fd
    return fd


def _load_multi(bpf, fn_b: bytes) -> int:
    """Load function ``fn_b`` of ``bpf``'s module again, as a uprobe-multi program; its fd."""
    from bcc import BPF
    from bcc.libbcc import lib

    mod = bpf.module
    start = lib.bpf_function_start(mod, fn_b)
    if not start:
        raise Exception(f"Unknown program {fn_b.decode()}")
    fd = lib.bcc_func_load(mod, BPF.KPROBE, fn_b, start, lib.bpf_function_size(mod, fn_b),
                           lib.bpf_module_license(mod), lib.bpf_module_kern_version(mod),
                           0, None, 0, None, BPF_TRACE_UPROBE_MULTI)
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def programs(bpf) -> dict[bytes, int]:
    """{function name: fd} of the uprobe-multi copies loaded for ``bpf`` (for program stats)."""
    if not hasattr(bpf, "dpuprof_multi_funcs"):
        bpf.dpuprof_multi_funcs = {}
    return bpf.dpuprof_multi_funcs


def detach(bpf, fd: int) -> None:
    """Close link ``fd`` (it stops firing; the release waits for a grace period)."""
    for key, value in list(_links(bpf).items()):
        if value == fd:
            del _links(bpf)[key]
    os.close(fd)


def take_all(bpf) -> tuple[list[int], list[int]]:
    """(link fds, uprobe-multi program fds) still open on ``bpf``, forgotten there: the caller
    closes them, the links first."""
    links, funcs = _links(bpf), programs(bpf)
    out = (list(links.values()), list(funcs.values()))
    links.clear()
    funcs.clear()
    return out


def _links(bpf) -> dict:
    if not hasattr(bpf, "dpuprof_links"):
        bpf.dpuprof_links = {}
    return bpf.dpuprof_links
