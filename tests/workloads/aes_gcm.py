"""Workload: AES-256-GCM encryption through OpenSSL (the `cryptography` package) for ~DURATION s.

Encrypts into a reused buffer (update_into), so the time is the cipher's, not allocation's."""
import json
import os
import resource
import sys
import time

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

duration = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
key = os.urandom(32)
data = os.urandom(1 << 20)
out = bytearray(len(data) + 15)
end = time.time() + duration
n = 0
while time.time() < end:
    enc = Cipher(algorithms.AES(key), modes.GCM(os.urandom(12))).encryptor()
    for _ in range(8):
        enc.update_into(data, out)
    enc.finalize()
    n += 8
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "mib": n}))
