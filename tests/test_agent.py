"""dpuprof agent's pure parts: cgroup path -> job label, option values, metric names and labels,
and the rotating writer (files that cover the run, each a loadable recording)."""

from __future__ import annotations

import os

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import dpuprof
from dpuprof.agent.jobs import NO_JOB, OBSERVER_JOB, Job, JobLabels, job_of
from dpuprof.agent.metrics import IntervalMetrics
from dpuprof.agent.options import light_probes, parse_duration, parse_listen, parse_size
from dpuprof.agent.rotate import RotatingWriter
from dpuprof.errors import UserError
from dpuprof.recording import load

POD_UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.mark.parametrize("path, job", [
    # Kubernetes, systemd cgroup driver: the uid's dashes are underscores in the slice name
    (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/"
     "cri-containerd-abc123.scope", Job("pod", POD_UID)),
    (f"/kubepods.slice/kubepods-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-1.scope", Job("pod", POD_UID)),
    # Kubernetes, cgroupfs driver
    (f"/kubepods/besteffort/pod{POD_UID}/0123456789abcdef", Job("pod", POD_UID)),
    (f"/kubepods/pod{POD_UID}/c1", Job("pod", POD_UID)),
    # Slurm, cgroup/v2 plugin and the older layout
    ("/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", Job("slurm", "4242")),
    ("/slurm/uid_1000/job_77/step_batch", Job("slurm", "77")),
    # systemd units: the innermost
    ("/system.slice/sshd.service", Job("unit", "sshd.service")),
    ("/user.slice/user-1000.slice/session-3.scope", Job("unit", "session-3.scope")),
    ("/system.slice/docker-0123abcd.scope", Job("unit", "docker-0123abcd.scope")),
    # read from inside a container's cgroup namespace: the ".." steps name nothing
    (f"/../../kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-9.scope", Job("pod", POD_UID)),
    ("/../../../system.slice/sshd.service", Job("unit", "sshd.service")),
    ("/../../other/group", Job("cgroup", "/other/group")),
    # anything else: the path
    ("/", Job("cgroup", "/")),
    ("/dpuprof-test/inner", Job("cgroup", "/dpuprof-test/inner")),
    ("/kubepods.slice/kubepods-burstable.slice", Job("cgroup", "/kubepods.slice/kubepods-burstable.slice")),
    (None, NO_JOB),
    ("", NO_JOB),
])
def test_cgroup_path_gives_the_job(path, job):
    assert job_of(path) == job


def test_job_labels_are_capped_and_forget_jobs_without_processes():
    labels = JobLabels(max_jobs=2)
    labels.note(1, "/a.service")
    labels.note(2, "/b.service")
    labels.note(3, "/c.service")  # a third job: over the cap
    assert [labels.of(p) for p in (1, 2, 3)] == [Job("unit", "a.service"), Job("unit", "b.service"), JobLabels.OTHER]
    assert labels.of(99) == NO_JOB
    labels.note(1, None)  # no path now: the known one stays
    assert labels.of(1) == Job("unit", "a.service")
    assert labels.retain({2}) == {Job("unit", "a.service")}
    labels.note(4, "/d.service")  # a place freed
    assert labels.of(4) == Job("unit", "d.service") and labels.of(1) == NO_JOB


def test_option_values():
    assert parse_duration("10m") == 600 and parse_duration("3s") == 3 and parse_duration("2") == 2
    assert parse_duration("1.5h") == 5400
    assert parse_size("64M") == 64 << 20 and parse_size("500KiB") == 500 << 10 and parse_size("10") == 10
    assert parse_listen("9477") == ("127.0.0.1", 9477)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_listen("[::]:9477") == ("::", 9477)
    for bad, parse in (("0s", parse_duration), ("5x", parse_duration), ("M", parse_size),
                       ("host", parse_listen), ("1.2.3.4:70000", parse_listen)):
        with pytest.raises(UserError):
            parse(bad)
    assert "sched_wait" not in light_probes(["cpu_sample", "sched_wait", "net_dev"])


def _scrape(metrics: IntervalMetrics) -> dict:
    """{(name, sorted label items): value} of the registry, as a scraper parses it."""
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_intervals_become_counters_with_bounded_labels():
    m = IntervalMetrics("node1")
    procs = [(10, 1, "python", "", 1, 0.0, 1.0, None, "/system.slice/slurmstepd.scope/job_7/step_0"),
             (11, 1, "sshd", "", 1, 0.0, 1.0, None, "/system.slice/sshd.service")]
    tables = {"cpu_category": [(10, "compression", "compression.zlib", 9, 0.9),
                               (11, "network", "network.tcpip", 1, 0.1), (0, "idle", "idle", 5, 0.5)],
              "sock_io": [(10, "tcp", "tx", 1000, 3)], "block_io": [("vda", "read", 4096, 1)],
              "net_io": [("eth0", "rx", 1500, 1)], "lost": [("samples", 2), ("stack", 0)]}
    m.add(100.0, 101.0, tables, procs)
    m.add(101.0, 102.0, {"cpu_category": [(10, "compression", "compression.zlib", 9, 0.6)]})
    got = _scrape(m)
    node = ("node", "node1")
    cpu = "dpuprof_cpu_seconds_total"
    assert got[(cpu, (("category", "compression"), ("job_id", "7"), ("job_kind", "slurm"), node,
                      ("subcategory", "compression.zlib")))] == pytest.approx(1.5)
    assert got[(cpu, (("category", "network"), ("job_id", "sshd.service"), ("job_kind", "unit"), node,
                      ("subcategory", "network.tcpip")))] == pytest.approx(0.1)
    idle = (("category", "idle"), ("job_id", ""), ("job_kind", "none"), node, ("subcategory", "idle"))
    assert got[(cpu, idle)] == 0.5
    assert got[("dpuprof_socket_bytes_total", (("direction", "tx"), ("job_id", "7"), ("job_kind", "slurm"), node,
                                               ("protocol", "tcp")))] == 1000
    assert got[("dpuprof_block_io_bytes_total", (("dev", "vda"), node, ("op", "read")))] == 4096
    assert got[("dpuprof_net_packets_total", (("dev", "eth0"), ("direction", "rx"), node))] == 1
    assert got[("dpuprof_lost_total", (("kind", "samples"), node))] == 2
    assert ("dpuprof_lost_total", (("kind", "stack"), node)) not in got  # zero losses make no series
    assert got[("dpuprof_recorded_seconds_total", (node,))] == 2.0
    assert ("process_cpu_seconds_total", ()) in got  # the agent's own CPU
    assert not any(name.endswith("_created") for name, _ in got)
    assert not any(k in ("job", "instance") for _n, labels in got for k, _v in labels)  # Prometheus' own
    allowed = {"category", "subcategory", "job_id", "job_kind", "node", "protocol", "direction", "dev", "op", "kind"}
    assert {k for _name, labels in got for k, _v in labels} <= allowed  # no pid, comm or cmdline label


def test_a_job_gone_at_a_rotation_loses_its_series():
    m = IntervalMetrics("n")
    m.add(0, 1, {"cpu_category": [(5, "compute", "compute.other", 1, 0.25)]},
          [(5, 1, "x", "", 1, 0.0, 1.0, None, "/x.service")])
    assert any(dict(labels).get("job_id") == "x.service" for _n, labels in _scrape(m))
    m.rotated(None, live_pids=set())
    got = _scrape(m)
    assert not any(dict(labels).get("job_id") == "x.service" for _n, labels in got)
    assert got[("dpuprof_rotations_total", (("node", "n"),))] == 1


def test_the_agents_own_cpu_is_the_observers_not_its_cgroups_job():
    # the agent runs in cgroup / beside kernel threads; its background projection (pandas, numpy)
    # was filed as compute for job_id="/"
    me = os.getpid()
    m = IntervalMetrics("n")
    procs = [(me, 1, "dpuprof", "", 1, 0.0, 1.0, None, "/"), (2, 0, "kthreadd", "", 1, 0.0, 1.0, None, "/")]
    m.add(0, 1, {"cpu_category": [(me, "compute", "compute.torch", 50, 0.5), (2, "kernel_other", "kernel_other.sched", 1, 0.01)],
                 "sock_io": [(me, "tcp", "tx", 100, 1)]}, procs)
    got = _scrape(m)
    cpu = {(dict(labels)["job_kind"], dict(labels)["job_id"], dict(labels)["subcategory"]): v
           for name, labels in got for v in [got[(name, labels)]] if name == "dpuprof_cpu_seconds_total"}
    assert cpu[("observer", "dpuprof-agent", "compute.torch")] == pytest.approx(0.5)
    assert ("cgroup", "/", "compute.torch") not in cpu and cpu[("cgroup", "/", "kernel_other.sched")] == 0.01
    assert any(dict(lb).get("job_kind") == "observer" for n, lb in got if n == "dpuprof_socket_bytes_total")
    m.rotated(None, live_pids={me})  # never a job that can be forgotten, nor one that counts to max_jobs
    assert m.jobs.of(me) == OBSERVER_JOB and OBSERVER_JOB not in m.jobs.jobs


def test_the_recorders_own_pid_is_no_job_to_project():
    import pandas as pd

    from dpuprof.agent.projecting import job_pids

    procs = pd.DataFrame({"pid": [1, 2, 3], "cgroup": ["/", "/", "/a.service"]})
    cpu = pd.DataFrame({"pid": [1, 2, 3], "category": ["compute", "network", "compute"], "cpu_s": [9.0, 1.0, 2.0]})
    assert job_pids(procs, cpu, 5, own_pid=1) == {Job("unit", "a.service"): {3}, Job("cgroup", "/"): {2}}
    assert job_pids(procs, cpu, 5)[Job("cgroup", "/")] == {1, 2}  # a recording without recorder_pid


def _intervals(w: RotatingWriter, n: int, t0: float = 1000.0, start: int = 0) -> None:
    """``n`` one-second intervals, each with a new stack sampled by a new process and an old one."""
    for i in range(start, start + n):
        pid = 100 + i
        w.write_interval(i, t0 + i, t0 + i + 1,
                         {"cpu_category": [(pid, "compute", "compute.other", 2, 0.02),
                                           (100, "network", "network.tcpip", 1, 0.01)],
                          "stack_samples": [(pid, i + 1, 2), (100, 1, 1)]},
                         processes=[(pid, 1, f"p{i}", "", 1, t0 + i, t0 + i + 1, None, "/a.service")]
                         + ([(100, 1, "p0", "", 1, t0, t0 + i + 1, None, "/a.service")] if i else []),
                         stacks=[(i + 1, f"main;f{i}", "compute", "compute.other")])


def test_rotating_files_cover_the_run_and_each_loads(tmp_path):
    seen = []
    w = RotatingWriter(tmp_path, "node", {"command": [], "interval_s": 1.0, "sample_freq_hz": 19},
                       rotate_s=3, keep=10, on_interval=lambda *a: seen.append(a[:2]),
                       now=lambda: 1000.0)
    w.set_meta(start_time=1000.0)
    _intervals(w, 10)
    w.close(end_time=1010.0, stop_reason="stopped")
    files = sorted(tmp_path.glob("node-*.rec"))
    # named after each file's start (1000 s after the epoch is 00:16:40)
    assert [f.name for f in files] == [f"node-19700101T0016{40 + 3 * i}Z-{i + 1:06d}.rec" for i in range(4)]
    recs = [load(f) for f in files]
    assert [len(r.table("intervals")) for r in recs] == [3, 3, 3, 1]
    assert all(r.complete for r in recs) and recs[0].meta["stop_reason"] == "rotated"
    for a, b in zip(recs, recs[1:]):  # the next file starts where the last one ended
        assert a.meta["end_time"] == b.meta["start_time"] == b.table("intervals")["t_start"].min()
    covered = [(t0, t1) for r in recs for t0, t1 in r.table("intervals")[["t_start", "t_end"]].itertuples(index=False)]
    assert covered == [(1000.0 + i, 1001.0 + i) for i in range(10)] == seen
    for r in recs:  # every process and stack an interval refers to is in its file
        assert set(r.table("cpu_category")["pid"]) <= set(r.table("processes")["pid"])
        assert r.table("intervals")["interval"].min() == 0
    assert recs[2].table("processes").set_index("pid").loc[100, "cgroup"] == "/a.service"
    assert len(seen) == 10


def test_rotation_by_size_keeps_the_newest_files(tmp_path):
    other = tmp_path / "node-notes.rec"
    other.write_text("not ours")
    w = RotatingWriter(tmp_path, "node", {"command": [], "interval_s": 1.0}, rotate_s=None,
                       rotate_bytes=1, keep=2, now=lambda: 1000.0)  # every file is over 1 byte: one interval each
    _intervals(w, 5)
    w.close(end_time=1005.0)
    kept = sorted(tmp_path.glob("node-*-*.rec"))
    assert [p.name[-10:] for p in kept] == ["000004.rec", "000005.rec"] and other.exists()
    assert [load(p).table("intervals")["t_start"].tolist() for p in kept] == [[1003.0], [1004.0]]


def test_agent_bad_options_are_one_line():
    for args in (["--rotate", "soon"], ["--listen", "x:y"], ["--rotate", "off"], ["--probes", "psutil"],
                 ["--project", "no-such-dpu"]):
        proc = dpuprof("agent", *args, "-D", "out")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert proc.stderr.startswith("dpuprof: error:") and "Traceback" not in proc.stderr


def test_agent_help_ends_with_examples_and_says_what_listen_exposes():
    out = dpuprof("agent", "--help", check=True).stdout
    assert "0.0.0.0" in out and "no authentication" in out
    assert out.rstrip().splitlines()[-1].lstrip().startswith("dpuprof report")
    assert "Examples:" in out


def test_jobs_to_project_are_the_busiest_with_their_pids():
    import pandas as pd

    from dpuprof.agent.projecting import job_pids

    procs = pd.DataFrame({"pid": [0, 1, 2, 3, 4], "cgroup": [None, "/a.service", "/a.service", "/b/job_9", "/c.scope"]})
    cpu = pd.DataFrame({"pid": [0, 1, 2, 3, 4], "category": ["idle", "network", "compute", "compression", "compute"],
                        "cpu_s": [9.0, 1.0, 1.0, 5.0, 0.5]})
    assert job_pids(procs, cpu, 2) == {Job("slurm", "9"): {3}, Job("unit", "a.service"): {1, 2}}


def test_projection_gauges_per_dpu_and_job(fixture_copy):
    from dpuprof.agent.projecting import Projector, project_jobs

    m = IntervalMetrics("n")
    proj = Projector(["bluefield-3"], "n", m.registry)
    results = project_jobs(load(fixture_copy("ddp-encrypted")), proj.profiles, 5)
    proj.publish(results)
    (dpu, job, freed, bounds), = results  # the fixture's processes are all in cgroup /
    assert (dpu, job) == ("bluefield-3", Job("cgroup", "/")) and freed > 0
    assert bounds["low"] <= bounds["expected"] <= bounds["high"]
    got = _scrape(m)
    labels = (("dpu", "bluefield-3"), ("job_id", "/"), ("job_kind", "cgroup"), ("node", "n"))
    assert got[("dpuprof_projected_freed_cores", labels)] == pytest.approx(freed)
    assert got[("dpuprof_projected_speedup", (("bound", "expected"),) + labels)] == pytest.approx(bounds["expected"])
    proj.publish([])  # the next file has no job: the series go
    assert not any(name.startswith("dpuprof_projected") for name, _ in _scrape(m))


def test_a_live_threads_row_is_carried_into_every_file_and_ends_at_each_files_end(tmp_path):
    """The recorder gives a live thread's row once, last_seen None (threads.py _thread_rows):
    each rotated file still holds it, last seen at that file's last interval."""
    w = RotatingWriter(tmp_path, "node", {"command": [], "interval_s": 1.0}, rotate_s=2, keep=10,
                       now=lambda: 1000.0)
    for i in range(5):
        w.write_interval(i, 1000.0 + i, 1001.0 + i, {},
                         threads=[(7, 100, "worker", 1000.0, None)] if i == 0 else
                         [(8, 100, "short", 1003.0, 1003.5)] if i == 3 else [])
    w.close(end_time=1005.0, stop_reason="stopped")
    got = [load(f).table("threads").set_index("tid")["last_seen"].to_dict() for f in sorted(tmp_path.glob("node-*.rec"))]
    assert got == [{7: 1002.0}, {7: 1004.0, 8: 1003.5}, {7: 1005.0, 8: 1003.5}]
