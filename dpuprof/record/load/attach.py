"""Closing every attachment of the probes in parallel at cleanup (record/load/probes.py builds the
programs and calls this), and detaching the tracepoints for a while with the programs and maps kept (``detach_events``,
``reattach_events``: the agent's duty cycle, record/sources.py ``BpfSource.pause``).
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from dpuprof.record.load import uprobe_link


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


def _function_of(key: bytes, raw: bool) -> bytes:
    """The function bcc attached under ``key`` of ``tracepoint_fds`` (``raw`` False) or
    ``raw_tracepoint_fds``: ``tracepoint__CATEGORY__NAME`` or ``raw_tracepoint__NAME``."""
    return b"raw_tracepoint__" + key if raw else b"tracepoint__" + key.replace(b":", b"__")


def detach_events(bpf) -> tuple[list[tuple[bool, bytes, bytes]], Callable[[], None]]:
    """Close every tracepoint and raw-tracepoint attachment of ``bpf`` from parallel threads,
    keeping its programs and maps (and their contents), and return at once: (what
    ``reattach_events`` needs, [(raw, key, function)]; a function that waits for the closes).

    Why not wait here: a close takes its program off the event first, then waits for grace
    periods (40-100 ms for the light probe set's closes together, on the 2-vCPU development VM);
    the caller reads the clock, /proc and the maps meanwhile, so the interval ends when the probes
    stopped, not a tenth of a second later (the /proc CPU times would then run past its end).
    Raises RuntimeError, detaching nothing, when an attachment's function is not one of
    ``bpf.funcs`` or uprobes are attached (links to each process's files, not paused here)."""
    if getattr(bpf, "uprobe_fds", None) or getattr(bpf, "dpuprof_links", None):  # uprobe_link.py's
        raise RuntimeError("uprobes are attached: they cannot be paused")
    plan = [(raw, key, _function_of(key, raw)) for raw, fds in ((False, bpf.tracepoint_fds),
                                                               (True, bpf.raw_tracepoint_fds)) for key in fds]
    unknown = [fn.decode() for _raw, _key, fn in plan if fn not in bpf.funcs]
    if unknown:
        raise RuntimeError(f"cannot tell which function to re-attach: {', '.join(unknown)} not loaded")
    closes = [functools.partial(_close_perf_event, fd) for fd in bpf.tracepoint_fds.values()]
    closes += [functools.partial(os.close, fd) for fd in bpf.raw_tracepoint_fds.values()]
    bpf.tracepoint_fds.clear()
    bpf.raw_tracepoint_fds.clear()
    if not closes:
        return plan, lambda: None
    pool = ThreadPoolExecutor(min(len(closes), 32))
    running = [pool.submit(close) for close in closes]
    pool.shutdown(wait=False)  # the submitted closes still run

    def wait() -> None:
        for job in running:
            job.result()
    return plan, wait


def _close_perf_event(fd: int) -> None:
    from bcc.libbcc import lib  # bcc is importable: a BPF object holds this attachment

    lib.bpf_close_perf_event_fd(fd)


def reattach_events(bpf, plan: list[tuple[bool, bytes, bytes]]) -> None:
    """Attach again what ``detach_events`` detached, under the same keys."""
    for raw, key, fn in plan:
        if raw:
            bpf.attach_raw_tracepoint(tp=key, fn_name=fn)
        else:
            bpf.attach_tracepoint(tp=key, fn_name=fn)
