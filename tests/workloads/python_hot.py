"""A pure-Python hot loop with a distinctive name, for the Python-frames root test.

Usage: python python_hot.py SECONDS. Burns about SECONDS of CPU in
``hot_python_loop_for_dpuprof`` (called from ``outer_caller_for_dpuprof``) and prints one JSON
line: the interpreter's version and the CPU seconds the loop took (time.thread_time).
"""

import json
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


if __name__ == "__main__":
    calls, cpu_s = outer_caller_for_dpuprof(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
    print(json.dumps({"python": list(sys.version_info[:2]), "calls": calls, "cpu_s": round(cpu_s, 3)}))
