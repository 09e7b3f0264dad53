#!/usr/bin/env python3
"""A loopback TCP stream made of blocking socket calls only: the accuracy runs' network tool, whose
system time is its ground truth (benchmarks/suite/workloads.py).

    tcp_stream.py server PORT            # accept one connection on 127.0.0.1, read until EOF
    tcp_stream.py client PORT SECONDS    # send for SECONDS, then close

Each process only sends a reused 256 KiB buffer (``sendall``) or receives into one
(``recv_into``), so its kernel time is the socket path: sendmsg and recvmsg, the loopback transmit
and the receive softirq they run, and the system-call entry around them, one call per 256 KiB. Its
user time is the interpreter's loop. iperf3, the tool used until 2026-12-07, waits in pselect6
between its writes, and its system time counts that wait too (6.6 % of its samples in the last
full run: not network work), so its stime was not a clean truth for the network category.
"""

from __future__ import annotations

import socket
import sys
import time

CHUNK = 256 << 10
CONNECT_TRIES_S = 5.0  # the server is started first; its listen may still be a moment away


def server(port: int) -> int:
    with socket.create_server(("127.0.0.1", port)) as listener:
        conn, _addr = listener.accept()
    buf = bytearray(CHUNK)
    with conn:
        while conn.recv_into(buf):
            pass
    return 0


def client(port: int, seconds: float) -> int:
    give_up = time.monotonic() + CONNECT_TRIES_S
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)
    buf = bytes(CHUNK)
    with sock:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock.sendall(buf)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "server":
        return server(int(argv[1]))
    if len(argv) == 3 and argv[0] == "client":
        return client(int(argv[1]), float(argv[2]))
    print("usage: tcp_stream.py server PORT | tcp_stream.py client PORT SECONDS", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
