"""SchedstatFiles: per-thread schedstat read through files kept open (dpuprof/record/drain/schedstat.py)."""

import os
import threading
import time

from conftest import poll_until
from dpuprof.record.drain.schedstat import SchedstatFiles


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_kept_file_gives_the_threads_new_counters_and_an_exited_thread_is_dropped():
    pid, me = os.getpid(), threading.get_native_id()
    stop, spin = threading.Event(), threading.Event()
    worker_tid = []

    def worker():
        worker_tid.append(threading.get_native_id())
        spin.wait()
        _spin(0.05)
        stop.wait()

    t = threading.Thread(target=worker)
    t.start()
    files = SchedstatFiles()
    fds0 = _open_fds()
    try:
        assert poll_until(lambda: worker_tid, every=0.001)
        first = files.read(pid)
        kept = _open_fds()
        assert {me, worker_tid[0]} <= set(first) and kept > fds0  # their files stay open
        spin.set()
        ran = lambda: files.read(pid)[worker_tid[0]][0] - first[worker_tid[0]][0]  # noqa: E731
        assert poll_until(lambda: ran() >= 40_000_000, timeout=10, every=0.01)  # its 50 ms of CPU
        second = files.read(pid)
        assert _open_fds() == kept  # read again through the same files
        assert second[worker_tid[0]][0] - first[worker_tid[0]][0] >= 40_000_000  # its 50 ms of CPU
        stop.set()
        t.join()
        # join() returns before the kernel thread is gone
        poll_until(lambda: not os.path.exists(f"/proc/{pid}/task/{worker_tid[0]}"), timeout=5, every=0.005)
        third = files.read(pid)
        assert worker_tid[0] not in third and me in third
        assert _open_fds() == kept - 1  # the exited thread's file is closed
    finally:
        stop.set()
        spin.set()
        t.join()
        files.close()
    assert _open_fds() == fds0


def test_threads_past_the_budget_are_still_read_and_nothing_stays_open():
    stop = threading.Event()
    extra = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in extra:
        t.start()
    files = SchedstatFiles(max_open=1)
    fds0 = _open_fds()
    try:
        stats = files.read(os.getpid())
        assert {t.native_id for t in extra} <= set(stats) and len(stats) >= 4
        assert _open_fds() == fds0 + 1
        assert all(on >= 0 and runq >= 0 for on, runq in stats.values())
        files.forget(os.getpid())
        assert _open_fds() == fds0
    finally:
        stop.set()
        for t in extra:
            t.join()
    assert files.read(2 ** 22 + 1) == {}  # no such process
