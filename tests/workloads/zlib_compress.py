"""Workload: zlib compression of incompressible-ish data for ~DURATION s."""
import json
import os
import resource
import sys
import time
import zlib

duration = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
data = os.urandom(1 << 16) * 16
end = time.time() + duration
n = 0
while time.time() < end:
    zlib.compress(data, 6)
    n += 1
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "blocks": n}))
