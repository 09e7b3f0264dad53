"""TCP bytes per process from the sockets' own counters (record/drain/sockdiag.py), read from this
machine's kernel through sock_diag: no root is needed for the sockets of one's own namespace.

The root test records a workload that moves a known number of bytes over three short TCP
connections (closed before any drain: the probe sock_close keeps their bytes) and one it holds
open, with the default probes (no sock_io program), and finds them under its pid."""

from __future__ import annotations

import gc
import os
import socket
import struct
import subprocess
import sys

import pytest

from conftest import PYTHON, dpuprof, wait_for_intervals
from dpuprof.record.drain import sockdiag
from dpuprof.record.drain.sockdiag import SockCounters, diag_socket, dump, lookup, parse, socket_inodes
from dpuprof.recording import load


SYN = 1  # tcpi_bytes_acked counts the connecting side's SYN as one byte


@pytest.fixture
def tcp_pair():
    """Makes connected loopback TCP pairs, closed at the test's end: a pair left to the garbage
    collector would close (a FIN: one byte acked) in the middle of a later test's counting."""
    gc.collect()  # earlier tests' sockets of this process closed now, not while these count
    made = []

    def make():
        srv = socket.create_server(("127.0.0.1", 0))
        a = socket.create_connection(srv.getsockname())
        b, _ = srv.accept()
        srv.close()
        made.extend((a, b))
        return a, b

    yield make
    for s in made:
        s.close()


def _move(a, b, n: int) -> None:
    a.sendall(b"x" * n)
    got = 0
    while got < n:
        got += len(b.recv(65536))


def test_a_dump_gives_each_sockets_inode_and_exact_payload_bytes(tcp_pair):
    a, b = tcp_pair()
    _move(a, b, 123_457)
    _move(b, a, 1_000)
    rows = {inode: (acked, received) for inode, acked, received in dump(diag_socket(), bytearray(1 << 16)).values()}
    assert rows[os.fstat(a.fileno()).st_ino] == (123_457 + SYN, 1_000)  # the connecting side's SYN
    assert rows[os.fstat(b.fileno()).st_ino] == (1_000, 123_457)
    inodes = socket_inodes(os.getpid())
    assert inodes[os.fstat(a.fileno()).st_ino] == os.getpid()


def test_counters_are_deltas_filed_under_the_holder_or_0(tcp_pair):
    a, b = tcp_pair()
    mine = SockCounters()
    theirs = SockCounters()  # this process is not its workload
    mine.sample([os.getpid()])
    theirs.sample([1])
    _move(a, b, 50_000)
    # (the SYN was before the baseline)
    assert mine.sample([os.getpid()]) == [(os.getpid(), "tcp", "recv", 50_000, 0),
                                          (os.getpid(), "tcp", "send", 50_000, 0)]
    others = theirs.sample([1])  # the host's other sockets (none, on a quiet machine) are 0's too
    assert {pid for pid, *_ in others} == {0}
    assert all(n >= 50_000 for *_, n, _calls in others) and len(others) == 2, others
    assert mine.sample([os.getpid()]) == []  # nothing moved since


def test_a_socket_opened_after_the_baseline_counts_from_zero(tcp_pair):
    mine = SockCounters()
    mine.sample([os.getpid()])
    a, b = tcp_pair()
    _move(a, b, 7_000)
    assert (os.getpid(), "tcp", "send", 7_000 + SYN, 0) in mine.sample([os.getpid()])


def test_a_quiet_namespace_is_not_dumped_and_loses_nothing(monkeypatch, tcp_pair):
    counters = SockCounters()
    counters.sample([os.getpid()])
    ns = next(iter(counters.socks))
    a, b = tcp_pair()
    calls = []
    real = sockdiag.dump
    monkeypatch.setattr(sockdiag, "dump", lambda *args: calls.append(1) or real(*args))
    assert counters.sample([os.getpid()], quiet={ns}) == [] and calls == []
    _move(a, b, 9_000)
    got = counters.sample([os.getpid()])  # the new socket's bytes, all of them
    assert calls and (os.getpid(), "tcp", "send", 9_000 + SYN, 0) in got


def _cookie(sock, rows) -> int:
    inode = os.fstat(sock.fileno()).st_ino
    return next(c for c, (i, *_rest) in rows.items() if i == inode)


def test_a_closed_sockets_last_bytes_count_once(tcp_pair):
    a, b = tcp_pair()
    counters = SockCounters()
    counters.sample([os.getpid()])
    rows = dump(diag_socket(), bytearray(1 << 16))
    ca, cb = _cookie(a, rows), _cookie(b, rows)
    _move(a, b, 4_000)
    # What probes/sock_close.bpf.c gives for the two, as if closed now: their counters then.
    final = dump(diag_socket(), bytearray(1 << 16))
    closed = [(ca, os.getpid(), *final[ca][1:]), (cb, os.getpid(), *final[cb][1:])]
    got = counters.sample([os.getpid()], closed=closed)
    assert got == [(os.getpid(), "tcp", "recv", 4_000, 0), (os.getpid(), "tcp", "send", 4_000, 0)]
    assert counters.sample([os.getpid()]) == []  # still listed: nothing counted twice


def test_a_lookup_gives_the_dumps_rows_of_the_sockets_asked_for_and_none_once_closed(tcp_pair):
    a, b = tcp_pair()
    tcp_pair()  # another pair, not asked for
    _move(a, b, 2_000)
    ids: dict = {}
    buf = bytearray(1 << 16)
    rows = dump(diag_socket(), buf, ids)
    ca, cb = _cookie(a, rows), _cookie(b, rows)
    assert lookup(diag_socket(), buf, [ids[ca], ids[cb]]) == {ca: rows[ca], cb: rows[cb]}
    a.close()
    b.close()  # a in TIME_WAIT now (no counters), b gone
    assert lookup(diag_socket(), buf, [ids[ca], ids[cb]]) == {}


def test_between_dumps_the_known_sockets_are_looked_up_until_a_connection_is_opened(monkeypatch, tcp_pair):
    a, b = tcp_pair()
    counters = SockCounters()
    counters.sample([os.getpid()], opened=1)  # the first sample dumps
    dumps = []
    real = sockdiag.dump
    monkeypatch.setattr(sockdiag, "dump", lambda *args: dumps.append(1) or real(*args))
    _move(a, b, 5_000)
    assert counters.sample([os.getpid()], opened=1) == [(os.getpid(), "tcp", "recv", 5_000, 0),
                                                       (os.getpid(), "tcp", "send", 5_000, 0)]
    assert dumps == []  # looked up, not dumped
    c, d = tcp_pair()  # sock_close would count this connection: opened 1 -> 2
    _move(c, d, 3_000)
    got = counters.sample([os.getpid()], opened=2)
    assert dumps and (os.getpid(), "tcp", "send", 3_000 + SYN, 0) in got


def test_a_failed_dump_keeps_the_last_reading_and_counts_it_next_time(monkeypatch, tcp_pair):
    a, b = tcp_pair()
    counters = SockCounters()
    counters.sample([os.getpid()])
    _move(a, b, 6_000)
    real = sockdiag.dump

    def refused(*args):
        raise OSError(1, "sock_diag: Operation not permitted")

    monkeypatch.setattr(sockdiag, "dump", refused)
    assert counters.sample([os.getpid()]) == []  # nothing read, nothing lost
    monkeypatch.setattr(sockdiag, "dump", real)
    assert counters.sample([os.getpid()]) == [(os.getpid(), "tcp", "recv", 6_000, 0),
                                              (os.getpid(), "tcp", "send", 6_000, 0)]


def test_a_connection_between_two_reads_counts_only_when_the_workload_closed_it():
    counters = SockCounters()
    counters.sample([os.getpid()])
    closed = [(0, os.getpid(), 5_001, 300), (0, 1, 9_999, 9_999), (424242, os.getpid(), 10, 0)]
    assert counters.sample([os.getpid()], closed=closed) == [
        (os.getpid(), "tcp", "recv", 300, 0), (os.getpid(), "tcp", "send", 5_011, 0)]


def test_an_error_reply_is_one_oserror():
    err = struct.pack("=IHHII", 36, sockdiag.NLMSG_ERROR, 0, 0, 0) + struct.pack("=i", -22) + bytes(16)
    with pytest.raises(OSError, match="Invalid argument"):
        parse(bytearray(err), len(err), {})


WORKLOAD = r"""
import socket, sys


def moved(n, byte):
    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    a.sendall(byte * n)
    got = 0
    while got < n:
        got += len(b.recv(1 << 20))
    return srv, a, b


for _ in range(3):  # connections that live between two drains: probes/sock_close.bpf.c keeps them
    for s in moved(500_000, b"y"):
        s.close()
held = moved(3_000_000, b"x")
print("moved", flush=True)
sys.stdin.read()  # the connection stays open until the test has seen a drain
"""


@pytest.mark.root
def test_the_default_recorder_counts_a_workloads_tcp_bytes_without_sock_io(tmp_path):
    out = tmp_path / "tcp.rec"
    proc = subprocess.Popen([PYTHON, "-m", "dpuprof", "record", "-q", "-o", str(out), "--no-python-frames",
                             "--", PYTHON, "-c", WORKLOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "moved"
        seen = wait_for_intervals(out, 1, proc)
        assert wait_for_intervals(out, seen + 2, proc) >= seen + 2  # a whole interval after the move
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
    rec = load(out)
    assert "sock_io" not in rec.meta["probes_used"] and "sock_close" in rec.meta["probes_used"]
    assert rec.info.io_sources["sock_io"].startswith("sock_diag")
    procs = rec.table("processes")
    child = set(procs.loc[procs["in_workload"] == 1, "pid"])
    sock = rec.table("sock_io")
    sock = sock[sock["pid"].isin(child) & (sock["protocol"] == "tcp")]
    by_dir = sock.groupby("direction")["bytes"].sum().to_dict()
    # SYNs and FINs count as bytes too (sockdiag.py): up to 3 sent and 2 received a connection.
    assert 0 <= by_dir["send"] - 4_500_000 <= 3 * 4 and 0 <= by_dir["recv"] - 4_500_000 <= 2 * 4, sock
    assert (sock["calls"] == 0).all()
    res = dpuprof("report", str(out), "--format", "json", "-q", "-o", str(tmp_path / "r.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
