"""The counters the default recorder reads instead of per-event programs: /proc/diskstats for
block I/O (record/drain/diskstats.py) and /proc/PID/net/dev for devices (record/drain/netdev.py),
parsed from text captured in the layouts this kernel prints, and read live from this machine."""

from __future__ import annotations

import os
import socket

from dpuprof.record.drain.diskstats import DiskStats, parse_diskstats, request_devices
from dpuprof.record.drain.netdev import NetDevTelemetry, parse_net_dev, parse_retrans

DISKSTATS = """\
 254       0 vda 23270 2115 1392994 10862 6791 5372 339672 13207 0 22312 27007 10 0 2048 5 3340 2932
 254       1 vda1 23000 2115 1390000 10800 6700 5372 339000 13000 0 22000 26000 0 0 0 0 0 0
   7       0 loop0 1024 0 131072 200 256 0 32768 80 0 250 280
"""


def test_diskstats_gives_ios_and_bytes_per_op():
    got = parse_diskstats(DISKSTATS)
    # reads, read bytes, writes, write bytes, discards + flushes, discarded bytes
    assert got["vda"] == (23270, 1392994 * 512, 6791, 339672 * 512, 10 + 3340, 2048 * 512)
    assert got["loop0"] == (1024, 64 << 20, 256, 16 << 20, 0, 0)  # an older layout: no discards


def _sys_block(tmp_path, devices: dict[str, list[str]]):
    for name, slaves in devices.items():
        (tmp_path / name / "slaves").mkdir(parents=True)
        for s in slaves:
            (tmp_path / name / "slaves" / s).touch()
    return str(tmp_path)


def test_only_whole_request_based_devices_are_counted(tmp_path):
    sys_block = _sys_block(tmp_path, {"vda": [], "loop0": [], "dm-0": ["vda"]})
    assert request_devices(sys_block) == {"vda", "loop0"}  # no partition, no stacked device


def test_block_rows_are_deltas_per_device_and_op(tmp_path):
    stats = tmp_path / "diskstats"
    stats.write_text(DISKSTATS)
    disk = DiskStats(str(stats), _sys_block(tmp_path / "sys", {"vda": [], "loop0": []}))
    stats.write_text(DISKSTATS.replace("loop0 1024 0 131072", "loop0 1034 0 132352"))
    assert disk.sample() == [("loop0", "read", 1280 * 512, 10)]
    assert disk.sample() == []


def test_the_live_diskstats_reads():
    disk = DiskStats()
    assert disk.devices  # this machine has block devices
    assert all(op in ("read", "write", "other") and b >= 0 and n >= 0 for _dev, op, b, n in disk.sample())


NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000      40    0    0    0     0          0         0     7000      50    0    0    0     0       0          0
"""


def test_net_dev_gives_each_devices_bytes_and_packets():
    assert parse_net_dev(NET_DEV) == {"lo": (1000, 10, 1000, 10), "eth0": (7000, 50, 5000, 40)}


def test_retransmits_come_from_snmp():
    snmp = "Tcp: RtoAlgorithm RtoMin RetransSegs InErrs\nTcp: 1 200 17 0\n"
    assert parse_retrans(snmp) == 17
    assert parse_retrans("Ip: Forwarding\nIp: 1\n") == 0


def test_loopback_traffic_is_counted_from_this_namespace():
    net = NetDevTelemetry()
    net.sample([os.getpid()])
    a, b = _tcp_pair()
    a.sendall(b"x" * 100_000)
    got = 0
    while got < 100_000:
        got += len(b.recv(65536))
    rows, _retrans = net.sample([os.getpid()])
    lo = {d: (nbytes, packets) for dev, d, nbytes, packets in rows if dev == "lo"}
    assert lo["tx"][0] >= 100_000 and lo["rx"][0] >= 100_000 and lo["tx"][1] > 0


def _tcp_pair():
    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    return a, b
