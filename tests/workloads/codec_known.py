"""Workload: cipher and codec calls of known number and size, for the uprobes test.

Usage: codec_known.py REPEAT. Each of REPEAT rounds: one zlib decompress (one inflate call: the
output buffer is larger than the result), one zlib compress, one AES-256-GCM encrypt and one
decrypt through `cryptography` (its statically linked OpenSSL; into reused buffers, so that the
time around a call is the cipher's and not a fresh result's page faults), and one EVP_EncryptUpdate and one
EVP_DecryptUpdate through the system libcrypto.so.3 (ctypes; $CODEC_LIBCRYPTO names another copy
to load instead). Sleeps first, so that a recorder's
first drain (2 s by default) has happened. Prints one JSON line: the ground truth ``truth`` {lib:func: [calls, input
bytes]} and ``cpu_s`` {lib:func: thread CPU seconds around the loop's calls (time.thread_time)}.
"""
import ctypes
import ctypes.util
import json
import os
import sys
import time
import zlib

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

RAW = 1 << 20          # bytes of plain data per call
repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 20
data = os.urandom(RAW // 2) + bytes(RAW // 2)   # half random, half zeros: compressible
comp = zlib.compress(data, 1)
key, nonce = os.urandom(32), os.urandom(12)
gcm = AESGCM(key)
sealed = gcm.encrypt(nonce, data, None)
sealed_out, opened_out = bytearray(len(sealed)), bytearray(RAW)  # reused: encrypt_into (cryptography >= 47)

crypto = ctypes.CDLL(os.environ.get("CODEC_LIBCRYPTO", "libcrypto.so.3"))  # a copy: see the test
crypto.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
crypto.EVP_aes_256_gcm.restype = ctypes.c_void_p
for fn in ("EVP_EncryptInit_ex", "EVP_DecryptInit_ex"):
    getattr(crypto, fn).argtypes = [ctypes.c_void_p] * 5
for fn in ("EVP_EncryptUpdate", "EVP_DecryptUpdate"):
    getattr(crypto, fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                    ctypes.c_char_p, ctypes.c_int]
crypto.EVP_CIPHER_CTX_free.argtypes = [ctypes.c_void_p]
out = ctypes.create_string_buffer(RAW + 64)
outl = ctypes.c_int()


cpu = {}  # target -> this thread's CPU seconds around the calls (time.thread_time)


def timed(target, fn, *args):
    t0 = time.thread_time()
    result = fn(*args)
    cpu[target] = cpu.get(target, 0.0) + time.thread_time() - t0
    return result


def evp(target, init, update):
    ctx = crypto.EVP_CIPHER_CTX_new()
    assert init(ctx, crypto.EVP_aes_256_gcm(), None, key, nonce) == 1
    assert timed(target, update, ctx, out, ctypes.byref(outl), data, RAW) == 1
    crypto.EVP_CIPHER_CTX_free(ctx)


time.sleep(2.5)
for _ in range(repeat):
    assert timed("libz:inflate", zlib.decompress, comp, 15, RAW + 64) == data
    timed("libz:deflate", zlib.compress, data, 1)
    timed("cryptography_rust:EVP_EncryptUpdate", gcm.encrypt_into, nonce, data, None, sealed_out)
    timed("cryptography_rust:EVP_DecryptUpdate", gcm.decrypt_into, nonce, sealed, None, opened_out)
    evp("libcrypto:EVP_EncryptUpdate", crypto.EVP_EncryptInit_ex, crypto.EVP_EncryptUpdate)
    evp("libcrypto:EVP_DecryptUpdate", crypto.EVP_DecryptInit_ex, crypto.EVP_DecryptUpdate)
time.sleep(0.2)
# The set-up above compressed and sealed `data` once more.
truth = {"libz:inflate": [repeat, repeat * len(comp)], "libz:deflate": [None, (repeat + 1) * RAW],
         "cryptography_rust:EVP_EncryptUpdate": [repeat + 1, (repeat + 1) * RAW],
         "cryptography_rust:EVP_DecryptUpdate": [repeat, repeat * RAW],
         "libcrypto:EVP_EncryptUpdate": [repeat, repeat * RAW],
         "libcrypto:EVP_DecryptUpdate": [repeat, repeat * RAW]}
print(json.dumps({"truth": truth, "cpu_s": cpu}))
