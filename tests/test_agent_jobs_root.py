"""Root tests: ``dpuprof agent`` with two jobs in two cgroups at once (each job's series carry only
its own CPU), and on a full disk (one line, the files written so far kept)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import PYTHON, WORKLOADS
from test_agent_root import _free_port, _recordings, _scrape, _start_agent, _wait_recorded

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def two_slurm_jobs():
    """Two cgroup v2 groups ``/dpuprof-agent-jobs-PID/job_PIDa`` and ``job_PIDb``: [(dir, job id)]."""
    from dpuprof.record.workload.procfs import cgroup2_mount

    mount = cgroup2_mount()
    assert mount, "this machine has a cgroup v2 hierarchy"
    top = os.path.join(mount, f"dpuprof-agent-jobs-{os.getpid()}")
    jobs = [(os.path.join(top, f"job_{os.getpid()}{s}"), f"{os.getpid()}{s}") for s in "12"]
    for path, _job in jobs:
        os.makedirs(path)
    try:
        yield jobs
    finally:
        for path, _job in jobs:
            os.rmdir(path)
        os.rmdir(top)


def _run_in(group_dir: str, workload: str, seconds: float, out: dict) -> None:
    """Run ``workload`` for ``seconds`` inside ``group_dir``; its CPU seconds into ``out[group_dir]``."""
    def into_group():
        with open(os.path.join(group_dir, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    work = subprocess.run([PYTHON, WORKLOADS / workload, str(seconds)], preexec_fn=into_group,
                          capture_output=True, text=True, timeout=120)
    assert work.returncode == 0, work.stderr
    out[group_dir] = json.loads(work.stdout)["cpu_s"]


def test_two_jobs_at_once_each_carry_only_their_own_cpu(tmp_path, two_slurm_jobs):
    (zlib_dir, zlib_job), (aes_dir, aes_job) = two_slurm_jobs
    port = _free_port()
    agent = _start_agent(tmp_path / "recs", port, "1h")
    try:
        _wait_recorded(agent, port, 0.0)
        cpu: dict = {}
        runs = [threading.Thread(target=_run_in, args=(zlib_dir, "zlib_compress.py", 5, cpu)),
                threading.Thread(target=_run_in, args=(aes_dir, "aes_gcm.py", 5, cpu))]
        for t in runs:
            t.start()
        for t in runs:
            t.join()
        covered = _wait_recorded(agent, port, 0.0)
        _wait_recorded(agent, port, covered + 2.0)  # both jobs' last intervals are committed
        samples = _scrape(port)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=120)
    assert set(cpu) == {zlib_dir, aes_dir}

    def by_category(job: str) -> dict:
        out: dict = {}
        for name, labels, value in samples:
            if name == "dpuprof_cpu_seconds_total" and labels["job_id"] == job:
                assert labels["job_kind"] == "slurm"
                out[labels["category"]] = out.get(labels["category"], 0.0) + value
        return out

    zlib, aes = by_category(zlib_job), by_category(aes_job)
    for got, want, own, other in ((zlib, cpu[zlib_dir], "compression", "crypto"),
                                  (aes, cpu[aes_dir], "crypto", "compression")):
        total = sum(got.values())
        assert 0.7 * want <= total <= 1.3 * want + 0.2, (got, want)  # its own CPU, not the other's
        assert got.get(own, 0.0) >= 0.6 * total, got
        assert got.get(other, 0.0) <= 0.02 * total, got  # none of the other job's work


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs at tmp_path/disk, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "dpuprof-test", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_is_one_line_and_keeps_the_files_written(small_disk):
    port = _free_port()
    agent = _start_agent(small_disk, port, "2s")
    try:
        covered = _wait_recorded(agent, port, 0.0)
        deadline = time.time() + 120
        while time.time() < deadline and len(list(small_disk.glob("*.rec"))) < 3:
            covered = _wait_recorded(agent, port, covered)
        kept = {p.name for p in small_disk.glob("*.rec")}
        # Unbuffered: a failed write then leaves nothing for close() to flush (and fail on) again.
        with open(small_disk / "filler", "wb", buffering=0) as fh:  # the disk fills up under the agent
            try:
                while True:
                    fh.write(b"\0" * (1 << 16))
                    fh.flush()
            except OSError:
                pass
        rc = agent.wait(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    err = agent.stderr.read()
    errors = [line for line in err.splitlines() if "error" in line]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "No space left on device" in errors[0] or "full" in errors[0], err
    (small_disk / "filler").unlink()
    recs = _recordings(small_disk)
    assert kept <= {r.path.name for r in recs}  # every file written before is still there and loads
    assert sum(r.complete for r in recs) >= 2
    assert all(len(r.table("intervals")) >= 1 for r in recs if r.complete)
