"""End to end: project each shipped fixture recording and check the result against values computed
by hand (plain SQL over the fixture's tables, not the model's code) from its category totals.

Reads private copies of the fixtures (conftest ``fixture_copy``); skips only where the fixture
file does not exist yet.
"""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dpuprof.project import from_recording, load_profile, build_projection as project
from dpuprof.recording import load

SCENARIOS = ("ddp-plain", "ddp-encrypted", "ddp-compressed", "storage-heavy", "compute-bound")
INFRA = ("network", "storage", "crypto", "compression")
RDMA_COST_S = (500 + 1000 + 0) * 1e-9  # connectx-7 rdma: o0 + L + Q per work request


class Totals:
    """Category totals read with plain SQL."""

    def __init__(self, path: Path):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        q = lambda sql, *a: db.execute(sql, a).fetchall()  # noqa: E731
        self.meta = {k: json.loads(v) for k, v in q("SELECT key, value FROM meta")}
        t0, t1 = q("SELECT min(t_start), max(t_end) FROM intervals")[0]
        self.duration = t1 - t0
        self.cpu_count = self.meta["cpu_count"]
        wl = {r[0] for r in q("SELECT pid FROM processes WHERE in_workload != 0")}
        self.host, self.wl = {}, {}
        for pid, cat, sub, s in q("SELECT pid, category, subcategory, sum(cpu_s) FROM cpu_category "
                                  "WHERE category != 'idle' GROUP BY pid, subcategory"):
            self.host[sub] = self.host.get(sub, 0.0) + s
            if pid in wl:
                self.wl[sub] = self.wl.get(sub, 0.0) + s
        tcp = q("SELECT count(*) FROM sock_io WHERE protocol = 'tcp'")[0][0] > 0
        where = "WHERE protocol = 'tcp'" if tcp else ""
        rows = q(f"SELECT pid, bytes, calls FROM sock_io {where}")
        self.all_bytes = sum(r[1] for r in rows)
        self.wl_bytes = sum(r[1] for r in rows if r[0] in wl)
        self.wl_calls = sum(r[2] for r in rows if r[0] in wl)
        db.close()

    def infra(self, workload=False):
        src = self.wl if workload else self.host
        return sum(v for k, v in src.items() if k.split(".")[0] in INFRA)

    def busy(self, workload=False):
        return sum((self.wl if workload else self.host).values())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_ideal_matches_category_totals(scenario, fixture_copy):
    path = fixture_copy(scenario)
    t = Totals(path)
    p = project(from_recording(load(path)), load_profile("ideal"))
    cap = t.cpu_count * t.duration
    infra = t.infra()
    assert p.totals.infrastructure_before_s == pytest.approx(infra, abs=2e-6)
    assert p.totals.freed_s == pytest.approx(infra, abs=2e-6)
    assert p.cores_for_ai.before_pct == pytest.approx(100 * (1 - infra / cap), abs=1e-3)
    assert p.cores_for_ai.after_pct == pytest.approx(100.0, abs=1e-3)
    wl, wl_infra = t.busy(workload=True), t.infra(workload=True)
    if wl > wl_infra:
        # the CPU-contention proxy is still T / (T - F_job); the critical-path expected lies in
        # its own [low, high] (tests/test_project_critical_path.py derives it by hand)
        sp = p.speedup
        assert sp.contention_proxy == pytest.approx(wl / (wl - wl_infra), rel=1e-4)
        assert sp.low <= sp.expected <= sp.high


@pytest.mark.parametrize("scenario", ("ddp-plain", "ddp-encrypted", "ddp-compressed"))
def test_connectx7_network_freed_by_hand(scenario, fixture_copy):
    """RDMA takes the collective share of each network subcategory (at least the workload's own
    part), pays n x (o0 + L) per recorded send/recv call; ASAP2 takes the rest of filter/switching."""
    path = fixture_copy(scenario)
    t = Totals(path)
    share = min(1.0, t.wl_bytes / t.all_bytes) if t.all_bytes > 0 else 1.0
    rdma_before, asap2 = 0.0, 0.0
    for sub, host in t.host.items():
        if not sub.startswith("network.") or host <= 0:
            continue
        sh = min(1.0, max(share, t.wl.get(sub, 0.0) / host))
        rdma_before += sh * host
        if sub in ("network.filter", "network.switching"):
            asap2 += (1 - sh) * host
    overhead = t.wl_calls * RDMA_COST_S
    expect = (rdma_before - overhead if rdma_before > overhead else 0.0) + asap2
    p = project(from_recording(load(path)), load_profile("connectx-7"))
    assert p.by_category["network"].freed_s == pytest.approx(expect, abs=5e-6)
    network = sum(v for k, v in t.host.items() if k.startswith("network."))
    assert p.by_category["network"].before_s == pytest.approx(network, abs=2e-6)


def test_cli_on_fixture_stores_projection(tmp_path, fixture_copy):
    path = fixture_copy("ddp-plain")
    out = tmp_path / "plain.proj.json"
    res = subprocess.run([sys.executable, "-m", "dpuprof", "project", str(path), "--dpu", "bluefield",
                          "--nodes", "4", "--gpus-per-node", "8", "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    proj = json.loads(out.read_text())
    assert proj["dpu"]["name"] == "bluefield-3"
    sp = proj["speedup"]
    assert sp["low"] <= sp["expected"] <= sp["high"]
    assert proj["allreduce"] is not None and proj["allreduce"]["tcp_us"] > proj["allreduce"]["rdma_us"]
