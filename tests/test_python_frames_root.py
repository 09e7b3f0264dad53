"""Root tests: Python frames from CPython's perf trampoline (dpuprof/record/stacks/perfmap.py,
probes/cpu_sample.bpf.c's stack scan).

Ground truth is the workload (tests/workloads/python_hot.py): after start-up it spends all its CPU
in ``hot_python_loop_for_dpuprof``, called from ``outer_caller_for_dpuprof``, called from the
module. Interpreters come from pyenv (3.12 and 3.13 have the trampoline, 3.11 has none).
"""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from conftest import WORKLOADS, dpuprof, last_json_line

pytestmark = pytest.mark.root

PYENV = "/root/.pyenv/versions"
SCRIPT = WORKLOADS / "python_hot.py"
HOT = f"py::hot_python_loop_for_dpuprof:{SCRIPT} (perf-map)"
OUTER = f"py::outer_caller_for_dpuprof:{SCRIPT} (perf-map)"
MODULE = f"py::<module>:{SCRIPT} (perf-map)"
SYSCALL = f"py::syscall_loop_for_dpuprof:{SCRIPT} (perf-map)"


def _python(version: str) -> str:
    exe = f"{PYENV}/{version}/bin/python{version.rsplit('.', 1)[0]}"
    if not os.path.exists(exe):
        pytest.skip(f"no {exe} on this machine")
    return exe


def _record(tmp_path, version: str, *flags, seconds=2.5, syscall_seconds=0, env=None):
    out = tmp_path / f"py{version}.rec"
    proc = dpuprof("record", "-q", *flags, "-o", out, "--", _python(version), SCRIPT, seconds,
                   *([syscall_seconds] if syscall_seconds else []), timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    own = last_json_line(proc.stdout)
    db = sqlite3.connect(out)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    report = dpuprof("report", out, "--format", "folded", check=True)
    comm = f"python{version.rsplit('.', 1)[0]}"
    folded = [line.rsplit(" ", 1) for line in report.stdout.splitlines() if line.startswith(comm + ";")]
    return meta, own, [(stack, int(n)) for stack, n in folded]


@pytest.fixture(scope="module")
def hot_run(tmp_path_factory):
    """``hot_run(version)`` -> _record's (meta, own, folded) of python_hot.py: 2.5 s in the hot loop,
    then 1.5 s in the readv loop. One recording per interpreter serves both the hot-loop test and
    the system-call test (each recorder start costs seconds of probe compile); read-only."""
    runs: dict[str, tuple] = {}

    def run(version):
        if version not in runs:
            # --interval 1: frames start at the first drain after the first trampoline (the
            # default 2-s drains would leave a 2.5-s hot loop mostly before it).
            runs[version] = _record(tmp_path_factory.mktemp("hot"), version, "--interval", "1",
                                    seconds=2.5, syscall_seconds=1.5)
        return runs[version]

    return run


def _in_the_syscall_loop(stack: str) -> bool:
    return SYSCALL in stack.split(";") or "do_readv_[k]" in stack


@pytest.mark.parametrize("version", ["3.12.1", "3.13.0"])
def test_hot_python_function_appears_by_name(hot_run, version):
    meta, own, folded = hot_run(version)
    minor = version.rsplit(".", 1)[0]
    assert meta["python_frames"].startswith(f"on (perf trampoline, CPython {minor}"), meta["python_frames"]
    # The samples up to the end of the hot loop: the readv loop after it is the next test's.
    total = sum(n for stack, n in folded if not _in_the_syscall_loop(stack))
    hot = sum(n for stack, n in folded if HOT in stack.split(";"))
    print(f"{version}: {hot} of {total} samples under {HOT}; workload says {own}")
    # The loop is all of the run after start-up; frames appear from the first drain after the
    # process's first trampoline (within one --interval), so well over a third of the samples.
    assert hot >= 0.4 * total, (hot, total)
    # Callers in order, outermost first, under the comm and above the native frames.
    chain = f"{MODULE};{OUTER};{HOT}"
    assert any(f";{chain}" in stack for stack, _ in folded), folded[:5]
    # The interpreter's perf map, read while recording, is gone with the recording: dpuprof set
    # PYTHONPERFSUPPORT, so the file is its doing.
    assert not os.path.exists(f"/tmp/perf-{meta['root_pid']}.map")


def test_a_perf_map_the_user_asked_for_stays(tmp_path):
    meta, _own, _folded = _record(tmp_path, "3.12.1", seconds=0.5, env=dict(os.environ, PYTHONPERFSUPPORT="1"))
    kept = f"/tmp/perf-{meta['root_pid']}.map"
    try:
        assert os.path.getsize(kept) > 0  # PYTHONPERFSUPPORT was set already: the map is the user's
    finally:
        if os.path.exists(kept):
            os.unlink(kept)  # the test's own leftover


def test_kernel_time_is_charged_to_the_calling_python_function(hot_run):
    """In a system call the scan starts at the user sp saved at kernel entry."""
    _meta, own, folded = hot_run("3.12.1")
    in_readv = [(stack, n) for stack, n in folded if "do_readv_[k]" in stack]
    under = sum(n for stack, n in in_readv if f"{MODULE};{SYSCALL};" in stack)
    total = sum(n for _, n in in_readv)
    print(f"{under} of {total} readv samples under {SYSCALL}; workload says {own}")
    # The readv loop runs after the hot loop, so after the first drain: nearly all are named.
    assert total >= 50 and under >= 0.8 * total, (under, total)


def test_older_python_says_why_there_are_none(tmp_path):
    meta, _own, folded = _record(tmp_path, "3.11.7", seconds=1)
    assert meta["python_frames"] == "off: CPython 3.11 has no perf trampoline (needs >= 3.12)"
    assert folded and not any("py::" in stack for stack, _ in folded)


def test_no_python_frames_flag(tmp_path):
    meta, _own, folded = _record(tmp_path, "3.12.1", "--no-python-frames", seconds=1)
    assert meta["python_frames"] == "off: --no-python-frames"
    assert folded and not any("py::" in stack for stack, _ in folded)
    assert not os.path.exists(f"/tmp/perf-{meta['root_pid']}.map")  # the trampoline stayed off


def test_python_caller_of_the_tax_shows_in_html_flame_graph_and_speedscope(tmp_path):
    """The user story: which Python code pays the compression tax (tests/workloads/zlib_compress.py
    compresses from module level)."""
    out = tmp_path / "zlib.rec"
    script = WORKLOADS / "zlib_compress.py"
    proc = dpuprof("record", "-q", "-o", out, "--", _python("3.12.1"), script, 2.5, timeout=240)
    assert proc.returncode == 0, proc.stderr
    frame = f"py::<module>:{script} (perf-map)"
    html = tmp_path / "zlib.html"
    dpuprof("report", out, "--format", "html", "-o", html, check=True)
    assert f"py::&lt;module&gt;:{script} (perf-map)" in html.read_text()  # in the tax flame graph, escaped
    speedscope = tmp_path / "zlib.speedscope.json"
    dpuprof("report", out, "--format", "speedscope", "-o", speedscope, check=True)
    names = {f["name"] for f in json.loads(speedscope.read_text())["shared"]["frames"]}
    assert frame in names
