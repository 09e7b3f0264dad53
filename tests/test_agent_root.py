"""Root tests: ``dpuprof agent`` with the real eBPF probes. A workload runs in a cgroup v2 group of
its own shaped like a Slurm job's (``.../job_N``); /metrics, scraped over HTTP on 127.0.0.1, must
carry its CPU under job_id=N, job_kind=slurm; the rotating files must cover the run with no interval
missing; and ``kill -9`` must lose at most the interval being recorded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import PYTHON, WORKLOADS

pytestmark = [pytest.mark.root, pytest.mark.slow]

STARTUP_S = 180  # bcc's compile on a loaded 2-core machine; only a bound on waiting, never asserted


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_agent(directory: Path, port: int, rotate: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "dpuprof", "agent", "-D", str(directory), "--rotate", rotate,
                             "--keep", "1000", "--listen", f"127.0.0.1:{port}", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _scrape(port: int) -> list:
    """Every sample of /metrics, parsed as Prometheus parses it: [(name, labels, value)]."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def _value(samples, name: str) -> float:
    return sum(v for n, _labels, v in samples if n == name)


def _wait_recorded(agent, port: int, more_than: float) -> float:
    """Wait until /metrics has covered more than ``more_than`` seconds; return what it covers."""
    deadline = time.time() + STARTUP_S
    while time.time() < deadline and agent.poll() is None:
        try:
            got = _value(_scrape(port), "dpuprof_recorded_seconds_total")
            if got > more_than:
                return got
        except OSError:
            pass  # not listening yet
        time.sleep(0.3)
    raise AssertionError(f"the agent covered no more than {more_than} s (exit {agent.poll()}): "
                         f"{agent.stderr.read() if agent.poll() is not None else ''}")


def _recordings(directory: Path):
    from dpuprof.recording import load

    return [load(p) for p in sorted(directory.glob("*.rec"))]


def _assert_contiguous(recs) -> None:
    """Each file starts where the previous ended, and its intervals follow each other."""
    for a, b in zip(recs, recs[1:]):
        assert a.meta["end_time"] == b.meta["start_time"], (a.path, b.path)
    for rec in recs:
        iv = rec.table("intervals").sort_values("interval")
        if iv.empty and rec is recs[-1]:
            continue  # a file opened just before a kill -9: its start_time is all it holds
        assert iv["interval"].tolist() == list(range(len(iv))), rec.path
        assert iv["t_start"].iloc[0] == rec.meta["start_time"], rec.path
        assert (iv["t_start"].iloc[1:].to_numpy() == iv["t_end"].iloc[:-1].to_numpy()).all(), rec.path


def _zlib_in(group_dir: str, seconds: float) -> float:
    """Run the zlib workload for ``seconds`` inside cgroup ``group_dir``; its CPU seconds."""
    def into_group():  # the child joins the group before it execs the workload
        with open(os.path.join(group_dir, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    work = subprocess.run([PYTHON, WORKLOADS / "zlib_compress.py", str(seconds)], preexec_fn=into_group,
                          capture_output=True, text=True, timeout=120)
    assert work.returncode == 0, work.stderr
    return json.loads(work.stdout)["cpu_s"]


def _projected(agent, port: int, job: str) -> float:
    """The largest freed-cores gauge for ``job`` on bluefield-3 seen before rotations stop adding one."""
    best, deadline = 0.0, time.time() + STARTUP_S
    while time.time() < deadline and agent.poll() is None and best <= 0:
        best = max([v for n, labels, v in _scrape(port) if n == "dpuprof_projected_freed_cores"
                    and labels["job_id"] == job and labels["dpu"] == "bluefield-3"] or [0.0])
        time.sleep(0.5)
    return best


@pytest.fixture
def slurm_like_cgroup():
    """A cgroup v2 group ``/dpuprof-agent-test-PID/job_PID``: (its path as /proc shows it, job id)."""
    from dpuprof.record.workload.procfs import cgroup2_mount

    mount = cgroup2_mount()
    assert mount, "this machine has a cgroup v2 hierarchy (hybrid hosts: /sys/fs/cgroup/unified)"
    job = str(os.getpid())
    top = os.path.join(mount, f"dpuprof-agent-test-{job}")
    inner = os.path.join(top, f"job_{job}")
    os.makedirs(inner)
    try:
        yield inner, f"/dpuprof-agent-test-{job}/job_{job}", job
    finally:
        os.rmdir(inner)
        os.rmdir(top)


def test_agent_metrics_carry_a_jobs_cpu_and_files_cover_the_run(tmp_path, slurm_like_cgroup):
    group_dir, group, job = slurm_like_cgroup
    port, out = _free_port(), tmp_path / "recs"
    agent = _start_agent(out, port, "3s", "--project", "bluefield-3")
    try:
        _wait_recorded(agent, port, 0.0)

        cpu_s = _zlib_in(group_dir, 6)
        covered = _wait_recorded(agent, port, 0.0)
        _wait_recorded(agent, port, covered + 2.0)  # the workload's last interval is committed
        samples = _scrape(port)
        mine = [(labels, v) for n, labels, v in samples if n == "dpuprof_cpu_seconds_total"
                and labels["job_id"] == job and labels["job_kind"] == "slurm"]
        job_cpu = sum(v for _l, v in mine)
        compression = sum(v for labels, v in mine if labels["category"] == "compression")
        assert 0.7 * cpu_s <= job_cpu <= 1.3 * cpu_s + 0.2, (job_cpu, cpu_s)  # exact CPU, not samples
        assert compression / job_cpu >= 0.6, mine
        assert all(labels["node"] == socket.gethostname() for labels, _v in mine)
        assert _value(samples, "process_cpu_seconds_total") > 0  # the agent's own CPU
        freed = _projected(agent, port, job)  # a file with the workload, projected at its rotation
        assert freed > 0, "BlueField-3 offloads deflate: some of the job's zlib CPU is freed"
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=120) == 0, agent.stderr.read()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    recs = _recordings(out)
    assert len(recs) >= 3, [r.path.name for r in recs]
    _assert_contiguous(recs)
    assert all(r.complete for r in recs) and recs[-1].meta["stop_reason"] != "rotated"
    assert all(r.meta["stop_reason"] == "rotated" for r in recs[:-1])
    in_files = 0.0  # the job's CPU in the files: at least what /metrics had when it was scraped
    for rec in recs:
        procs = rec.table("processes")
        pids = set(procs.loc[procs["cgroup"] == group, "pid"])
        cpu = rec.table("cpu_category")
        in_files += float(cpu.loc[cpu["pid"].isin(pids), "cpu_s"].sum())
    assert in_files >= job_cpu - 1e-3, (in_files, job_cpu)


def _committed(directory: Path) -> int:
    """Intervals committed in every file so far, read as another process would (read-only)."""
    import sqlite3

    total = 0
    for path in directory.glob("*.rec"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            total += db.execute("SELECT count(*) FROM intervals").fetchone()[0]
    return total


def test_agent_killed_keeps_every_committed_interval(tmp_path):
    port, out = _free_port(), tmp_path / "recs"
    agent = _start_agent(out, port, "2s")
    try:
        covered = _wait_recorded(agent, port, 0.0)
        deadline = time.time() + STARTUP_S  # until a file has been completed and the next begun
        while time.time() < deadline and (len(list(out.glob("*.rec"))) < 2 or covered < 3):
            covered = _wait_recorded(agent, port, covered)
        before = _committed(out)
        agent.kill()
        agent.wait(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    recs = _recordings(out)  # every file loads, the one cut short too
    assert len(recs) >= 2 and before >= 3
    assert sum(len(r.table("intervals")) for r in recs) >= before  # nothing committed was lost
    _assert_contiguous(recs)
    assert not recs[-1].complete and all(r.complete for r in recs[:-1])


def _prometheus(tmp_path: Path, agent_port: int):
    """A real Prometheus server (Debian's ``prometheus``, setup-dev.sh) scraping the agent every
    second on 127.0.0.1; (the process, its port)."""
    import shutil

    exe = shutil.which("prometheus")
    if exe is None:
        if os.environ.get("DPUPROF_REQUIRE_ROOT_TESTS") == "1":
            raise AssertionError("prometheus is not installed (scripts/setup-dev.sh installs it)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                      "scrape_configs:\n"
                      f"  - job_name: dpuprof\n    static_configs: [{{targets: ['127.0.0.1:{agent_port}']}}]\n")
    proc = subprocess.Popen([exe, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def _query(port: int, promql: str) -> list:
    """The instant vector of ``promql`` through Prometheus' HTTP API: [(labels, value)]."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


def test_prometheus_scrapes_the_agent_and_rates_a_jobs_cpu(tmp_path, slurm_like_cgroup):
    group_dir, _group, job = slurm_like_cgroup
    port = _free_port()
    agent = _start_agent(tmp_path / "recs", port, "10s")
    server = None
    try:
        _wait_recorded(agent, port, 0.0)
        server, prom = _prometheus(tmp_path, port)
        up = []
        deadline = time.time() + STARTUP_S
        while time.time() < deadline and not any(v == 1 for _m, v in up):
            time.sleep(0.5)
            try:
                up = _query(prom, 'up{job="dpuprof"}')
            except OSError:
                pass  # not listening yet
        assert any(v == 1 for _m, v in up), up
        cpu_s = _zlib_in(group_dir, 6)
        covered = _wait_recorded(agent, port, 0.0)
        _wait_recorded(agent, port, covered + 3.0)  # committed, and scraped at 1 s
        time.sleep(2.0)
        sel = f'dpuprof_cpu_seconds_total{{job_kind="slurm",job_id="{job}"}}'
        by_cat = dict((m["category"], v) for m, v in _query(prom, f"sum by (category) (rate({sel}[1m]))"))
        assert by_cat and max(by_cat, key=by_cat.get) == "compression", by_cat
        (total,) = [v for _m, v in _query(prom, f"sum(increase({sel}[1m]))")]
        # increase() counts from each series' first scrape: the first interval's CPU is not in it
        assert 0.5 * cpu_s <= total <= 2.0 * cpu_s, (total, cpu_s)
    finally:
        for proc in (server, agent):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
