"""Root tests: ``dpuprof agent`` with the real eBPF probes. A workload runs in a cgroup v2 group of
its own shaped like a Slurm job's (``.../job_N``); /metrics, scraped over HTTP on 127.0.0.1, must
carry its CPU under job_id=N, job_kind=slurm, and ``--push`` must POST its profile to a local
/ingest; the rotating files must cover the run with no interval missing; and ``kill -9`` must lose
at most the interval being recorded. With ``--duty`` the files hold the on parts only, no dpuprof
program runs in the off parts, and /metrics' weighted counters give a busy loop's true CPU rate."""

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
from ingest_server import Ingest

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


def _pushed(agent, server: Ingest, job: str) -> list:
    """The profiles (pprof messages) POSTed for Slurm job ``job``, once one has arrived."""
    import gzip

    from dpuprof.render.formats.pprof_schema import profile_class

    name = f"dpuprof{{job_id={job},job_kind=slurm,node={socket.gethostname()}}}"
    deadline = time.time() + STARTUP_S
    while time.time() < deadline and agent.poll() is None:
        mine = [form["profile"] for _path, params, form in list(server.requests) if params["name"] == name]
        if mine:
            return [profile_class().FromString(gzip.decompress(data)) for data in mine]
        time.sleep(0.5)
    raise AssertionError(f"no profile pushed for {name}: {[q['name'] for _p, q, _f in server.requests]}")


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
    port, out, server = _free_port(), tmp_path / "recs", Ingest()
    agent = _start_agent(out, port, "3s", "--project", "bluefield-3", "--push", server.url)
    try:
        _wait_recorded(agent, port, 0.0)

        cpu_s = _zlib_in(group_dir, 6)
        # At once: the gauges are replaced at each projection, so the job's lasts only until the
        # file after its last one (3 s of rotation, plus a projection) has been projected.
        freed = _projected(agent, port, job)
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
        assert freed > 0, "BlueField-3 offloads deflate: some of the job's zlib CPU is freed"
        profiles = _pushed(agent, server, job)  # the same file, pushed before it was projected
        assert sum(s.value[0] for p in profiles for s in p.sample) > 0
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=120) == 0, agent.stderr.read()
    finally:
        server.close()
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


def _query(port: int, promql: str, at: float | None = None) -> list:
    """The instant vector of ``promql`` through Prometheus' HTTP API, evaluated at unix time ``at``
    (now when None): [(labels, value)]."""
    params = {"query": promql} | ({"time": f"{at:.3f}"} if at is not None else {})
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


def _wait_scraped(port: int, after: float, timeout: float = 60.0) -> None:
    """Until Prometheus holds a scrape of the agent taken after unix time ``after`` (polled: its
    scrape interval is not this test's to assume)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = _query(port, 'timestamp(up{job="dpuprof"})')
        if got and max(v for _m, v in got) >= after:
            return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus took no scrape of the agent after {after:.3f} within {timeout:.0f} s")


def window_rate_promql(selector: str, window_ms: int) -> str:
    """PromQL: each category's CPU rate (CPU seconds per recorded second) of ``selector`` over the
    last ``window_ms``, from the counters' exact differences. Not rate()/increase(): they extrapolate
    to the window's edges and start from a series' first scrape, so they differ from the recording by
    up to a scrape interval's share. A series born inside the window counts from 0."""
    cpu = f"sum by (category) (dpuprof_cpu_seconds_total{{{selector}}})"
    before = f"(sum by (category) (dpuprof_cpu_seconds_total{{{selector}}} offset {window_ms}ms) or {cpu} * 0)"
    covered = f"dpuprof_recorded_seconds_total - dpuprof_recorded_seconds_total offset {window_ms}ms"
    return f"({cpu} - {before}) / scalar({covered})"


def _recording_rates(recs, group: str, covered_from: float, covered_to: float) -> dict:
    """Each category's CPU rate for the processes of cgroup ``group`` over the intervals that end
    after ``covered_from`` and no later than ``covered_to`` recorded seconds (the agent's
    dpuprof_recorded_seconds_total counts interval lengths in the same order, so the same floats)."""
    import pandas as pd

    cpu, covered, total = [], 0.0, 0.0
    for rec in recs:
        iv = rec.table("intervals").sort_values("interval")
        procs = rec.table("processes")
        pids = set(procs.loc[procs["cgroup"] == group, "pid"])
        table = rec.table("cpu_category")
        for interval, t0, t1 in iv[["interval", "t_start", "t_end"]].itertuples(index=False):
            covered += max(0.0, t1 - t0)
            if covered_from + 1e-6 < covered <= covered_to + 1e-6:
                total += max(0.0, t1 - t0)
                cpu.append(table[(table["interval"] == interval) & table["pid"].isin(pids)])
    by_cat = pd.concat(cpu).groupby("category")["cpu_s"].sum() if cpu else pd.Series(dtype=float)
    return {cat: float(v) / total for cat, v in by_cat.items()}


def documented_promql() -> dict:
    """docs/agent.md's PromQL block: {name: query}, each query after its ``# name: ...`` comment."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "agent.md").read_text()
    block = text.split("```promql\n", 1)[1].split("```", 1)[0]
    queries, name = {}, None
    for line in block.splitlines():
        if line.startswith("# ") and ":" in line and " " not in line[2:].split(":", 1)[0]:
            name = line[2:].split(":", 1)[0]
        elif line.strip() and not line.startswith("#"):
            queries[name] = f"{queries.get(name, '')} {line.strip()}".strip()
    return queries


def test_prometheus_rates_a_jobs_categories_as_the_recording_does(tmp_path, slurm_like_cgroup):
    """A real Prometheus scrapes the agent; one PromQL query over a window that holds a job gives each
    category's rate within 2 % of the same window's recording, and docs/agent.md's queries run."""
    group_dir, group, job = slurm_like_cgroup
    port = _free_port()
    agent = _start_agent(tmp_path / "recs", port, "5s", "--project", "bluefield-3")
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
        _wait_scraped(prom, time.time())  # a scrape after the agent came up, before the job
        t_a = time.time()
        _zlib_in(group_dir, 4)
        covered = _wait_recorded(agent, port, 0.0)
        _wait_recorded(agent, port, covered + 2.0)  # the job's last interval is committed
        _wait_scraped(prom, time.time())  # and scraped
        t_b = time.time()
        selector = f'job_kind="slurm",job_id="{job}"'
        promql = window_rate_promql(selector, int((t_b - t_a) * 1000))
        by_cat = {m["category"]: v for m, v in _query(prom, promql, at=t_b)}
        (r_a,), (r_b,) = ([v for _m, v in _query(prom, "dpuprof_recorded_seconds_total", at=t)] for t in (t_a, t_b))
        assert _projected(agent, port, job) > 0  # a rotated file with the job was projected
        _wait_scraped(prom, time.time())  # and scraped
        docs = {name: _query(prom, q) for name, q in documented_promql().items()}
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=120) == 0, agent.stderr.read()
    finally:
        for proc in (server, agent):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
    recorded = _recording_rates(_recordings(tmp_path / "recs"), group, r_a, r_b)
    print(f"\nPromQL at {t_b:.3f}: {promql}\nwindow: recorded seconds {r_a:.3f} .. {r_b:.3f}")
    for cat in sorted(set(by_cat) | set(recorded)):
        print(f"  {cat:14} prometheus {by_cat.get(cat, 0.0):.6f}  recording {recorded.get(cat, 0.0):.6f} CPU s/s")
    assert max(by_cat, key=by_cat.get) == "compression", by_cat
    assert len(docs) == 6 and all(docs.values()), docs  # every documented query returns series
    assert "compression" in {m["category"] for m, _v in docs["fleet_tax_by_category"]}
    assert job in {m["job_id"] for m, _v in docs["jobs_largest_projected_gain"]}
    job_rate = sum(recorded.values())
    for cat in set(by_cat) | set(recorded):
        got, want = by_cat.get(cat, 0.0), recorded.get(cat, 0.0)
        # 2 % of the category, with a floor of 0.1 % of the job's rate for categories of a few samples
        assert abs(got - want) <= max(0.02 * want, 0.001 * job_rate), (cat, got, want, by_cat, recorded)


def _prog_runs(pid: int) -> int:
    """Runs so far of every BPF program process ``pid`` holds, summed: each program's fdinfo
    ``run_cnt``, which counts while BPF run-time statistics are on (the recorder keeps them on for
    one interval in 10 only: the caller turns them on for good, ``bpf_stats_on``)."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                total += sum(int(line.split()[1]) for line in fh if line.startswith("run_cnt:"))
        except (OSError, ValueError):
            continue  # closed meanwhile
    return total


def _on_cpu_s(pid: int) -> float:
    """The scheduler's on-CPU time of process ``pid`` (one thread), in seconds."""
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e9


def _on_parts(rec) -> list[list[float]]:
    """[[start, end]] of each run of back-to-back intervals (unix s)."""
    parts: list[list[float]] = []
    for t0, t1 in rec.table("intervals").sort_values("t_start")[["t_start", "t_end"]].itertuples(index=False):
        if parts and t0 == parts[-1][1]:
            parts[-1][1] = t1
        else:
            parts.append([t0, t1])
    return parts


@pytest.fixture
def bpf_stats_on():
    """kernel.bpf_stats_enabled = 1 while the test runs (restored after): every program run counts."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as fh:
        before = fh.read().strip()
    with open(path, "w") as fh:
        fh.write("1")
    yield
    with open(path, "w") as fh:
        fh.write(before)


def _run_busy_loop_under_duty(tmp_path: Path, group_dir: str):
    """A busy loop in ``group_dir`` while ``agent --duty 1s/3s -d 7`` runs: (the recording, every
    poll (time before, time after, the agent's BPF program runs, the loop's CPU s) taken about
    every 0.1 s, the last /metrics scraped)."""
    def into_group():
        with open(os.path.join(group_dir, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    loop = subprocess.Popen([PYTHON, "-c", "while True: pass"], preexec_fn=into_group)
    port, out = _free_port(), tmp_path / "recs"
    agent = _start_agent(out, port, "1h", "--duty", "1s/3s", "-d", "7", "--interval", "0.5")
    polls, scraped = [], []
    try:
        deadline = time.time() + STARTUP_S + 30
        while agent.poll() is None and time.time() < deadline:
            t0 = time.time()
            runs, cpu = _prog_runs(agent.pid), _on_cpu_s(loop.pid)
            polls.append((t0, time.time(), runs, cpu))
            if len(polls) % 4 == 0:
                try:
                    # the last scrape with the agent's metrics in it: one taken as the agent
                    # stopped can come back empty (a suite run on 2026-12-05 read [] last)
                    scraped = _scrape(port) or scraped
                except OSError:
                    pass  # not listening yet, or gone
            time.sleep(0.1)
        assert agent.wait(timeout=60) == 0, agent.stderr.read()
    finally:
        for proc in (agent, loop):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (rec,) = _recordings(out)
    return rec, polls, scraped


def test_duty_cycle_records_on_parts_only_and_detaches_the_probes_between(tmp_path, slurm_like_cgroup,
                                                                          bpf_stats_on):
    group_dir, group, job = slurm_like_cgroup
    rec, polls, scraped = _run_busy_loop_under_duty(tmp_path, group_dir)
    start = rec.meta["start_time"]
    assert rec.complete and rec.meta["duty"] == {"on_s": 1.0, "period_s": 3.0}
    assert rec.meta["probe_cost"] == "measured", rec.meta["probe_cost"]  # else run_cnt stays 0
    parts = _on_parts(rec)
    assert len(parts) == 3, parts  # the periods at 0, 3 and 6 s of the 7
    for k, (t_on, t_off) in enumerate(parts):
        assert start + 3 * k <= t_on < start + 3 * k + 0.5, (k, t_on - start)  # re-attached at its period
        assert t_off < start + 3 * k + 2.5, (k, t_on - start, t_off - start)  # paused well before the next
    # A part that ran long (its last drain ended late, on a loaded machine) is made up by the next,
    # so the parts record W each on the whole, give or take the last drains; the last part is cut
    # short by -d 7. Always on, the 7 s would all be recorded.
    assert rec.duration_s == pytest.approx(sum(b - a for a, b in parts))  # the gaps are not recorded time
    iv = rec.table("intervals")
    longest = float((iv["t_end"] - iv["t_start"]).max())
    assert 2.0 + (start + 7.0 - parts[-1][0]) - 0.1 <= rec.duration_s <= 3.0 + 2 * longest, (parts, longest)

    # Off parts: from 0.3 s after the pause (the detach's grace periods) to the next period's start
    # (the earliest re-attach), no dpuprof program ran at all; in each on part they ran.
    still = 0
    for (a0, _a1, runs_a, _), (_b0, b1, runs_b, _) in zip(polls, polls[1:]):
        for (_on, off), (nxt, _) in zip(parts, parts[1:]):
            if a0 >= off + 0.3 and b1 <= start + 3 * round((nxt - start) / 3):
                assert runs_b == runs_a, (a0 - start, b1 - start, runs_b - runs_a)
                still += 1
    assert still >= 10, still  # two off parts of ~1.7 s each, polled every ~0.1 s
    for t_on, t_off in parts:
        inside = [runs for a0, a1, runs, _ in polls if t_on <= a0 and a1 <= t_off]
        assert len(inside) >= 2 and inside[-1] > inside[0], (t_on - start, inside)

    # /metrics: each on interval counted 3 times, so the loop's CPU per second is its true rate.
    assert _value(scraped, "dpuprof_duty_weight") == 3.0
    job_cpu = sum(v for n, labels, v in scraped if n == "dpuprof_cpu_seconds_total" and labels["job_id"] == job)
    recorded = _value(scraped, "dpuprof_recorded_seconds_total")
    procs, cpu = rec.table("processes"), rec.table("cpu_category")
    in_file = float(cpu.loc[cpu["pid"].isin(procs.loc[procs["cgroup"] == group, "pid"]), "cpu_s"].sum())
    assert in_file - 0.6 <= job_cpu / 3 <= in_file + 1e-6, (job_cpu, in_file)  # the last scrape may miss one interval
    assert 0 < recorded / 3 <= rec.duration_s + 1e-6
    during = [(a0, cpu_s) for a0, _a1, _r, cpu_s in polls if start <= a0 <= rec.meta["end_time"]]
    truth = (during[-1][1] - during[0][1]) / (during[-1][0] - during[0][0])  # the loop's CPU rate, whole run
    assert truth > 0.2, truth
    assert 0.7 * truth <= job_cpu / recorded <= 1.3 * truth + 0.05, (job_cpu / recorded, truth)
