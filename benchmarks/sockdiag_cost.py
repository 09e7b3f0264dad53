#!/usr/bin/env python3
"""What reading the TCP sockets' counters costs the recorder per interval (record/drain/sockdiag.py).

A sock_diag dump walks the kernel's whole established-socket hash table, whatever it holds, once
per address family; then it costs per socket listed. This times ``dump`` (IPv4 and IPv6, as the
recorder reads them each interval) in this thread's CPU (``time.thread_time``: the kernel's walk
is in it), the median of 7 repetitions of 50 dumps, with 0, 100 and 1,000 open loopback TCP
connections (2 sockets each). It prints the size of the hash table the kernel announced at boot
when dmesg shows it. No root needed:

    python3 benchmarks/sockdiag_cost.py
"""

from __future__ import annotations

import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dpuprof.record.drain.sockdiag import diag_socket, dump  # noqa: E402

DUMPS, REPS = 50, 7
CONNECTIONS = (0, 100, 1000)


def cost_us() -> tuple[float, int]:
    """(µs of CPU per dump of both families, sockets listed)."""
    sock, buf = diag_socket(), bytearray(1 << 16)
    listed = len(dump(sock, buf))
    reps = []
    for _ in range(REPS):
        t0 = time.thread_time()
        for _ in range(DUMPS):
            dump(sock, buf)
        reps.append((time.thread_time() - t0) / DUMPS * 1e6)
    sock.close()
    return statistics.median(reps), listed


def ehash_entries() -> str:
    try:
        text = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (dmesg unreadable)"
    m = re.search(r"TCP established hash table entries: (\d+)", text)
    return m.group(1) if m else "unknown"


def main() -> int:
    print(f"TCP established hash table entries: {ehash_entries()}")
    srv = socket.create_server(("127.0.0.1", 0), backlog=1024)
    held: list[socket.socket] = []
    print("| connections | sockets listed | µs of CPU per interval (IPv4 + IPv6 dumps) |")
    print("|---:|---:|---:|")
    for n in CONNECTIONS:
        while len(held) < 2 * n:
            held.append(socket.create_connection(srv.getsockname()))
            held.append(srv.accept()[0])
        us, listed = cost_us()
        print(f"| {n:,} | {listed:,} | {us:,.0f} |")
    for s in held:
        s.close()
    srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
