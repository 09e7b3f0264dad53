"""Attaching the probes' functions by name, beside the programs bcc attached itself, and closing
every attachment in parallel at cleanup (record/load/probes.py builds the programs and calls these)."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor


def cleanup_in_parallel(bpf, cleanup) -> None:
    """``bpf.cleanup()``, closing the tracepoints' perf events and the uprobe links together first.

    Each close waits for grace periods (about 65 ms per tracepoint on the loaded 2-vCPU
    development VM, 1.3 s for the 20 of all probes when bcc closes them one by one); closed from
    parallel threads the waits overlap. uprobes are links for this reason (record/load/uprobe_link.py):
    bcc's perf-event uprobes wait one after another under a kernel lock, parallel or not (0.1 s
    each), and are left to bcc's own cleanup where the kernel has no uprobe-multi links.
    libbcc's bpf_detach_tracepoint, which bcc calls after the close, does nothing.
    """
    from bcc.libbcc import lib  # bcc is importable: a BPF object exists

    from dpuprof.record.load import uprobe_link

    links, programs = uprobe_link.take_all(bpf)
    closes = [functools.partial(lib.bpf_close_perf_event_fd, fd) for fd in bpf.tracepoint_fds.values()]
    closes += [functools.partial(os.close, fd) for fd in [*links, *bpf.raw_tracepoint_fds.values()]]
    bpf.tracepoint_fds.clear()
    bpf.raw_tracepoint_fds.clear()
    if closes:
        with ThreadPoolExecutor(min(len(closes), 32)) as pool:
            list(pool.map(lambda close: close(), closes))
    cleanup()
    for fd in programs:
        os.close(fd)


def raw_by_name(bpf, event: str, fn: str) -> None:
    """Attach function ``fn`` to raw tracepoint ``event`` beside any program already there (the
    softirq probe's own raw programs on softirq_entry/exit): bcc refuses a second attachment under
    one name in ``raw_tracepoint_fds``, so the new fd is kept under ``event/fn``, which cleanup
    closes all the same."""
    _beside(bpf.raw_tracepoint_fds, event, fn, lambda: bpf.attach_raw_tracepoint(tp=event, fn_name=fn))


def by_name(bpf, tp: str, fn: str) -> None:
    """Attach function ``fn`` to tracepoint ``tp`` beside any program already there.

    bcc keeps one perf-event fd per tracepoint name in ``tracepoint_fds``, so a second attachment
    would overwrite the first one's fd and ``cleanup()`` would never close it (that program would
    stay attached until the process exits). The new fd is kept under its own key ``tp/fn``
    instead; cleanup closes it all the same (it splits keys at ':' only to call libbcc's
    bpf_detach_tracepoint, which does nothing for perf-event attachments).
    """
    _beside(bpf.tracepoint_fds, tp, fn, lambda: bpf.attach_tracepoint(tp=tp, fn_name=fn))


def _beside(fds: dict, name: str, fn: str, attach) -> None:
    """Run ``attach`` (which stores its fd in ``fds`` under ``name``) with any fd already under
    ``name`` set aside, move the new fd to ``name/fn``, and put the old one back."""
    key = name.encode()
    before = fds.pop(key, None)
    try:
        attach()
        fds[key + b"/" + fn.encode()] = fds.pop(key)
    finally:
        if before is not None:
            fds[key] = before
