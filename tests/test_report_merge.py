"""dpuprof report on several nodes: the job identity that decides whether they are one job, the
refusal of unrelated recordings, --compare/--merge arity, and the job view (per-node rows, spread,
stragglers, projections), on copies of a real fixture whose metadata is changed with sqlite3."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dpuprof.errors import UserError
from dpuprof.record.metadata import job_identity
from dpuprof.recording import load
from dpuprof.recording.summary import summarize
from dpuprof.render.build import build_report

FIXTURE = "ddp-plain"  # schema v2, with DDP step markers


def node(src: Path, dst: Path, host: str, *, job_id=None, command=None, shift_s: float = 0.0,
         network_x: float = 1.0) -> Path:
    """A copy of ``src`` at ``dst`` recorded on ``host``: with meta ``job`` (``job_id``), another
    ``command``, moved ``shift_s`` seconds later, or its network CPU multiplied by ``network_x``."""
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    with db:
        def put(key, value):
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))
        put("host", host)
        if job_id is not None:
            put("job", {"job_id": job_id, "job_id_source": "SLURM_JOB_ID", "host": host})
        if command is not None:
            put("command", command)
        if shift_s:
            db.execute("UPDATE intervals SET t_start = t_start + ?, t_end = t_end + ?", (shift_s, shift_s))
            db.execute("UPDATE markers SET t = t + ?", (shift_s,))
            for key in ("start_time", "end_time"):
                (value,) = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                put(key, json.loads(value) + shift_s)
        if network_x != 1.0:
            db.execute("UPDATE cpu_category SET cpu_s = cpu_s * ?, samples = samples * ? "
                       "WHERE category = 'network'", (network_x, int(network_x)))
    db.close()
    return dst


@pytest.fixture
def src(fixture_copy):
    return fixture_copy(FIXTURE)


def report(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpuprof", "report", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def one_error_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpuprof: error: "), res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


# ----------------------------------------------------------------------------- the recorder's side

def test_job_identity_from_the_environment():
    env = {"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "run7", "SLURM_PROCID": "3", "NODE_RANK": "1"}
    assert job_identity(env=env, host="n1") == {"job_id": "4242", "job_id_source": "SLURM_JOB_ID",
                                                "host": "n1", "SLURM_PROCID": "3", "NODE_RANK": "1"}
    assert job_identity("mine", env=env, host="n1")["job_id_source"] == "--job-id"
    assert job_identity(env={"TORCHELASTIC_RUN_ID": "run7"}, host="n1")["job_id"] == "run7"
    # torchrun's default --rdzv-id names no job
    assert job_identity(env={"TORCHELASTIC_RUN_ID": "none"}, host="n1") == \
        {"job_id": None, "job_id_source": None, "host": "n1"}


def test_record_help_has_job_id():
    from click.testing import CliRunner

    from dpuprof.cli import cli

    res = CliRunner().invoke(cli, ["record", "--help"])
    assert res.exit_code == 0 and "--job-id ID" in res.output and "SLURM_JOB_ID" in res.output


# ----------------------------------------------------------------------------- identity and refusal

def test_unrelated_recordings_are_refused_unless_merge(src, tmp_path):
    a, b = node(src, tmp_path / "a.rec", "h1"), node(src, tmp_path / "b.rec", "h2")
    other = json.loads(json.dumps(load(a).meta["command"]))
    other[other.index("plain")] = "encrypted"
    c = node(src, tmp_path / "c.rec", "h3", command=other)
    line = one_error_line(report(a, b, c, "-q"))
    assert "commands differ" in line and "'--variant plain' where c has '--variant encrypted'" in line
    assert "--merge" in line
    res = report(a, b, c, "--merge", "--format", "json")
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["total"]["job"]
    assert job["identity"] == "merged on request (--merge)" and "commands differ" in job["merged_on_request"]
    # two unrelated recordings are compared (before / after), not refused
    assert build_report([a, c]).kind == "compare"


def test_recordings_apart_in_time_or_on_one_host_are_not_one_job(src, tmp_path):
    a, b = node(src, tmp_path / "a.rec", "h1"), node(src, tmp_path / "b.rec", "h2")
    late = node(src, tmp_path / "late.rec", "h3", shift_s=3600)
    with pytest.raises(UserError, match=r"not at the same time: a ended at .* before late began at"):
        build_report([a, b, late])
    twin = node(src, tmp_path / "twin.rec", "h1")
    with pytest.raises(UserError, match="a and twin both recorded host 'h1'"):
        build_report([a, b, twin])
    assert build_report([a, b, twin], mode="merge").kind == "merge"


def test_job_ids_decide_where_recordings_have_them(src, tmp_path):
    cmd = load(src).meta["command"]
    # the same job id: one job even though the commands differ (torchrun's --node-rank does)
    nodes = [node(src, tmp_path / f"n{i}.rec", f"h{i}", job_id="j1", command=cmd + [f"--node-rank={i}"])
             for i in range(3)]
    rep = build_report(nodes)
    assert rep.kind == "merge" and rep.total.job.identity == "job j1 (SLURM_JOB_ID)"
    other = node(src, tmp_path / "x.rec", "h9", job_id="j2")
    with pytest.raises(UserError, match="job ids differ: n0 is job j1, x is job j2"):
        build_report(nodes + [other])
    bare = node(src, tmp_path / "bare.rec", "h8")
    with pytest.raises(UserError, match="bare has no job id while n0 has job j1"):
        build_report(nodes + [bare])


@pytest.mark.parametrize("args,count", [(["--compare"], 1), (["--compare"], 3), (["--merge"], 1)])
def test_compare_and_merge_take_the_right_number_of_files(src, tmp_path, args, count):
    files = [node(src, tmp_path / f"n{i}.rec", f"h{i}") for i in range(count)]
    line = one_error_line(report(*files, *args))
    assert f"got {count}" in line and args[0] in line


# ----------------------------------------------------------------------------- the job view

def test_job_view_per_node_rows_spread_and_straggler(src, tmp_path):
    nodes = [node(src, tmp_path / "n0.rec", "h0", job_id="j1"), node(src, tmp_path / "n1.rec", "h1", job_id="j1"),
             node(src, tmp_path / "n2.rec", "h2", job_id="j1", network_x=5)]
    rep = build_report(nodes)
    total, jv = rep.total, rep.total.job
    singles = [summarize(load(p)) for p in nodes]
    # summarised once from the merged tables, yet the amounts are the nodes' sums
    s = total.summary.contract
    assert s["host"] == ["h0", "h1", "h2"] and s["cpu_count"] == sum(x["cpu_count"] for x in singles)
    for cat, value in s["host_cpu"]["by_category"].items():
        assert math.isclose(value, sum(x["host_cpu"]["by_category"][cat] for x in singles), abs_tol=1e-5)
    assert sorted((p["node"], p["pid"]) for p in s["processes"]) == \
        sorted((f"n{i}", p["pid"]) for i, x in enumerate(singles) for p in x["processes"])
    # per-node rows
    rows = jv.nodes.set_index("node")
    assert list(rows["host"]) == ["h0", "h1", "h2"]
    for i, x in enumerate(singles):
        busy = x["host_cpu"]["total_s"]
        infra = sum(x["host_cpu"]["by_category"][c] for c in ("network", "storage", "crypto", "compression"))
        assert rows.loc[f"n{i}", "busy_s"] == pytest.approx(busy, abs=1e-4)
        assert rows.loc[f"n{i}", "infra_share_pct"] == pytest.approx(100 * infra / busy, abs=1e-3)
    markers = load(nodes[0]).table("markers")
    ddp = markers[markers["kind"] == "ddp_step"]
    assert rows.loc["n0", "steps"] == len(ddp) and rows.loc["n0", "ranks"] == ddp["pid"].nunique()
    # spread and the straggler: n2 spends 5x the network CPU
    sp = jv.spread["infra_share_pct"]
    assert sp["max_node"] == "n2" and sp["min"] == pytest.approx(rows.loc["n0", "infra_share_pct"])
    assert sp["median"] == pytest.approx(rows.loc["n1", "infra_share_pct"])
    assert [(x["node"], x["metric"]) for x in jv.stragglers] == [("n2", "infra_share_pct")]
    assert "step_rate_hz" not in {x["metric"] for x in jv.stragglers}  # equal step rates
    text = report(*nodes).stdout
    assert "dpuprof job report: 3 nodes, job j1 (SLURM_JOB_ID)" in text
    assert "n2 (h2): infrastructure" in text.split("Stragglers")[1]
    assert "no projection stored for this recording" in text


def test_two_node_job_by_job_id_names_both_hosts(src, tmp_path):
    """What the two-namespace DDP root test expects: run-*.rec with SLURM_JOB_ID=netns-test on two
    hosts make a job view, automatically."""
    for host in ("ns-a", "ns-b"):
        node(src, tmp_path / f"run-{host}.rec", host, job_id="netns-test")
    res = subprocess.run(f"{sys.executable} -m dpuprof report run-*.rec", shell=True, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("dpuprof job report: 2 nodes, job netns-test")
    assert "host ns-a, ns-b" in res.stdout
    table = res.stdout.split("Per node and total")[1]
    assert "ns-a" in table and "ns-b" in table


@pytest.mark.slow
def test_projection_per_node_and_for_the_job(src, tmp_path):
    """Real projections (dpuprof project) for the nodes: the job's speedup is the smallest."""
    a, b = node(src, tmp_path / "a.rec", "h1", job_id="j"), node(src, tmp_path / "b.rec", "h2", job_id="j")

    def project(rec):
        res = subprocess.run([sys.executable, "-m", "dpuprof", "project", str(rec), "--dpu", "bluefield",
                              "-o", str(rec.with_suffix(".proj.json"))], capture_output=True, text=True,
                             timeout=300, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        return json.loads(rec.with_suffix(".proj.json").read_text())

    pa = project(a)
    jv = build_report([a, b]).total.job
    assert jv.projections[0].speedup["expected"] == pytest.approx(pa["speedup"]["expected"])
    assert "no projection stored" in jv.projections[1].missing and jv.job_projection is None
    assert any("no projection for b" in w for w in jv.warnings)
    pb = project(b)
    total = build_report([a, b]).total
    jp = total.job.job_projection
    want = min(pa["speedup"]["expected"], pb["speedup"]["expected"])
    assert jp.speedup["expected"] == pytest.approx(want)
    assert total.projection.speedup.expected == pytest.approx(want)
    for cat, row in total.projection.by_category.items():
        assert row.freed_s == pytest.approx(pa["by_category"][cat]["freed_s"] + pb["by_category"][cat]["freed_s"],
                                               abs=1e-5)


def test_nodes_started_apart_share_the_job_clock(src, tmp_path):
    a = node(src, tmp_path / "a.rec", "h1")
    b = node(src, tmp_path / "b.rec", "h2", shift_s=10)
    one = build_report([a]).main
    total = build_report([a, b]).total
    assert total.duration_s == pytest.approx(one.duration_s + 10, abs=1e-3)
    assert total.timeline.index.max() >= 10 + one.timeline.index.max() - 1
    assert total.timeline.to_numpy().sum() == pytest.approx(2 * one.timeline.to_numpy().sum(), rel=1e-9)
    assert (total.cats == 2 * one.cats).all().all()


# ----------------------------------------------------------------------------- the straggler rule

def _nodes(shares, rates):
    import pandas as pd

    return pd.DataFrame({"node": [f"n{i}" for i in range(len(shares))], "host": "h",
                         "infra_share_pct": shares, "step_rate_hz": rates})


def test_straggler_rule():
    from dpuprof.render.job import stragglers

    # noise within the floors names nobody
    assert stragglers(_nodes([15.0, 16.0, 14.5, 17.0], [4.5, 4.4, 4.6, 4.5])) == []
    # one node's share far above a tight group, another's step rate 20 % below
    found = stragglers(_nodes([15.0, 15.5, 14.8, 15.2, 31.0], [4.5, 4.5, 3.6, 4.5, 4.5]))
    assert [(s["node"], s["metric"]) for s in found] == [("n4", "infra_share_pct"), ("n2", "step_rate_hz")]
    assert found[0]["median"] == 15.2 and found[0]["limit"] == pytest.approx(5.0)
    # a wide spread raises the limit above the floor: 3 x 1.4826 x MAD
    wide = _nodes([10.0, 20.0, 30.0, 40.0, 50.0], [4.5] * 5)
    assert stragglers(wide) == []
    # two nodes: only the floor, so they must differ by more than twice it
    assert stragglers(_nodes([15.0, 24.0], [4.5, 4.5])) == []
    assert [s["node"] for s in stragglers(_nodes([15.0, 26.0], [4.5, 4.5]))] == ["n1"]
