"""TCP payload bytes per process from the kernel's per-socket counters: no program per socket call.

The offload model reads the job's socket bytes (its share of the host's traffic, the all-reduce's
bytes per step: dpuprof/project/features.py). The kernel counts them per TCP socket, as
``tcpi_bytes_acked`` and ``tcpi_bytes_received`` of ``struct tcp_info`` (RFC 4898), and sock_diag
(inet_diag, what ``ss -ti`` reads) dumps every socket's in one netlink request per address family
and network namespace (netns.py). The probe sock_io paid a program on every send and receive call
instead: 512 ns a UDP send + receive pair from the caller's side (benchmarks/sock_call_cost.py),
0.57 % of a core in bpf_stats alone on an iperf3 flood (benchmarks/HOT_LOADS.md at 90d4d3a). It stays, opt-in
(``--probes``), for what counters cannot give:

- calls: sock_diag counts bytes, not send/receive calls, so rows from here carry ``calls`` 0 and
  meta ``io_sources`` names this counter (the projection then counts one RDMA work request per
  packet: an upper bound, and it says so);
- UDP: a UDP socket has no byte counters.

What the counters miss:

- without the probe sock_close (no BTF or raw tracepoints, or left out of ``--probes``): a
  connection opened and closed between two reads, and the bytes of a connection's last interval
  before it closes (the devices' counters, net_io, still count their packets and bytes);
- with it, another process's connection that lived between two reads (only the workload's
  processes' closes of sockets never dumped are counted: such a close cannot tell a short
  connection from a long one in a namespace that is not read).

``tcpi_bytes_acked`` also counts the connecting side's SYN, and a FIN, as one byte each.

A socket belongs to the process that holds its inode (a ``/proc/PID/fd`` link "socket:[N]", as
``ss -p`` finds it). Only the workload's processes are searched, and only for sockets that moved
bytes and are not known yet; every other socket's bytes are filed under pid 0 (the host's others).

The probe sock_close (probes/sock_close.bpf.c, one program per TCP state change, never per packet
or call) keeps each socket's counters at its close and the process that closed it: the bytes
since a socket's last dump, and all of a workload connection that lived between two dumps. It
also counts the connections established on the host: while that count stays, the sockets a dump
found are read back one by one (``lookup``), which costs a hash lookup each where a dump walks
the whole table.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

from dpuprof.record.drain.netns import Namespaces

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2  # the attribute holding struct tcp_info
# TCP states whose socket is a full tcp_sock with counters (SYN_RECV and TIME_WAIT are mini
# sockets, LISTEN moves no payload): ESTABLISHED, SYN_SENT, FIN_WAIT1/2, CLOSE, CLOSE_WAIT,
# LAST_ACK, CLOSING.
STATES = sum(1 << s for s in (1, 2, 4, 5, 7, 8, 9, 11))
_NLMSG = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQ = struct.Struct("=BBBxI48x")  # inet_diag_req_v2: family, protocol, ext, states, sockid (any)
_COOKIE_OFF, _INODE_OFF, _MSG_LEN = 44, 68, 72  # in struct inet_diag_msg (uapi/linux/inet_diag.h)
_ID_LEN = 48  # struct inet_diag_sockid: ports, addresses, interface, cookie (msg + 4)
_ACKED_OFF = 120  # tcpi_bytes_acked, then tcpi_bytes_received (uapi/linux/tcp.h, Linux >= 4.1)
CLONE_NEWNET = 0x40000000
# Between full dumps a namespace's known sockets are looked up one by one (``lookup``) while no TCP
# connection was established on the host since the last dump (the probe sock_close counts them)
# and it holds at most EXACT_MAX: a dump walks the whole established-socket hash table (1.6 ms of
# CPU an interval here, 262,144 buckets x 2 families: benchmarks/sockdiag_cost.py), a lookup finds
# one socket. A full dump at least every DUMP_EVERY samples all the same.
EXACT_MAX = 64
DUMP_EVERY = 10


def request(family: int) -> bytes:
    """A sock_diag dump request for ``family``'s TCP sockets in STATES, with their tcp_info."""
    body = _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), STATES)
    return _NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 0, 0) + body


def _messages(buf, n: int):
    """(offset, length, type) of each whole netlink message in ``buf[:n]``."""
    off = 0
    while off + _NLMSG.size <= n:
        length, kind = _NLMSG.unpack_from(buf, off)[:2]
        if length < _NLMSG.size:
            return
        yield off, length, kind
        off += (length + 3) & ~3


def _add_socket(buf, off: int, length: int, out: dict, ids: dict | None) -> None:
    """The socket of the SOCK_DIAG_BY_FAMILY message at ``buf[off:off + length]`` into ``out``
    and ``ids`` (as ``parse``); nothing when it carries no tcp_info."""
    if length < _NLMSG.size + _MSG_LEN:
        return
    msg = off + _NLMSG.size
    (cookie,) = struct.unpack_from("=Q", buf, msg + _COOKIE_OFF)
    (inode,) = struct.unpack_from("=I", buf, msg + _INODE_OFF)
    attr, end = msg + _MSG_LEN, off + length
    while attr + 4 <= end:
        alen, atype = struct.unpack_from("=HH", buf, attr)
        if alen < 4:
            break
        if atype == INET_DIAG_INFO and alen >= 4 + _ACKED_OFF + 16:
            out[cookie] = (inode, *struct.unpack_from("=QQ", buf, attr + 4 + _ACKED_OFF))
            if ids is not None:
                ids[cookie] = (buf[msg], bytes(buf[msg + 4:msg + 4 + _ID_LEN]))
        attr += (alen + 3) & ~3


def parse(buf, n: int, out: dict, ids: dict | None = None) -> bool:
    """Add {cookie: (inode, bytes_acked, bytes_received)} of the sockets in ``buf[:n]`` (netlink
    messages) to ``out``, and {cookie: (family, its inet_diag_sockid as bytes)} to ``ids``; True
    once the dump's end is in it. OSError for an error message."""
    for off, length, kind in _messages(buf, n):
        if kind == NLMSG_DONE:
            return True
        if kind == NLMSG_ERROR:
            errno = -struct.unpack_from("=i", buf, off + _NLMSG.size)[0]
            raise OSError(errno, f"sock_diag: {os.strerror(errno)}")
        if kind == SOCK_DIAG_BY_FAMILY:
            _add_socket(buf, off, length, out, ids)
    return False


def dump(sock: socket.socket, buf: bytearray, ids: dict | None = None) -> dict[int, tuple[int, int, int]]:
    """{cookie: (inode, bytes_acked, bytes_received)} of every IPv4 and IPv6 TCP socket that
    ``sock`` (a NETLINK_SOCK_DIAG socket) sees: those of its network namespace (their ids into
    ``ids``, as ``parse``)."""
    out: dict[int, tuple[int, int, int]] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        sock.send(request(family))
        while not parse(buf, sock.recv_into(buf), out, ids):
            pass
    return out


def lookup(sock: socket.socket, buf: bytearray, wanted: list[tuple[int, bytes]]) -> dict[int, tuple[int, int, int]]:
    """``dump``'s rows of the sockets ``wanted`` [(family, inet_diag_sockid)] only: one exact
    request each (the kernel finds each in its hash table, where a dump walks every bucket of it),
    sent together. A socket gone since (an error reply: ENOENT, or ESTALE for its id reused) has
    no row. The kernel answers every request within the send (sock_diag runs in the sender's
    context), so the replies are read without waiting; OSError when fewer than one a request are
    there (the caller dumps instead)."""
    reqs = b"".join(_NLMSG.pack(_NLMSG.size + _REQ.size, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0)
                    + _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0xFFFFFFFF)[:8] + sockid
                    for seq, (family, sockid) in enumerate(wanted, 1))
    sock.send(reqs)
    out: dict[int, tuple[int, int, int]] = {}
    replies = 0
    while replies < len(wanted):
        try:
            n = sock.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            raise OSError(f"sock_diag: {replies} replies to {len(wanted)} requests") from None
        for off, length, kind in _messages(buf, n):
            replies += 1  # the socket's message, or an error: one a request
            if kind == SOCK_DIAG_BY_FAMILY:
                _add_socket(buf, off, length, out, None)
    return out


def diag_socket() -> socket.socket:
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)


def diag_socket_in(pid: int) -> socket.socket | None:
    """A sock_diag socket in ``pid``'s network namespace (a netlink socket answers for the namespace
    it was made in): this thread enters it, makes the socket and returns. None when the kernel
    refuses (entering a namespace needs CAP_SYS_ADMIN) or ``pid`` is gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    except OSError:
        return None
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError:
        os.close(own)
        return None
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            return None
        try:
            return diag_socket()
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:  # never seen; going on in the job's namespace is worse
                raise OSError(ctypes.get_errno(), "cannot return to the recorder's network namespace")
    finally:
        os.close(target)
        os.close(own)


def socket_inodes(pid: int) -> dict[int, int]:
    """{socket inode: pid} of ``pid``'s open file descriptors ({} when gone or unreadable)."""
    out = {}
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return out
    for fd in fds:
        try:
            link = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out[int(link[8:-1])] = pid
    return out


class SockCounters:
    """``sample(pids, quiet, closed)``: ``sock_io`` rows (pid, "tcp", direction, bytes, 0) since
    the previous call, over the namespaces of ``pids`` (the workload's live processes) and this
    process's. ``pid`` is the socket's holder among ``pids`` (or the process that closed it), else
    0. A socket, or a namespace, first seen after the first call counts from its counters then (a
    new socket from zero: all it moved). ``closed``: (cookie, closer tgid, bytes_acked,
    bytes_received) of the sockets closed since the previous call (probes/sock_close.bpf.c), whose
    bytes since their last dump no dump can give."""

    def __init__(self):
        self.ids: dict[int, tuple[int, bytes]] = {}  # cookie -> (family, inet_diag_sockid), from dumps
        self.opened: int | None = None  # sock_close's count of connections established, at the last sample
        self.samples = 0
        self.netns = Namespaces()
        self.socks: dict[str, socket.socket | None] = {}  # netns -> its sock_diag socket
        self.prev: dict[int, tuple[str, int, int, int]] = {}  # cookie -> (netns, inode, acked, received)
        self.gone: dict[int, tuple[str, int, int, int]] = {}  # the same, of sockets the last dump lost
        self.owner: dict[int, int] = {}  # cookie -> holder (0: none of the workload's)
        self.searched: set[int] = set()  # pids whose descriptors were searched
        self.buf = bytearray(1 << 16)
        self.primed = False
        self.new_ns: set[str] = set()

    def sample(self, pids, quiet=frozenset(), closed=(), opened: int | None = None) -> list[tuple]:
        """The rows since the previous call. Namespaces in ``quiet`` (whose devices moved no bytes
        since then, so no socket in them moved payload) are not dumped: a dump walks the kernel's
        whole established-socket hash table, whatever it holds (header). ``opened``: the count of
        TCP connections established on the host so far (probes/sock_close.bpf.c), or None
        (without the probe): while it stays, the known sockets are looked up, not dumped."""
        pids = set(pids)
        moved: list[tuple[int, int, int, int, int]] = []  # (cookie, inode, sent, received, closer)
        for cookie, closer, acked, received in closed:
            last = (self.prev.pop(cookie, None) or self.gone.pop(cookie, None)) if cookie else None
            if last is None and self.primed and closer in pids:
                # Never dumped: a connection of the workload's that lived between two reads, all
                # it moved. (Another's may have lived long, in a namespace not read: left out.)
                moved.append((0, 0, acked, received, closer))
            elif last is not None:
                moved.append((cookie, last[1], acked - last[2], received - last[3], closer))
                self.prev[cookie] = (last[0], last[1], acked, received)  # if still listed: moved nothing more
        exact = opened is not None and opened == self.opened and self.samples % DUMP_EVERY != 0
        cur = self._dump(pids, quiet, exact)
        self.opened = opened
        self.samples += 1
        for cookie, row in cur.items():
            before = self.prev.get(cookie)
            if before is None and (row[0] in self.new_ns or not self.primed):
                continue
            a0, r0 = (before[2], before[3]) if before else (0, 0)
            if row[2] > a0 or row[3] > r0:
                moved.append((cookie, row[1], row[2] - a0, row[3] - r0, 0))
        self.gone = {c: row for c, row in self.prev.items() if c not in cur}
        if len(self.ids) > 2 * len(cur) + 64:  # the ids of sockets long gone
            self.ids = {c: sockid for c, sockid in self.ids.items() if c in cur}
        self.prev = cur
        self.primed = True
        return self._rows(moved, pids)

    def _dump(self, pids: set[int], quiet, exact: bool) -> dict[int, tuple[str, int, int, int]]:
        """{cookie: (netns, inode, acked, received)} of the sockets now; a quiet namespace's as
        they were. ``new_ns``: the namespaces read for the first time (their sockets: baselines).
        ``exact``: a namespace read before may have its known sockets looked up instead (header)."""
        reps = self.netns.reps(pids)
        for ns in [n for n in self.socks if n not in reps]:  # no workload process left in it
            sock = self.socks.pop(ns)
            if sock is not None:
                sock.close()
        cur = {c: row for c, row in self.prev.items() if row[0] in quiet and row[0] in reps}
        self.new_ns = set()
        for ns, pid in reps.items():
            if ns not in self.socks:
                self.socks[ns] = diag_socket_in(pid) if pid != os.getpid() else diag_socket()
                self.new_ns.add(ns)
            elif ns in quiet:
                continue
            sock = self.socks[ns]
            if sock is None:
                continue
            known = {c: row[1:] for c, row in self.prev.items() if row[0] == ns}  # the last reading
            got = None
            if exact and ns not in self.new_ns and len(known) <= EXACT_MAX and known.keys() <= self.ids.keys():
                try:
                    got = lookup(sock, self.buf, [self.ids[c] for c in known]) if known else {}
                except OSError:
                    pass  # a reply missing: dumped instead
            if got is None:
                try:
                    got = dump(sock, self.buf, self.ids)
                except OSError:
                    # sock_diag refused (never seen here): this namespace's sockets keep their last
                    # reading, as a quiet one's, rather than the recording stopping on it.
                    got = known
            cur.update((c, (ns, *row)) for c, row in got.items())
        return cur

    def _rows(self, moved, pids: set[int]) -> list[tuple]:
        self._find_owners([(c, i) for c, i, *_ in moved if c and i], pids)
        sums: dict[tuple[int, str], int] = {}
        for cookie, _inode, sent, received, closer in moved:
            pid = self.owner.get(cookie, 0) if cookie else 0
            if not pid and closer in pids:
                pid = closer
            for direction, nbytes in (("send", sent), ("recv", received)):
                if nbytes > 0:
                    sums[(pid, direction)] = sums.get((pid, direction), 0) + nbytes
        live = self.prev.keys() | self.gone.keys()
        for cookie in [c for c in self.owner if c not in live]:
            del self.owner[cookie]
        return [(pid, "tcp", d, n, 0) for (pid, d), n in sorted(sums.items())]

    def _find_owners(self, sockets: list[tuple[int, int]], pids: set[int]) -> None:
        """Search the descriptors of ``pids`` for the (cookie, inode) ``sockets`` whose holder is
        not known yet, and of the pids not searched before (new to the workload) for those filed
        under 0 so far."""
        new_pids = pids - self.searched
        unknown = {i: c for c, i in sockets if c not in self.owner}
        retry = {i: c for c, i in sockets if self.owner.get(c) == 0} if new_pids else {}
        for wanted, where in ((unknown, pids), (retry, new_pids)):
            for pid in where:
                if not wanted:
                    break
                for inode in wanted.keys() & socket_inodes(pid).keys():
                    self.owner[wanted.pop(inode)] = pid
            for cookie in wanted.values():
                self.owner[cookie] = 0
        self.searched = pids if unknown else (self.searched & pids) | (new_pids if retry else set())


__all__ = ["SockCounters", "diag_socket", "diag_socket_in", "dump", "lookup", "parse", "request", "socket_inodes"]
