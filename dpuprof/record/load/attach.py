"""Closing attachments in parallel, and detaching the tracepoints for a while with the programs
and maps kept (``detach_events``, ``reattach_events``: the agent's duty cycle,
record/sources.py ``BpfSource.pause``).

Each close of a tracepoint attachment waits for grace periods (about 65 ms per tracepoint on the
loaded 2-vCPU development VM, 1.3 s for the 20 of all probes closed one by one); closed from
parallel threads the waits overlap in part: five tracepoints of the default probes still took
198-236 ms together (2026-12-06), where a raw tracepoint's close takes ~1 ms, so the probes use
raw tracepoints where they can (probes/proc_tree.bpf.c). uprobes are links for the same reason
(uprobe_link.py): perf-event uprobes wait one after another under a kernel lock (0.1 s each).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from dpuprof.record.load.libbcc import lib


def close_in_parallel(closes: list[Callable[[], object]]) -> None:
    """Run every close of ``closes`` from parallel threads and wait for them all."""
    if closes:
        with ThreadPoolExecutor(min(len(closes), 32)) as pool:
            list(pool.map(lambda close: close(), closes))


def cleanup_in_parallel(bpf, cleanup) -> None:
    """The compile child's ``bcc.BPF.cleanup()``, its tracepoints' perf events and raw
    tracepoints closed together first (libbcc's bpf_detach_tracepoint, which bcc calls after
    the close, does nothing)."""
    closes = [lambda fd=fd: lib().bpf_close_perf_event_fd(fd) for fd in bpf.tracepoint_fds.values()]
    closes += [lambda fd=fd: os.close(fd) for fd in bpf.raw_tracepoint_fds.values()]
    bpf.tracepoint_fds.clear()
    bpf.raw_tracepoint_fds.clear()
    close_in_parallel(closes)
    cleanup()


def detach_events(probes) -> tuple[list[tuple[bool, str, object]], Callable[[], None]]:
    """Close every tracepoint and raw-tracepoint attachment of ``probes`` (loaded.LoadedProbes)
    from parallel threads, keeping its programs and maps (and their contents), and return at
    once: (what ``reattach_events`` needs, [(raw, key, loaded.Attached)]; a function that waits
    for the closes).

    Why not wait here: a close takes its program off the event first, then waits for grace
    periods (40-100 ms for the light probe set's closes together, on the 2-vCPU development VM);
    the caller reads the clock, /proc and the maps meanwhile, so the interval ends when the probes
    stopped, not a tenth of a second later (the /proc CPU times would then run past its end).
    Raises RuntimeError, detaching nothing, when uprobes are attached (links to each process's
    files, not paused here)."""
    if probes.links or probes.uprobe_events:
        raise RuntimeError("uprobes are attached: they cannot be paused")
    plan = [(False, key, a) for key, a in probes.tracepoints.items()]
    plan += [(True, key, a) for key, a in probes.raw_tracepoints.items()]
    closes = [lambda fd=a.fd: lib().bpf_close_perf_event_fd(fd) for a in probes.tracepoints.values()]
    closes += [lambda fd=a.fd: os.close(fd) for a in probes.raw_tracepoints.values()]
    probes.tracepoints.clear()
    probes.raw_tracepoints.clear()
    if not closes:
        return plan, lambda: None
    pool = ThreadPoolExecutor(min(len(closes), 32))
    running = [pool.submit(close) for close in closes]
    pool.shutdown(wait=False)  # the submitted closes still run

    def wait() -> None:
        for job in running:
            job.result()
    return plan, wait


def reattach_events(probes, plan: list[tuple[bool, str, object]]) -> None:
    """Attach again what ``detach_events`` detached, under the same keys."""
    for raw, key, a in plan:
        if raw:
            probes.attach_raw_tracepoint(key, a.event, a.fn)
        else:
            probes.attach_tracepoint(key, a.event, a.fn)
