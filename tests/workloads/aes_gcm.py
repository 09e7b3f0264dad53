"""Workload: AES-256-GCM encryption through OpenSSL (the `cryptography` package) for ~DURATION s."""
import json
import os
import resource
import sys
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

duration = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
aes = AESGCM(AESGCM.generate_key(bit_length=256))
data = os.urandom(1 << 20)
nonce = os.urandom(12)
end = time.time() + duration
n = 0
while time.time() < end:
    aes.encrypt(nonce, data, None)
    n += 1
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "mib": n}))
