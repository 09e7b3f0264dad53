"""Workload: a TCP sender and receiver over loopback in two processes, for ~DURATION seconds.

Prints JSON {"cpu_s": ...}: its own CPU time plus the receiver child's, from getrusage.
"""
import json
import os
import resource
import socket
import sys
import time

duration = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(1)
port = srv.getsockname()[1]
pid = os.fork()
if pid == 0:  # receiver
    conn, _ = srv.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while conn.recv_into(view):
        pass
    os._exit(0)
sock = socket.create_connection(("127.0.0.1", port))
payload = b"\0" * (1 << 20)
end = time.time() + duration
sent = 0
while time.time() < end:
    sock.sendall(payload)
    sent += len(payload)
sock.close()
os.waitpid(pid, 0)
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, "bytes": sent}))
