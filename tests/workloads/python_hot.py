"""A pure-Python hot loop with a distinctive name, for the Python-frames root test.

Usage: python python_hot.py SECONDS [SYSCALL_SECONDS]. Burns about SECONDS of CPU in
``hot_python_loop_for_dpuprof`` (called from ``outer_caller_for_dpuprof``), then about
SYSCALL_SECONDS (default 0) in ``syscall_loop_for_dpuprof``, which spends its time in the kernel
copying /dev/zero, and prints one JSON line: the interpreter's version and the CPU seconds each
loop took (time.thread_time).
"""

import json
import os
import sys
import time


def hot_python_loop_for_dpuprof(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def outer_caller_for_dpuprof(seconds):
    start = time.thread_time()
    calls = 0
    while time.thread_time() - start < seconds:
        hot_python_loop_for_dpuprof(20_000)
        calls += 1
    return calls, time.thread_time() - start


def syscall_loop_for_dpuprof(seconds):
    fd = os.open("/dev/zero", os.O_RDONLY)
    buf = bytearray(1 << 20)
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        os.readv(fd, [buf])
    os.close(fd)
    return time.thread_time() - start


if __name__ == "__main__":
    calls, cpu_s = outer_caller_for_dpuprof(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
    sys_s = syscall_loop_for_dpuprof(float(sys.argv[2])) if len(sys.argv) > 2 else 0.0
    print(json.dumps({"python": list(sys.version_info[:2]), "calls": calls, "cpu_s": round(cpu_s, 3),
                      "syscall_cpu_s": round(sys_s, 3)}))
