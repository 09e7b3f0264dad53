"""Root test: the thread_stats task iterator (probes/thread_stats.bpf.c, record/drain/tasks.py)
gives each thread the counters /proc/PID/task/TID/schedstat prints, its name and its birth."""

from __future__ import annotations

import ctypes
import os
import threading
import time

import pytest

pytestmark = pytest.mark.root


def _schedstat(tid: int) -> tuple[int, int]:
    with open(f"/proc/{os.getpid()}/task/{tid}/schedstat") as fh:
        on, runq, _ = fh.read().split()
    return int(on), int(runq)


def test_the_iterator_reads_what_proc_prints(monkeypatch):
    from dpuprof.record.drain.tasks import ITER_FUNC, TaskIterator
    from dpuprof.record.load import probes
    from dpuprof.record.load.bcc_loader import import_bcc

    monkeypatch.setenv("DPUPROF_PROBE_CACHE", "off")
    bpf, used, unavailable = probes.load(import_bcc().BPF, ["thread_stats"])
    assert used == ["thread_stats"], unavailable
    stop, ready = threading.Event(), threading.Event()
    tids = []

    def worker():
        tids.append(threading.get_native_id())
        ctypes.CDLL(None, use_errno=True).prctl(15, b"ts-worker", 0, 0, 0)  # PR_SET_NAME
        end = time.thread_time() + 0.05
        while time.thread_time() < end:  # some CPU time, then asleep: its counters stand still
            pass
        ready.set()
        stop.wait()

    t = threading.Thread(target=worker, name="ts-worker")
    born = time.time()
    t.start()
    try:
        ready.wait(5)
        time.sleep(0.05)
        reading = TaskIterator(lambda: bpf.read_iter(ITER_FUNC)).read({os.getpid()})
        proc = _schedstat(tids[0])
    finally:
        stop.set()
        t.join()
        bpf.close()
    mine = reading.stats[os.getpid()]
    assert set(mine) >= {os.getpid(), tids[0]}
    assert mine[tids[0]] == proc and mine[tids[0]][0] >= 50e6
    assert reading.names[tids[0]] == b"ts-worker"
    born_unix = reading.born_ns[tids[0]] / 1e9 + time.time() - time.monotonic()
    assert abs(born_unix - born) < 0.5
    assert os.getppid() not in reading.stats  # only the processes asked for
