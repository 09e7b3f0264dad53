"""Two "nodes" on one machine: a gloo DDP job across network+UTS namespaces, one recording per node.

Each node is a named network namespace (``ip netns add``) entered with ``nsenter --net`` plus a
fresh UTS namespace (``unshare --uts``) with its own hostname; the two are joined by a veth pair
(with a 1 ms ``tc netem`` delay where the kernel has sch_netem). Each node runs
``dpuprof record -o run-%h.rec -- python examples/train_ddp.py`` as one rank of a world of two
(RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set as torchrun would, GLOO_SOCKET_IFNAME the
node's veth), both with SLURM_JOB_ID=netns-test.

The mount namespace is left alone (``ip netns exec`` would remount /sys and hide tracefs from the
recorder). eBPF is host-wide: each recorder's net_io sees both veth ends, and its workload is its
own command's tree. The recorder reads its host name with socket.gethostname() (uname's nodename),
which is the UTS namespace's.

Asserts: the gloo payload went over the veths (net_io per device: the bytes DDP must send, from
the gradient size, within 5 %), each node's workload TCP sends match its veth's tx, ``meta.host`` is each
namespace's hostname, and ``dpuprof report run-*.rec --format json`` over the two recordings
(same SLURM_JOB_ID) builds a job view naming both hosts. The JSON keys relied on: ``kind``
("merge"), ``runs[*].host``, ``total.nodes``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, dpuprof
from dpuprof.recording import load

TRAIN = REPO / "examples" / "train_ddp.py"
JOB_ID = "netns-test"
STEPS = 8
# A small MLP: 64x64 crops -> 256 -> 256 -> 10, about 1.12 M parameters, 4.5 MB of gradients a step.
SIZES = ["--image-size", "64", "--crop", "64", "--hidden", "256", "--width", "256", "--layers", "1",
         "--batch-size", "8", "--shards", "4", "--workers", "0"]
PORT = 29731
# Typically 35-95 s on the shared 2-core VM (two torch imports and two bcc compiles share the cores).
WAIT_S = 300


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=30)


class Nodes:
    """Two named network namespaces joined by a veth pair; removed in ``close`` whatever happened."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.ns = [f"dpn{tag}a", f"dpn{tag}b"]
        self.dev = [f"dpv{tag}a", f"dpv{tag}b"]
        self.host = [f"dpuprof-node-a{tag}", f"dpuprof-node-b{tag}"]
        self.addr = ["10.231.7.1", "10.231.7.2"]
        self.netem = False

    def open(self) -> None:
        for ns in self.ns:
            _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "add", self.dev[0], "type", "veth", "peer", "name", self.dev[1])
        for ns, dev, addr in zip(self.ns, self.dev, self.addr):
            _sh("ip", "link", "set", dev, "netns", ns)
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            # Optional: a 1 ms one-way delay, where the kernel has sch_netem (this VM's has not).
            self.netem = _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms",
                             check=False).returncode == 0

    def close(self) -> None:
        for ns in self.ns:  # deleting a namespace destroys the veth end inside it, and so the pair
            _sh("ip", "netns", "del", ns, check=False)
        _sh("ip", "link", "del", self.dev[0], check=False)  # if it never left the host namespace

    def command(self, i: int, argv: list[str]) -> list[str]:
        """``argv`` run inside node ``i``: its network namespace, a new UTS namespace, its hostname."""
        return ["nsenter", f"--net=/run/netns/{self.ns[i]}", "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.host[i], *argv]


def _needs_tools():
    for tool in ("ip", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


def _record_argv(data_dir: Path) -> list[str]:
    # Only the probes this test reads (the core ones come too), and no perf trampoline: two bcc
    # compiles and two torch imports share the cores, and these keep the test near half a minute.
    return [PYTHON, "-m", "dpuprof", "record", "-q", "-o", "run-%h.rec", "--probes", "net_dev,sock_io",
            "--no-python-frames", "--", PYTHON, str(TRAIN),
            "--variant", "plain", "--steps", str(STEPS), "--data-dir", str(data_dir), "--json",
            "--timeout", str(WAIT_S), *SIZES]


def _start(nodes: Nodes, i: int, cwd: Path) -> subprocess.Popen:
    # Each node compiles its probes, as two real nodes' first starts do (DPUPROF_PROBE_CACHE=off):
    # with both loading the suite's cached probes (0.3 s), a rank aborted in torch ("terminate
    # called without an active exception", exit 134) in 2 of 6 full suite runs on 2026-12-05,
    # rank 0 once and rank 1 once, never in 6 runs of this file alone; the cause is not found.
    env = dict(os.environ, SLURM_JOB_ID=JOB_ID, RANK=str(i), LOCAL_RANK="0", WORLD_SIZE="2",
               MASTER_ADDR=nodes.addr[0], MASTER_PORT=str(PORT), GLOO_SOCKET_IFNAME=nodes.dev[i],
               DPUPROF_PROBE_CACHE="off")
    return subprocess.Popen(nodes.command(i, _record_argv(cwd / f"data-{i}")), cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_all(procs: list[subprocess.Popen], deadline: float) -> list[tuple[str, str]]:
    """(stdout, stderr) of each; past ``deadline`` the rest are stopped, and their output so far kept
    for the failure message (returncode then says they were stopped)."""
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.terminate()  # record forwards SIGTERM to its command, then escalates to SIGKILL
            outs.append(p.communicate(timeout=60))
    return outs


def _stop(procs: list[subprocess.Popen]) -> None:
    """Each process is the recorder itself (nsenter, unshare and sh exec it): SIGTERM reaches its
    command too; SIGKILL after 30 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _net_by_dev(rec) -> dict:
    df = rec.table("net_io")
    return {(d, r): int(b) for (d, r), b in df.groupby(["dev", "direction"])["bytes"].sum().items()}


@pytest.mark.root
@pytest.mark.slow
def test_ddp_across_two_namespaces_goes_over_veth_and_merges_into_a_job_view(tmp_path):
    _needs_tools()
    nodes = Nodes()
    procs: list[subprocess.Popen] = []
    try:
        nodes.open()
        t0 = time.monotonic()
        procs = [_start(nodes, i, tmp_path) for i in (0, 1)]
        outs = _wait_all(procs, deadline=time.monotonic() + WAIT_S)
        print(f"two recorded nodes in {time.monotonic() - t0:.1f} s (netem {nodes.netem})")
        for i, (p, (out, err)) in enumerate(zip(procs, outs)):
            assert p.returncode == 0, f"node {i} exited {p.returncode}:\n{err[-3000:]}"
    finally:
        _stop(procs)
        nodes.close()
    result = json.loads(outs[0][0].strip().splitlines()[-1])  # rank 0's JSON line
    assert result["world_size"] == 2 and result["steps"] == STEPS
    grad_bytes = result["grad_bytes_per_step"]

    paths = [tmp_path / f"run-{h}.rec" for h in nodes.host]
    recs = [load(p) for p in paths]  # run-%h.rec expanded to each namespace's hostname
    for rec, host in zip(recs, nodes.host):
        assert rec.meta["host"] == host
        assert rec.complete
    for rec in recs:
        net = _net_by_dev(rec)
        print({k: v for k, v in net.items() if k[0] in nodes.dev or k[0] == "lo"})
        # The gloo payload, from first principles: DDP broadcasts rank 0's parameters once (G bytes,
        # the size of the gradients), then each step's ring all-reduce between two ranks sends G/2
        # (reduce-scatter) + G/2 (all-gather) each way. Each recorder sees both veth ends (eBPF is
        # host-wide). What is left over is headers, ACKs, barriers and the rendezvous: well under 5 %.
        for dev, payload in zip(nodes.dev, ((STEPS + 1) * grad_bytes, STEPS * grad_bytes)):
            tx = net.get((dev, "tx"), 0)
            assert payload <= tx < 1.05 * payload, (dev, tx, payload)
    for i, rec in enumerate(recs):
        # The workload's own TCP sends (sock_io rows of its tree's pids) are what left on its veth.
        procs_t = rec.table("processes")
        mine = set(procs_t.loc[procs_t["in_workload"] == 1, "pid"])
        sock = rec.table("sock_io")
        sends = sock["pid"].isin(mine) & (sock["protocol"] == "tcp") & (sock["direction"] == "send")
        sent = sock.loc[sends, "bytes"].sum()
        tx = _net_by_dev(rec).get((nodes.dev[i], "tx"), 0)
        print(f"node {i}: workload TCP sends {sent} B, {nodes.dev[i]} tx {tx} B")
        assert 0.97 < sent / tx <= 1.0, (sent, tx)  # the rest: headers and ACKs

    res = dpuprof("report", *paths, "--format", "json", "-q", "-o", tmp_path / "job.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    view = json.loads((tmp_path / "job.json").read_text())
    assert view["kind"] == "merge"
    assert sorted(r["host"] for r in view["runs"]) == sorted(nodes.host)
    named = " ".join(map(str, view["total"]["nodes"]))
    assert all(h in named for h in nodes.host), view["total"]["nodes"]
