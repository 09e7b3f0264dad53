"""bcc's internals that dpuprof uses, in one module: libbcc's C functions and two private helpers
of ``bcc.BPF``.

bcc's Python declares the ctypes signatures of only some libbcc functions, and some wrongly for
this use (``bpf_attach_uprobe`` without its ``ref_ctr_offset``, ``bpf_attach_perf_event``'s
misspelt ``argtype``). So this module opens libbcc a second time, as its own ctypes handle (its
function objects are not bcc's: declaring them here changes nothing for bcc), and declares every
function dpuprof calls with its C signature from bcc 0.26's ``libbpf.h``, ``bcc_common.h``,
``perf_reader.h`` and ``bcc_syms.h`` (``SIGNATURES``). tests/test_libbcc_root.py checks each
against the installed bcc, and that the two private helpers still exist.

Only this module imports ``bcc.libbcc``; the rest of dpuprof calls ``lib()`` here.
"""

from __future__ import annotations

import ctypes as ct
from functools import lru_cache

_i, _u, _u32, _u64, _s, _p, _sz = ct.c_int, ct.c_uint, ct.c_uint32, ct.c_uint64, ct.c_char_p, ct.c_void_p, ct.c_size_t
RAW_CB = ct.CFUNCTYPE(None, ct.py_object, ct.c_void_p, ct.c_int)  # perf_reader_raw_cb(cookie, data, size)
LOST_CB = ct.CFUNCTYPE(None, ct.py_object, ct.c_ulonglong)  # perf_reader_lost_cb(cookie, lost)


class PerfBufferOpts(ct.Structure):
    """struct bcc_perf_buffer_opts (libbpf.h)."""
    _fields_ = [("pid", ct.c_int), ("cpu", ct.c_int), ("wakeup_events", ct.c_int)]


# name: (restype, argtypes), as declared in bcc 0.26's C headers.
SIGNATURES = {
    # maps and programs by fd (libbpf.h)
    "bcc_create_map": (_i, [_i, _s, _i, _i, _i, _i]),
    "bcc_prog_load": (_i, [_i, _s, _s, _i, _s, _u, _i, _s, _u]),  # insns as bytes
    "bpf_lookup_elem": (_i, [_i, _p, _p]),
    "bpf_update_elem": (_i, [_i, _p, _p, ct.c_ulonglong]),
    "bpf_delete_elem": (_i, [_i, _p]),
    "bpf_get_first_key": (_i, [_i, _p, _sz]),
    "bpf_get_next_key": (_i, [_i, _p, _p]),
    "bpf_lookup_batch": (_i, [_i, ct.POINTER(_u32), ct.POINTER(_u32), _p, _p, ct.POINTER(_u32)]),
    "bpf_delete_batch": (_i, [_i, _p, ct.POINTER(_u32)]),
    "bpf_obj_get_info": (_i, [_i, _p, ct.POINTER(_u32)]),
    # attachments (libbpf.h)
    "bpf_attach_tracepoint": (_i, [_i, _s, _s]),
    "bpf_attach_raw_tracepoint": (_i, [_i, _s]),
    "bcc_iter_attach": (_i, [_i, _p, _u32]),  # (prog fd, union bpf_iter_link_info *, its size): a link fd
    "bcc_iter_create": (_i, [_i]),  # (link fd): an iterator's fd, read to run the program
    "bpf_attach_perf_event": (_i, [_i, _u32, _u32, _u64, _u64, _i, _i, _i]),
    "bpf_close_perf_event_fd": (_i, [_i]),
    "bpf_attach_uprobe": (_i, [_i, _i, _s, _s, _u64, _i, _u32]),
    "bpf_detach_uprobe": (_i, [_s]),
    # perf buffers (libbpf.h, perf_reader.h)
    "bpf_open_perf_buffer_opts": (_p, [RAW_CB, LOST_CB, ct.py_object, _i, ct.POINTER(PerfBufferOpts)]),
    "perf_reader_fd": (_i, [_p]),
    "perf_reader_poll": (_i, [_i, ct.POINTER(_p), _i]),
    "perf_reader_consume": (_i, [_i, ct.POINTER(_p)]),
    "perf_reader_free": (None, [_p]),
    # a compiled module (bcc_common.h): the compile child reads what it holds
    "bpf_num_functions": (_sz, [_p]),
    "bpf_function_name": (_s, [_p, _sz]),
    "bpf_function_start": (_p, [_p, _s]),
    "bpf_function_size": (_sz, [_p, _s]),
    "bpf_module_license": (_s, [_p]),
    "bpf_module_kern_version": (_u, [_p]),
    "bpf_num_tables": (_sz, [_p]),
    "bpf_table_name": (_s, [_p, _sz]),
    "bpf_table_fd": (_i, [_p, _s]),
    "bpf_table_type_id": (_i, [_p, _sz]),
    "bpf_table_flags_id": (_i, [_p, _sz]),
    "bpf_table_max_entries_id": (_sz, [_p, _sz]),
    "bpf_table_key_desc": (_s, [_p, _s]),
    "bpf_table_leaf_desc": (_s, [_p, _s]),
    "bpf_table_key_size_id": (_sz, [_p, _sz]),
    "bpf_table_leaf_size_id": (_sz, [_p, _sz]),
    "bpf_perf_event_fields": (_sz, [_p, _s]),
    "bpf_perf_event_field": (_s, [_p, _s, _sz]),
}


@lru_cache(maxsize=1)
def lib() -> ct.CDLL:
    """libbcc, every function of ``SIGNATURES`` declared (a handle of this module's own)."""
    from bcc import libbcc

    handle = ct.CDLL(libbcc.lib._name, use_errno=True)
    for name, (restype, argtypes) in SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = restype, argtypes
    return handle


def decode_type(desc):
    """The ctypes type of a map's key or leaf from bcc's JSON description (parsed): bcc's private
    ``BPF._decode_table_type``."""
    from bcc import BPF

    return BPF._decode_table_type(desc)


def resolve_symbol(path: str, sym: str) -> tuple[bytes, int]:
    """(the file's path, the symbol's file offset) of ``sym`` in ``path``: bcc's private
    ``BPF._check_path_symbol`` (libbcc's symbol resolution). A bare Exception when not found."""
    from bcc import BPF

    return BPF._check_path_symbol(path.encode(), sym.encode(), None, -1, 0)


def possible_cpus() -> int:
    """How many CPUs the kernel may bring up: a per-CPU map's value holds one slot for each."""
    from bcc.utils import get_possible_cpus

    return len(get_possible_cpus())


def online_cpus() -> list[int]:
    from bcc.utils import get_online_cpus

    return list(get_online_cpus())
