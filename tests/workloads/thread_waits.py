"""Workload with known per-thread waits: the main thread blocks on a queue fed by a helper thread
that sleeps then computes a fixed time per item, while an io process (this script with
``--reader``: its main thread, whose waits the sched_wait probe measures) does 4 KiB O_DIRECT reads.

Usage: thread_waits.py FILE [ITEMS] [SLEEP_S] [WORK_S]. Prints one JSON line: each thread's native
tid (the io process's pid), its start and end (unix s, taken inside the thread; the io process's
start just before it is forked), the main thread's total time blocked in queue.get()
(perf_counter around each call), the io process's total time inside preadv, and each thread's
voluntary context switches since its birth (getrusage RUSAGE_THREAD ru_nvcsw, taken at its end:
the scheduler's exact count of the times it blocked, not a tick-sampled split).
"""
import json
import mmap
import os
import queue
import random
import resource
import signal
import subprocess
import sys
import threading
import time


def nvcsw() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def reader(path: str) -> None:
    """Reads until SIGUSR1, then prints its JSON line."""
    stop = []
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT requires
    blocks = os.fstat(fd).st_size // 4096
    rng = random.Random(1)
    in_read = 0.0
    n = 0
    print("ready", flush=True)
    while not stop:
        off = rng.randrange(blocks) * 4096
        t = time.perf_counter()
        os.preadv(fd, [buf], off)
        in_read += time.perf_counter() - t
        n += 1
    os.close(fd)
    print(json.dumps({"tid": os.getpid(), "end": time.time(), "in_read_s": in_read, "reads": n, "nvcsw": nvcsw()}))


if sys.argv[1] == "--reader":
    reader(sys.argv[2])
    sys.exit(0)

path = sys.argv[1]
items = int(sys.argv[2]) if len(sys.argv) > 2 else 20
sleep_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.03
work_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
info = {}
q = queue.Queue()


def helper():
    info["helper"] = {"tid": threading.get_native_id(), "start": time.time()}
    for i in range(items):
        time.sleep(sleep_s)
        end = time.thread_time() + work_s
        while time.thread_time() < end:  # compute (it holds the GIL: the main thread is blocked)
            pass
        q.put(i)
    info["helper"].update(end=time.time(), nvcsw=nvcsw())


info["main"] = {"tid": threading.get_native_id(), "start": time.time()}
io_start = time.time()
io = subprocess.Popen([sys.executable, __file__, "--reader", path], stdout=subprocess.PIPE, text=True)
assert io.stdout.readline().strip() == "ready"
helper_thread = threading.Thread(target=helper)
helper_thread.start()
blocked = 0.0
for _ in range(items):
    t = time.perf_counter()
    q.get()
    blocked += time.perf_counter() - t
io.send_signal(signal.SIGUSR1)
info["io"] = {"start": io_start, **json.loads(io.stdout.readline())}
assert io.wait() == 0
helper_thread.join()
info["main"].update(end=time.time(), blocked_s=blocked, nvcsw=nvcsw())
print(json.dumps(info))
