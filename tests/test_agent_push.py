"""``dpuprof agent --push``: each completed file's CPU profile per job, POSTed to a Pyroscope-compatible
/ingest. A real HTTP server (http.server, a thread, port 0) stands in for Pyroscope; the profiles
come from a fixture recording whose workload is put in a Slurm job's cgroup (the other processes
stay in cgroup / or have none: three jobs in all)."""

from __future__ import annotations

import gzip
import json
import socket
import sqlite3
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import dpuprof
from ingest_server import Ingest
from dpuprof.agent.background import RotationWorker
from dpuprof.agent.jobs import Job
from dpuprof.agent.options import parse_push_url
from dpuprof.agent.push import Pusher
from dpuprof.errors import UserError
from dpuprof.recording import load
from dpuprof.render.formats.pprof_schema import profile_class

SLURM = "/system.slice/slurmstepd.scope/job_42/step_0"


@pytest.fixture
def ingest():
    servers = []

    def make(**kw) -> Ingest:
        servers.append(Ingest(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def two_jobs(fixture_copy, tmp_path):
    """A copy of the ddp-encrypted recording with its workload's processes in a Slurm job's cgroup
    (the rest stay in / or have none): (path, the Slurm job's pids)."""
    path = fixture_copy("ddp-encrypted", into=tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE processes SET cgroup = ? WHERE in_workload = 1", (SLURM,))
        pids = {pid for (pid,) in db.execute("SELECT pid FROM processes WHERE in_workload = 1")}
    db.close()
    return path, pids


def _counters(registry) -> dict:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _busy_stack_samples(rec, pids=None) -> int:
    """Stack samples in ``rec`` of ``pids`` (all when None), counted from the raw tables: the
    recorder's own process, idle and the observer left out, as every flame graph does."""
    ss, st = rec.table("stack_samples"), rec.table("stacks")
    ss = ss[ss["pid"] != rec.meta["recorder_pid"]]
    if pids is not None:
        ss = ss[ss["pid"].isin(pids)]
    busy = set(st.loc[~st["category"].isin(["idle", "observer"]), "stack_id"])
    return int(ss.loc[ss["stack_id"].isin(busy), "samples"].sum())


def _profile(data: bytes):
    prof = profile_class()()
    prof.ParseFromString(gzip.decompress(data))
    return prof


def test_each_jobs_pprof_is_posted_with_the_ingest_parameters(two_jobs, ingest):
    path, slurm_pids = two_jobs
    server, warned, registry = ingest(), [], CollectorRegistry()
    rec = load(path)
    Pusher(parse_push_url(server.url), "node1", registry, warn=warned.append).consume(rec)

    assert warned == []
    by_name = {params["name"]: (p, params, form) for p, params, form in server.requests}
    assert len(by_name) == len(server.requests) >= 2  # one POST per job
    job = by_name["dpuprof{job_id=42,job_kind=slurm,node=node1}"]
    iv = rec.table("intervals")
    for url_path, params, form in by_name.values():
        assert url_path == "/ingest"
        assert params["format"] == "pprof" and params["spyName"] == "dpuprof" and params["sampleRate"] == "99"
        assert int(params["from"]) <= iv["t_start"].min() < int(params["from"]) + 1
        assert int(params["until"]) - 1 < iv["t_end"].max() <= int(params["until"])
        assert set(form) == {"profile", "sample_type_config"}
        assert json.loads(form["sample_type_config"])["samples"]["display-name"] == "cpu"

    prof = _profile(job[2]["profile"])
    types = [prof.string_table[t.type] for t in prof.sample_type]
    assert types[:2] == ["samples", "cpu"]
    assert sum(s.value[0] for s in prof.sample) == _busy_stack_samples(rec, slurm_pids) > 0
    # the process frames (each stack's root) are the job's processes only
    roots = {prof.string_table[prof.function[s.location_id[-1] - 1].name] for s in prof.sample}
    procs = rec.table("processes")
    assert "python3.11" in roots and roots <= set(procs.loc[procs["pid"].isin(slurm_pids), "comm"]), roots
    # every busy sample of the file is in exactly one job's profile
    total = sum(s.value[0] for _p, _q, form in server.requests for s in _profile(form["profile"]).sample)
    assert total == _busy_stack_samples(rec)
    counters = _counters(registry)
    assert counters[("dpuprof_pushed_profiles_total", (("node", "node1"),))] == len(server.requests)
    assert not any(name == "dpuprof_push_failures_total" for name, _labels in counters)


def test_a_server_error_is_one_line_and_a_count(two_jobs, ingest):
    path, _pids = two_jobs
    server, warned, registry = ingest(status=500), [], CollectorRegistry()
    Pusher(parse_push_url(server.url), "n", registry, warn=warned.append).consume(load(path))

    assert len(server.requests) >= 2  # an HTTP error does not stop the other jobs' pushes
    assert len(warned) == 1 and "\n" not in warned[0], warned
    assert "HTTP 500" in warned[0] and "profile rejected: boom" in warned[0] and path.name in warned[0]
    assert f"{len(server.requests)} of {len(server.requests)} profile(s) not pushed" in warned[0]
    counters = _counters(registry)
    assert counters[("dpuprof_push_failures_total", (("node", "n"), ("reason", "http")))] == 1
    assert counters[("dpuprof_pushed_profiles_total", (("node", "n"),))] == 0


def test_an_unreachable_server_is_one_line_and_a_count(fixture_copy):
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    warned, registry = [], CollectorRegistry()
    Pusher(parse_push_url(f"http://127.0.0.1:{port}"), "n", registry,
           warn=warned.append).consume(load(fixture_copy("ddp-encrypted")))
    assert len(warned) == 1 and "cannot reach the server" in warned[0] and "refused" in warned[0], warned
    assert _counters(registry)[("dpuprof_push_failures_total", (("node", "n"), ("reason", "connect")))] == 1


def test_the_background_thread_pushes_and_counts_a_file_it_had_no_time_for(two_jobs, ingest):
    path, _pids = two_jobs
    server, warned, registry = ingest(hold=True), [], CollectorRegistry()
    pusher = Pusher(parse_push_url(server.url), "n", registry, warn=warned.append)
    worker = RotationWorker([pusher])
    try:
        worker.submit(path)
        assert server.arrived.wait(60), "the first file's push reached the server"
        worker.submit(path)  # waits in the queue while the first is pushed
        worker.submit(path)  # the queue is full: skipped, counted
        server.release.set()
    finally:
        worker.close()
    counters = _counters(registry)
    assert counters[("dpuprof_push_failures_total", (("node", "n"), ("reason", "busy")))] == 1
    assert len(warned) == 1 and path.name in warned[0], warned
    # both files that were taken were pushed whole: one POST per job each
    jobs = {params["name"] for _p, params, _f in server.requests}
    assert len(server.requests) == 2 * len(jobs)
    assert counters[("dpuprof_pushed_profiles_total", (("node", "n"),))] == len(server.requests)


def test_a_file_that_cannot_be_loaded_is_one_line_and_a_count(tmp_path, ingest):
    server, warned, registry = ingest(), [], CollectorRegistry()
    worker = RotationWorker([Pusher(parse_push_url(server.url), "n", registry, warn=warned.append)])
    damaged = tmp_path / "damaged.rec"
    damaged.write_text("not SQLite\n")
    worker.submit(damaged)
    worker.close()
    assert server.requests == []
    assert len(warned) == 1 and "damaged.rec" in warned[0] and "not a dpuprof recording" in warned[0], warned
    assert _counters(registry)[("dpuprof_push_failures_total", (("node", "n"), ("reason", "error")))] == 1


def test_push_url_values():
    assert parse_push_url("http://pyroscope:4040") == "http://pyroscope:4040/ingest"
    assert parse_push_url("https://profiles.example/pyroscope/") == "https://profiles.example/pyroscope/ingest"
    assert parse_push_url("http://127.0.0.1:4040/ingest") == "http://127.0.0.1:4040/ingest"
    assert parse_push_url("http://[::1]:4040") == "http://[::1]:4040/ingest"
    for bad in ("pyroscope:4040", "ftp://h", "http://", "http://h:70000", "http://h:port", "http://h/?a=1", ""):
        with pytest.raises(UserError, match="--push"):
            parse_push_url(bad)


def test_a_label_value_cannot_break_the_name():
    from dpuprof.agent.push import app_name

    assert app_name(Job("cgroup", "/odd,group{x=1}"), "n") == "dpuprof{job_id=/odd_group_x_1_,job_kind=cgroup,node=n}"
    assert app_name(Job("none", ""), "n") == "dpuprof{job_id=,job_kind=none,node=n}"


def test_agent_push_bad_url_is_one_line_and_help_shows_it():
    proc = dpuprof("agent", "--push", "pyroscope:4040", "-D", "out")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "dpuprof: error: --push: expected the server's URL, such as http://pyroscope:4040, got 'pyroscope:4040'"]
    out = dpuprof("agent", "--help", check=True).stdout
    assert "--push URL" in out
    assert any(line.strip().startswith("sudo dpuprof agent --push http") for line in out.splitlines())


def test_jobs_beyond_the_cap_are_pushed_together_as_other(two_jobs):
    from dpuprof.agent.jobs import JobLabels
    from dpuprof.agent.push import job_pids

    path, slurm_pids = two_jobs
    rec = load(path)
    every = job_pids(rec)
    assert Job("slurm", "42") in every and len(every) == 3  # the Slurm job, cgroup / and no cgroup
    capped = job_pids(rec, max_jobs=2)
    busiest = next(iter(every))
    assert list(capped) == [busiest, JobLabels.OTHER]
    assert capped[JobLabels.OTHER] == set().union(*(p for j, p in every.items() if j != busiest))


def test_a_file_of_idle_and_observer_samples_only_pushes_nothing(two_jobs, ingest):
    """An agent's file of a quiet minute: every sample idle or the recorder's own programs."""
    path, _pids = two_jobs
    with sqlite3.connect(path) as db:
        db.execute("UPDATE stacks SET category = 'idle'")
    db.close()
    server, warned, registry = ingest(), [], CollectorRegistry()
    Pusher(parse_push_url(server.url), "n", registry, warn=warned.append).consume(load(path))
    assert server.requests == [] and warned == []


class _Buggy:
    """A task whose first file meets a bug (not one of TASK_ERRORS)."""

    def __init__(self):
        self.consumed, self.skipped = [], []

    def consume(self, rec):
        self.consumed.append(rec.path)
        if len(self.consumed) == 1:
            raise TypeError("a bug on this file's shape")

    def skip(self, path, reason, why=""):
        self.skipped.append((reason, why))


def test_a_bug_on_one_file_does_not_end_the_background_work(two_jobs, capsys):
    path, _pids = two_jobs
    task = _Buggy()
    worker = RotationWorker([task])
    worker.submit(path)
    deadline = time.time() + 60
    while not task.skipped and time.time() < deadline:  # the first file met the bug
        time.sleep(0.05)
    worker.submit(path)
    worker.close()
    assert len(task.consumed) == 2  # the same thread worked on the next file
    assert task.skipped == [("error", "TypeError: a bug on this file's shape")]
    assert "Traceback" in capsys.readouterr().err
