"""Workload: 4 KiB O_DIRECT random reads of a file on disk for ~DURATION s (bypasses the page cache,
so every read reaches the block device)."""
import json
import mmap
import os
import random
import resource
import sys
import time

path = sys.argv[1]
duration = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
size = 64 << 20
if not os.path.exists(path) or os.path.getsize(path) < size:
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))
        fh.flush()
        os.fsync(fh.fileno())
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT requires
blocks = size // 4096
rng = random.Random(1)
offsets = [rng.randrange(blocks) * 4096 for _ in range(4096)]  # keep the Python loop thin
bufs = [buf]
preadv = os.preadv
t0 = resource.getrusage(resource.RUSAGE_SELF)
end = time.time() + duration
n = 0
while time.time() < end:
    for off in offsets[:256]:
        preadv(fd, bufs, off)
    offsets = offsets[256:] + offsets[:256]
    n += 256
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "reads": n,
                  "setup_cpu_s": t0.ru_utime + t0.ru_stime}))
