"""Root tests: uprobes count all-reduces, step markers and cipher/codec calls of known workloads.

Ground truth comes from the workloads themselves (tests/workloads/gloo_allreduce.py and
codec_known.py): a known number of calls of known size; the recording must agree within 2 %
(steps within one).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest

from conftest import PYTHON, WORKLOADS, dpuprof, last_json_line

pytestmark = pytest.mark.root

N_ALLREDUCE, K_FLOATS, STEPS = 50, 65536, 5


def _record(tmp_path, name, *cmd):
    out = tmp_path / f"{name}.rec"
    proc = dpuprof("record", "-q", "--codec-uprobes", "-o", out, "--", PYTHON, *cmd, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return sqlite3.connect(out), last_json_line(proc.stdout)


def _meta(db, key):
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def test_gloo_allreduce_count_bytes_and_steps(tmp_path):
    db, truth = _record(tmp_path, "gloo", WORKLOADS / "gloo_allreduce.py", N_ALLREDUCE, K_FLOATS, STEPS)
    assert _meta(db, "uprobes")["gloo::allreduce"] == "attached", _meta(db, "uprobes")
    per_rank = db.execute("SELECT pid, sum(count), sum(bytes), sum(duration_ns) FROM collectives "
                          "WHERE op = 'allreduce' GROUP BY pid").fetchall()
    print("collectives per rank:", per_rank, "truth:", truth)
    assert len(per_rank) == truth["ranks"]
    for _pid, count, nbytes, ns in per_rank:
        assert abs(count - truth["allreduces"]) <= 0.02 * truth["allreduces"]
        assert abs(nbytes - truth["bytes"]) <= 0.02 * truth["bytes"]
        assert ns > 0
    lost = dict(db.execute("SELECT kind, sum(count) FROM lost GROUP BY kind").fetchall())
    assert "allreduce_bytes_unverified" not in lost, lost
    start, end = _meta(db, "start_time"), _meta(db, "end_time")
    for kind, want in (("step", truth["steps"]), ("ddp_step", truth["ddp_steps"])):
        steps = db.execute("SELECT pid, count(*), min(t), max(t) FROM markers WHERE kind = ? "
                           "GROUP BY pid", (kind,)).fetchall()
        assert len(steps) == truth["ranks"], (kind, steps)
        for _pid, n, t0, t1 in steps:
            assert abs(n - want) <= 1, (kind, n, want)
            assert start <= t0 <= t1 <= end  # unix seconds, inside the recording


def test_codec_calls_bytes_and_direction(tmp_path):
    db, own = _record(tmp_path, "codec", WORKLOADS / "codec_known.py", 60)
    truth = own["truth"]
    status = _meta(db, "uprobes")
    rows = {f"{lib}:{func}": (direction, calls, nbytes, ns, cpu) for lib, func, direction, calls, nbytes, ns, cpu in
            db.execute("SELECT lib, func, direction, sum(calls), sum(bytes), sum(duration_ns), sum(cpu_ns) "
                       "FROM codec_calls GROUP BY lib, func, direction")}
    print("codec_calls:", rows, "truth:", truth)
    want_dir = {"inflate": "decompress", "deflate": "compress", "EVP_EncryptUpdate": "encrypt",
                "EVP_DecryptUpdate": "decrypt"}
    for target, (calls, nbytes) in truth.items():
        assert status[target] == "attached", status
        direction, got_calls, got_bytes, ns, cpu_ns = rows[target]
        assert direction == want_dir[target.split(":")[1]]
        if calls is not None:  # zlib.compress calls deflate a data-dependent number of times
            assert abs(got_calls - calls) <= 0.02 * calls, (target, got_calls, calls)
        assert abs(got_bytes - nbytes) <= 0.02 * nbytes, (target, got_bytes, nbytes)
        assert 0 < cpu_ns <= ns
        # On-CPU time inside the calls against the thread's CPU time around them (time.thread_time).
        # Where the probed function is the call (libcrypto through ctypes; zlib.compress is its
        # deflate loop) they agree (0.95-0.98 here); zlib.decompress also copies its 1 MiB result
        # out of the oversized buffer, outside the probed function (0.60-0.65). The wheel's AESGCM
        # writes into a reused buffer (encrypt_into: a fresh result made most of the time around
        # the call page faults, 7.7 against 40.3 ms), and does a part of its work outside
        # EVP_*Update (context set-up, the tag): 0.75 for encrypt, 0.92 for decrypt, in two runs on
        # the 2-vCPU VM. The set-up's extra encrypt/compress adds 1/60 the other way.
        around = own["cpu_s"][target] * 1e9
        print(f"{target}: cpu_ns {cpu_ns / 1e6:.1f} ms, thread_time around {around / 1e6:.1f} ms")
        low = 0.25 if target == "libz:inflate" else 0.6 if target.startswith("cryptography_rust") else 0.85
        assert low * around <= cpu_ns <= 1.05 * around, (target, cpu_ns, around)


HOT_LOOP = """
import sys, time, zlib
small = zlib.compress(b"x" * 64)
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    zlib.decompress(small)
    n += 1
print('{"calls": %d}' % n)
"""


def test_a_target_called_too_often_is_detached_and_says_why(tmp_path):
    out = tmp_path / "hot.rec"
    env = dict(os.environ, DPUPROF_UPROBE_MAX_HZ="500")
    proc = dpuprof("record", "-q", "--codec-uprobes", "-o", out, "--", PYTHON, "-c", HOT_LOOP, "3.5", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    db = sqlite3.connect(out)
    status = _meta(db, "uprobes")
    assert status["libz:inflate"].startswith("detached: "), status
    assert "over the limit of 500/s" in status["libz:inflate"]
    # Hits are counted for every process on the host (each one pays the trap), so a target that
    # other processes call often could be detached too; all-reduces are rare enough to stay.
    assert status["gloo::allreduce"] == "attached", status
    per_interval = dict(db.execute("SELECT interval, sum(calls) FROM codec_calls WHERE func = 'inflate' "
                                   "GROUP BY interval").fetchall())
    last = db.execute("SELECT max(interval) FROM intervals").fetchone()[0]
    assert per_interval and max(per_interval) < last, per_interval  # nothing counted after the detach
    assert sum(per_interval.values()) < last_json_line(proc.stdout)["calls"]
    # issue 35: the detach is said at record time (even with -q), in report and in project
    when = _meta(db, "uprobes_detached")["libz:inflate"]
    assert _meta(db, "start_time") - 1 <= when["from"] < when["detached_at"] <= _meta(db, "end_time"), when
    # (other processes' calls count too: deflate may stop early as well, each with its own line)
    said = [line for line in proc.stderr.splitlines() if "uprobe libz:inflate stopped early" in line]
    assert len(said) == 1 and said[0].startswith("dpuprof: warning: uprobe libz:inflate stopped early: "
                                                 "detached after "), proc.stderr
    line = "uprobe libz:inflate stopped early: detached after"
    stopped = json.loads(dpuprof("report", out, "--format", "json", check=True).stdout)["probes_stopped_early"]
    inflate = {s["target"]: s for s in stopped}["libz:inflate"]
    assert 0 < inflate["covered_s"] < inflate["span_s"], stopped
    assert line in dpuprof("report", out, check=True).stdout
    projected = dpuprof("project", out, "-o", tmp_path / "hot.proj.json", check=True).stdout
    assert line in projected and "projection: its codec_calls are scaled by" in projected, projected


def test_a_library_found_only_in_the_workload_maps_is_attached_when_loaded(tmp_path):
    # A private copy of libcrypto (another file, as a venv's or a container's would be): the
    # recorder cannot know it before the workload maps it, so it attaches at a drain after.
    import ctypes.util

    system = ctypes.util.find_library("crypto")  # the soname, e.g. "libcrypto.so.3"
    assert system == "libcrypto.so.3", system
    system = next(p for p in ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/lib64/libcrypto.so.3",
                              "/usr/lib64/libcrypto.so.3", "/usr/lib/libcrypto.so.3") if os.path.exists(p))
    copy = tmp_path / "lib" / "libcrypto.so.3"
    copy.parent.mkdir()
    shutil.copy(system, copy)
    out = tmp_path / "copy.rec"
    env = dict(os.environ, CODEC_LIBCRYPTO=str(copy))
    proc = dpuprof("record", "-q", "--codec-uprobes", "-o", out, "--", PYTHON, WORKLOADS / "codec_known.py", 60, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    db = sqlite3.connect(out)
    paths = _meta(db, "uprobes_paths")
    for target in ("libcrypto:EVP_EncryptUpdate", "libcrypto:EVP_DecryptUpdate"):
        assert str(copy) in paths[target], paths
        calls, nbytes = db.execute("SELECT sum(calls), sum(bytes) FROM codec_calls WHERE lib = 'libcrypto' "
                                   "AND func = ?", (target.split(":")[1],)).fetchone()
        want_calls, want_bytes = last_json_line(proc.stdout)["truth"][target]
        assert abs(calls - want_calls) <= 0.02 * want_calls and abs(nbytes - want_bytes) <= 0.02 * want_bytes
