"""Run a function over many inputs in worker processes: loading and deriving one node's view is
independent of every other node's, and pandas holds the GIL, so a job of many nodes is loaded by
one process per CPU (``dpuprof report -j``).

Workers are forked (Linux), so they start with this process's modules already imported; results
come back pickled, in input order. Where fork is unavailable, or for fewer than ``MIN_ITEMS``
inputs (a pool's start-up would cost more than it saves), the function runs here, one input after
the other. An exception in a worker is raised here, as in a serial run.
"""

from __future__ import annotations

import multiprocessing
import os

#: below this many inputs the work stays in this process
MIN_ITEMS = 4


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_all(fn, items: list, workers: int | None = None, on_done=None) -> list:
    """``[fn(x) for x in items]``, in up to ``workers`` processes (None: one per CPU; 1: here).
    ``on_done(i, n)`` is called here as each result arrives (for a progress line)."""
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415 -- loaded by `dpuprof --help`; concurrent.futures.process ~13 ms

    n = len(items)
    workers = min(workers or cpus(), n)
    if workers <= 1 or n < MIN_ITEMS or "fork" not in multiprocessing.get_all_start_methods():
        out = []
        for i, x in enumerate(items):
            out.append(fn(x))
            if on_done:
                on_done(i + 1, n)
        return out
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(fn, x) for x in items]
        out = []
        for i, f in enumerate(futures):
            out.append(f.result())
            if on_done:
                on_done(i + 1, n)
        return out
