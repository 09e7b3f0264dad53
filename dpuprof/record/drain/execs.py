"""Read each new workload image's memory map while it runs: the exec watcher.

probes/proc_tree.bpf.c puts every exec of a workload process in its ``execs`` map (pid -> exec
time) and a record in its ``exec_wake`` perf buffer. A thread here sleeps in poll(2) on that
buffer until an exec wakes it or a pending process's next capture age comes, takes the map,
and has the Symbolizer read the process's /proc/PID/maps (``Symbolizer.capture``) at the ages
in ``CAPTURE_AGES_S``: the first read once the dynamic loader has had time to map the DT_NEEDED
libraries (a few ms after exec), later ones for libraries opened with dlopen (OpenSSL's
providers, Python extension modules). The maps are kept
after the process exits until its samples are drained, so a ``curl`` or ``zstd -d`` that lives
0.2 s is resolved like a long-lived process. A drain that misses in a live process still re-reads
its maps itself (symbols.py); one that misses in a process that is gone cannot.

Why the map holds the execs and the buffer only wakes: the map keeps one entry per process
however many execs arrive between two passes, and a full buffer loses only wake-ups. Why not a
timed poll (until 2026-12-06: every 100 ms with nothing pending, every 20 ms while an exec was
pending, so ~110 wake-ups for each exec): each wake-up of the thread costs ~0.1 ms of CPU
(below). Now an exec costs one pass per capture age, and a workload that never execs none. The exec
tracepoint fires before ld.so runs, so reading there would see only the binary and ld.so anyway.
"""

from __future__ import annotations

import ctypes as ct
import os
import select
import threading
import time

from dpuprof.record.load.libbcc import lib

# Each wake-up of the thread cost ~0.1 ms of its CPU time in the recorder here (0.30 s over
# 3,042 polls of a DDP run, 0.03 s over 307 of `sleep 6`; the poll itself is 6 us: the rest is
# the wake-up and the GIL hand-over on this shared 2-CPU VM).
# Ages after exec (s) at which the maps are (re-)read while the process lives. 5 ms: ld.so has
# mapped curl's DT_NEEDED libraries by then (LD_DEBUG=statistics here: 1.3 M cycles to load them,
# 2.4-9.8 M for all of ld.so's start-up, at 2.4 GHz: 1-4 ms); the later reads catch dlopen'd code
# and a start-up slowed down by a busy machine.
CAPTURE_AGES_S = (0.005, 0.05, 0.5, 2.0)


def _nonempty_check(table):
    """A cheap "does the map hold any key?": one bpf_map_get_next_key system call through
    libbcc (poll_once on the empty map: 6 us, against 7.5 us for bcc's ``items()`` alone), or
    None for a map without an fd (tests)."""
    try:
        fd, size = table.map_fd, ct.sizeof(table.Key)
    except AttributeError:
        return None
    key = ct.create_string_buffer(size)
    return lambda: lib().bpf_get_first_key(fd, key, size) == 0


class ExecWatcher:
    """Takes ``execs`` (a hash map, pid -> exec time in CLOCK_MONOTONIC ns) on a thread of its
    own, woken by ``wake`` (a bpfmap.PerfEventArray with a record per exec), and calls
    ``capture(pid)`` (-> False once the process is gone) at each age of ``CAPTURE_AGES_S``.
    ``poll_once(now_ns)`` is one pass (the thread's body, and the tests')."""

    def __init__(self, execs_map, capture, ages=CAPTURE_AGES_S, wake=None):
        self.map = execs_map
        self.wake = wake
        self.capture = capture
        self.ages_ns = [int(a * 1e9) for a in ages]
        self.pending: dict[int, tuple[int, int]] = {}  # pid -> (exec ns, index of the next age)
        self.captures = 0  # successful reads (a check for tests)
        self._any = _nonempty_check(execs_map)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ExecWatcher":
        """Start the thread (``wake`` is required for it)."""
        self.wake.open_perf_buffer(lambda _cpu, _data, _size: None, page_cnt=1)
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="dpuprof-execs", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (idempotent); waits for its current pass."""
        self._stop.set()
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join(timeout=2)
            self._thread = None
            os.close(self._stop_r)
            os.close(self._stop_w)

    def _run(self) -> None:
        """Sleep until an exec (or stop) or the next capture due; after an exec, a pass at its
        first capture age (execs that come meanwhile share that pass: at most one pass per first
        age in an exec storm)."""
        poller = select.poll()
        for fd in [*self.wake.reader_fds(), self._stop_r]:
            poller.register(fd, select.POLLIN)
        while True:
            due = min((at + self.ages_ns[i] for at, i in self.pending.values()), default=None)
            woken = poller.poll(None if due is None else max(0.0, (due - time.monotonic_ns()) / 1e6))
            if self._stop.is_set() or (woken and self._stop.wait(self.ages_ns[0] / 1e9)):
                return
            try:
                self.wake.poll(0)  # the wake-up records: read, so the buffers stop being readable
                self.poll_once(time.monotonic_ns())
            except Exception:  # noqa: BLE001 - the map is gone (probes closed): stop quietly
                if self._stop.is_set():
                    return

    def _take(self) -> dict[int, int]:
        """{pid: exec ns} added to the map since the last take, removed from it."""
        if self._any is not None and not self._any():
            return {}
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
