"""Events the kernel dropped before our BPF programs ran.

A classic tracepoint or perf_event program is skipped when another BPF program is already running
on the same CPU (the kernel's per-CPU bpf_prog_active guard; our sampler fires in hard-IRQ context
and can interrupt a tracepoint program, and a softirq that runs on the exit of such an interrupt
finds the guard taken). A raw tracepoint program is skipped only when that same program is already
running on the CPU, which is why softirq and net_dev use raw tracepoints where they can
(dpuprof/record/load/probes.py). The kernel counts the skips per program as ``recursion_misses``
(Linux >= 5.12) in ``struct bpf_prog_info``; they are read here so the recording reports them.
The same struct gives each program's runs and run time (``run_cnt``, ``run_time_ns``, Linux >=
5.1, counted while BPF statistics are on): ``run_stats``, the recorder's own cost (drain/cost.py).
A drain reads every program's struct once (``prog_infos``) and gives it to both: each read them
until 2026-12-07, two passes of ~13 bpf_obj_get_info calls, 0.35 ms a drain together on an iperf3
flood.
"""

from __future__ import annotations

import ctypes as ct

from dpuprof.record.load.libbcc import lib


class _ProgInfo(ct.Structure):
    # The stable UAPI layout of struct bpf_prog_info (include/uapi/linux/bpf.h) up to
    # recursion_misses; the kernel fills what it knows and tells the length.
    _fields_ = [
        ("type", ct.c_uint32), ("id", ct.c_uint32), ("tag", ct.c_uint8 * 8),
        ("jited_prog_len", ct.c_uint32), ("xlated_prog_len", ct.c_uint32),
        ("jited_prog_insns", ct.c_uint64), ("xlated_prog_insns", ct.c_uint64),
        ("load_time", ct.c_uint64), ("created_by_uid", ct.c_uint32), ("nr_map_ids", ct.c_uint32),
        ("map_ids", ct.c_uint64), ("name", ct.c_char * 16), ("ifindex", ct.c_uint32),
        ("flags", ct.c_uint32), ("netns_dev", ct.c_uint64), ("netns_ino", ct.c_uint64),
        ("nr_jited_ksyms", ct.c_uint32), ("nr_jited_func_lens", ct.c_uint32),
        ("jited_ksyms", ct.c_uint64), ("jited_func_lens", ct.c_uint64),
        ("btf_id", ct.c_uint32), ("func_info_rec_size", ct.c_uint32), ("func_info", ct.c_uint64),
        ("nr_func_info", ct.c_uint32), ("nr_line_info", ct.c_uint32), ("line_info", ct.c_uint64),
        ("jited_line_info", ct.c_uint64), ("nr_jited_line_info", ct.c_uint32),
        ("line_info_rec_size", ct.c_uint32), ("jited_line_info_rec_size", ct.c_uint32),
        ("nr_prog_tags", ct.c_uint32), ("prog_tags", ct.c_uint64), ("run_time_ns", ct.c_uint64),
        ("run_cnt", ct.c_uint64), ("recursion_misses", ct.c_uint64),
    ]


READ = object()  # ``infos`` not given: read them


def prog_infos(probes):
    """[(program name, bpf_prog_info, bytes the kernel filled)] of every program of ``probes``
    (loaded.LoadedProbes), or None when the kernel refuses the query for any of them."""
    out = []
    for name, fd in probes.program_fds():
        info = _ProgInfo()
        size = ct.c_uint32(ct.sizeof(info))
        if lib().bpf_obj_get_info(fd, ct.byref(info), ct.byref(size)) != 0:
            return None
        out.append((name, info, size.value))
    return out


def recursion_misses(bpf, infos=READ) -> dict[str, int] | None:
    """{program name: cumulative recursion misses} for the loaded programs (``infos``: their
    ``prog_infos``, read now when not given); None if unsupported."""
    infos = prog_infos(bpf) if infos is READ else infos
    if infos is None:
        return None
    out: dict[str, int] = {}
    for key, info, size in infos:  # a uprobe program loaded twice (bcc's and a link's copy) is summed
        if size < _ProgInfo.recursion_misses.offset + 8:
            return None  # kernel older than 5.12: not counted
        out[key] = out.get(key, 0) + int(info.recursion_misses)
    return out


def run_stats(bpf, infos=READ) -> dict[str, tuple[int, int]] | None:
    """{program name: (cumulative run_cnt, cumulative run_time_ns)} for the loaded programs
    (``infos`` as for recursion_misses); None if the kernel does not report them (before 5.1). The
    kernel only counts while BPF run-time statistics are on (dpuprof/record/drain/cost.py turns
    them on); otherwise both stay 0."""
    infos = prog_infos(bpf) if infos is READ else infos
    if infos is None:
        return None
    out: dict[str, tuple[int, int]] = {}
    for key, info, size in infos:  # a program loaded twice (bcc's and a uprobe link's copy) is summed
        if size < _ProgInfo.run_cnt.offset + 8:
            return None
        runs, ns = out.get(key, (0, 0))
        out[key] = (runs + int(info.run_cnt), ns + int(info.run_time_ns))
    return out
