"""Read each new workload image's memory map while it runs: the exec watcher.

probes/proc_tree.bpf.c puts every exec of a workload process in its ``execs`` map (pid -> exec
time). A thread here takes them every ``POLL_S`` and has the Symbolizer read the process's
/proc/PID/maps (``Symbolizer.capture``) at the ages in ``CAPTURE_AGES_S``: the first read once the
dynamic loader has had time to map the DT_NEEDED libraries (a few ms after exec), later ones for
libraries opened with dlopen (OpenSSL's providers, Python extension modules). The maps are kept
after the process exits until its samples are drained, so a ``curl`` or ``zstd -d`` that lives
0.2 s is resolved like a long-lived process. A drain that misses in a live process still re-reads
its maps itself (symbols.py); one that misses in a process that is gone cannot.

Why a poller, not a perf buffer: exec is rare, a hash map read every 20 ms costs one
``bpf_map_get_next_key`` when nothing happened, and needs no callback machinery. The exec
tracepoint fires before ld.so runs, so reading there would see only the binary and ld.so anyway.
"""

from __future__ import annotations

import ctypes as ct
import threading
import time

POLL_S = 0.02
# Ages after exec (s) at which the maps are (re-)read while the process lives. 5 ms: ld.so has
# mapped curl's DT_NEEDED libraries by then (LD_DEBUG=statistics here: 1.3 M cycles to load them,
# 2.4-9.8 M for all of ld.so's start-up, at 2.4 GHz: 1-4 ms); the later reads catch dlopen'd code
# and a start-up slowed down by a busy machine.
CAPTURE_AGES_S = (0.005, 0.05, 0.5, 2.0)


class ExecWatcher:
    """Polls ``execs`` (a bcc hash map, pid -> exec time in CLOCK_MONOTONIC ns) on a thread of its
    own and calls ``capture(pid)`` (-> False once the process is gone) at each age of
    ``CAPTURE_AGES_S``. ``poll_once(now_ns)`` is one pass (the thread's body, and the tests')."""

    def __init__(self, execs_map, capture, ages=CAPTURE_AGES_S):
        self.map = execs_map
        self.capture = capture
        self.ages_ns = [int(a * 1e9) for a in ages]
        self.pending: dict[int, tuple[int, int]] = {}  # pid -> (exec ns, index of the next age)
        self.captures = 0  # successful reads (a check for tests)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ExecWatcher":
        self._thread = threading.Thread(target=self._run, name="dpuprof-execs", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (idempotent); waits for the thread's current pass."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll_once(time.monotonic_ns())
            except Exception:  # noqa: BLE001 - the map is gone (probes closed): stop quietly
                if self._stop.is_set():
                    return

    def _take(self) -> dict[int, int]:
        """{pid: exec ns} added to the map since the last take, removed from it."""
        got = {k.value: v.value for k, v in self.map.items()}
        for pid in got:
            try:
                del self.map[ct.c_uint32(pid)]
            except KeyError:
                pass
        return got

    def poll_once(self, now_ns: int) -> None:
        for pid, at in self._take().items():
            self.pending[pid] = (at, 0)  # a second exec of the same pid starts over
        for pid, (at, i) in list(self.pending.items()):
            age = now_ns - at
            if age < self.ages_ns[i]:
                continue
            while i < len(self.ages_ns) and age >= self.ages_ns[i]:
                i += 1  # a late pass (a busy machine) reads once for every age it passed
            alive = self.capture(pid)
            self.captures += alive
            if not alive or i >= len(self.ages_ns):
                del self.pending[pid]
            else:
                self.pending[pid] = (at, i)
