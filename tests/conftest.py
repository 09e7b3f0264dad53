"""Shared test helpers.

Root tests (``@pytest.mark.root``) record real workloads with eBPF. They skip only where root or
bcc is truly absent; CI runs as root with bcc installed by scripts/install-bcc.sh, so a skip
there is a set-up failure (``DPUPROF_REQUIRE_ROOT_TESTS=1`` turns such a skip into a failure).

Tests are hermetic: each runs in its own empty working directory (``_own_cwd``), so a command
that writes into the current directory (``dpuprof project`` does by default) never writes into
the checkout; recordings from ``fixtures/`` are read through ``fixture_copy``, never in place; and
subprocesses import this checkout's ``dpuprof`` (PYTHONPATH), whatever is pip-installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from machine_lock import MachineLock

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "tests" / "workloads"
FIXTURES = REPO / "fixtures"
# The real interpreter, not a wrapper script (pyenv shims run bash before exec'ing python, and that
# CPU would blur the workload's own getrusage numbers).
PYTHON = os.path.realpath(sys.executable)
# Subprocesses (``python -m dpuprof``) run from a temporary cwd: make them import this checkout.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


def _session_dir(prefix: str) -> str:
    """A new temporary directory, removed when the session ends."""
    import atexit
    import tempfile

    home = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def _session_env(name: str, prefix: str) -> None:
    """Environment variable ``name`` names a new session directory unless it is set already (the
    xdist workers inherit the controller's, and the directory is made only where it is not)."""
    if name not in os.environ:
        os.environ[name] = _session_dir(prefix)


def _hypothesis_outside_the_checkout() -> None:
    """Hypothesis keeps its caches in ./.hypothesis (the checkout, where pytest starts): a
    temporary directory instead, removed when the session ends, so the suite writes nothing
    inside the repository (pytest's own cache is off: addopts -p no:cacheprovider)."""
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(_session_dir("dpuprof-hypothesis-"))


_hypothesis_outside_the_checkout()


def _stop_signals_at_their_defaults() -> None:
    """The signal tests send SIGINT and SIGQUIT to the recorder and expect the commands it starts to
    die of them. A shell starts a background job (``cmd &`` without job control, as CI scripts
    and nohup wrappers do) with both ignored, and every process the tests start would inherit
    that: then a forwarded SIGINT is ignored by the command, as it would be outside the tests."""
    import signal

    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, default)


_stop_signals_at_their_defaults()


def _launches_share_compiled_probes() -> None:
    """The suite's ~70 recorder and agent launches load the same few probe sets: the first launch
    of a set compiles it (2-3 s of clang on a 2-CPU machine) and stores it in a probe cache of the
    session's (DPUPROF_PROBE_CACHE, record/load/probe_cache.py); the others load it from there.
    A different probe set, kernel or DPUPROF_* setting is another key, so no test gets another's
    programs. The tests of the compile itself (test_compile_child_root.py) and of the cache
    (test_probe_cache_root.py) set or clear the variable themselves."""
    _session_env("DPUPROF_PROBE_CACHE", "dpuprof-probes-")


_launches_share_compiled_probes()

LOCK_DIR = "PYTEST_MACHINE_LOCK_DIR"
_session_env(LOCK_DIR, "dpuprof-machine-lock-")  # the controller's, before it starts the workers (machine_lock.py)


@pytest.fixture(autouse=True)
def _own_cwd(tmp_path_factory, monkeypatch):
    """Run every test in an empty directory of its own, never in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def fixture_path(name) -> Path:
    """``fixtures/NAME/recording.rec`` for a scenario name, or ``name`` itself when it is a path."""
    text = str(name)
    return Path(text) if text.endswith(".rec") or os.sep in text else FIXTURES / text / "recording.rec"


@pytest.fixture(scope="session")
def fixture_copy(tmp_path_factory):
    """``fixture_copy(name)`` -> Path of a private copy of ``fixtures/NAME/recording.rec`` (or of the
    recording at path ``name``), in a directory of its own, so nothing reads or writes beside the
    repository's fixtures (no stray ``RUN.proj.json`` is picked up, no SQLite side file is made).

    Copies are made once per session and shared: treat them as read-only. ``fixture_copy(name,
    into=tmp_path)`` makes a fresh copy in ``into`` for a test that changes it or writes beside it.
    Skips the test when the fixture is not in this checkout.
    """
    shared: dict[Path, Path] = {}

    def copy(name, into: Path | None = None) -> Path:
        src = fixture_path(name)
        if not src.exists():
            pytest.skip(f"{src} is not in this checkout")
        if into is None and src in shared:
            return shared[src]
        label = src.parent.name if src.name == "recording.rec" else src.stem
        folder = Path(into) if into is not None else tmp_path_factory.mktemp(f"fixture-{label}")
        dst = folder / src.name
        shutil.copyfile(src, dst)
        if into is None:
            shared[src] = dst
        return dst

    return copy


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """``recorded(*cmd, freq=499)`` -> (path, CompletedProcess) of ``dpuprof record -q -F FREQ -o
    PATH -- CMD``, which must exit 0.

    Each (cmd, freq) is recorded once per session and shared by every test that asks for it (each
    recorder start costs seconds of probe compile, and a workload seconds more): treat the file as
    read-only, and copy it (``shutil.copyfile`` into ``tmp_path``) to change it or write beside it.
    """
    runs: dict[tuple, tuple[Path, subprocess.CompletedProcess]] = {}

    def record(*cmd, freq=499):
        key = (tuple(map(str, cmd)), int(freq))
        if key not in runs:
            out = tmp_path_factory.mktemp("recorded") / "run.rec"
            proc = dpuprof("record", "-q", "-F", freq, "-o", out, "--", *cmd, timeout=180)
            assert proc.returncode == 0, proc.stderr
            runs[key] = out, proc
        return runs[key]

    return record


def _root_and_bcc() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    from dpuprof.record.load.bcc_loader import bcc_available

    ok, why = bcc_available()
    return None if ok else why


# The suite runs on two pytest-xdist workers (pyproject.toml's addopts: -n 2 --dist loadgroup). Each
# test file is one group, so its module fixtures run once; these files, the two that run whole
# benchmark harnesses for minutes (-m benchmark), share one group. A file with a root or benchmark
# test runs alone (machine_lock.py): its measurements are not shared with another test's load.
HEAVY_FILES = ("test_benchmarks_quick.py", "test_validate_quick.py")
RUNS_ALONE: set[Path] = set()  # the files of the collected items marked root or benchmark
_LOCK: list[MachineLock] = []  # this worker's hold on the machine, made at its first test


def _group_by_file(items) -> None:
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group("heavy" if name in HEAVY_FILES else name))
        if item.get_closest_marker("root") or item.get_closest_marker("benchmark"):
            RUNS_ALONE.add(item.path)


def pytest_collection_modifyitems(config, items):
    _group_by_file(items)
    reason = _root_and_bcc()
    if reason is None:
        return
    for item in items:
        if "root" in item.keywords:
            if os.environ.get("DPUPROF_REQUIRE_ROOT_TESTS") == "1":
                item.add_marker(pytest.mark.xfail(reason=f"root test cannot run: {reason}", strict=True, run=False))
            else:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """On an xdist worker, each test holds the machine lock; a file that runs alone keeps it from
    its first test to its last."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process (-n 0): nothing runs beside it
        yield
        return
    if not _LOCK:
        _LOCK.append(MachineLock(os.environ[LOCK_DIR]))
    lock, alone = _LOCK[0], item.path in RUNS_ALONE
    if not lock.held:
        lock.acquire(alone)
    try:
        yield
    finally:
        if nextitem is None or not (alone and nextitem.path == item.path):
            lock.release()


def dpuprof(*args, check=False, timeout=300, **kw) -> subprocess.CompletedProcess:
    """Run the dpuprof CLI in a subprocess (as a user would)."""
    proc = subprocess.run([PYTHON, "-m", "dpuprof", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"dpuprof {args} exited {proc.returncode}: {proc.stderr}")
    return proc


def open_fds() -> set[int]:
    """This process's open fds (less the one listdir itself had open, gone by now)."""
    listed = {int(fd) for fd in os.listdir("/proc/self/fd")}
    return {fd for fd in listed if _is_open(fd)}


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def assert_load_fails_in_one_line(path, sql: str, needle: str) -> None:
    """Run ``sql`` on recording ``path`` (damaging it); loading it must then raise one UserError
    line that matches ``needle``."""
    import sqlite3

    from dpuprof.errors import UserError
    from dpuprof.recording import load

    with sqlite3.connect(path) as db:
        db.execute(sql)
    with pytest.raises(UserError, match=needle) as err:
        load(path)
    assert "\n" not in str(err.value)


def last_json_line(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output: {text!r}")


def summary_of(path) -> dict:
    from dpuprof.recording import load
    from dpuprof.recording.summary import summarize

    return summarize(load(path))


def unmapped_address(maps) -> int:
    """An address in a hole of ``maps`` (a ProcessMaps): a page past the end of one of its areas,
    held by none of them and below the end of user space."""
    from dpuprof.record.stacks.procmaps import USER_SPACE_END

    areas = sorted(maps.data + [e[:2] for e in maps.entries])
    return next(end + 4096 for _s, end in areas
                if end + 4096 < USER_SPACE_END and not any(a <= end + 4096 < b for a, b in areas))


def poll_until(condition, timeout: float = 30.0, every: float = 0.05) -> bool:
    """Whether ``condition()`` came true within ``timeout`` seconds, asked every ``every`` s: what a
    test waits for, instead of a fixed sleep tuned to one machine's speed."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s children (its main thread's: /proc/PID/task/PID/children), [] once gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def wait_for_intervals(path, n: int, proc=None, timeout: float = 90.0) -> int:
    """Wait until the recording at ``path`` has committed ``n`` intervals (the recorder's start-up,
    bcc's compile, takes seconds and more under load: tests that stop a recorder at a moment wait
    for this, not for a fixed time). Returns the count seen; stops early if ``proc`` exited."""
    import sqlite3
    import time

    deadline, seen = time.time() + timeout, 0
    while time.time() < deadline and (proc is None or proc.poll() is None):
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2) as db:
                seen = db.execute("SELECT count(*) FROM intervals").fetchone()[0]
        except sqlite3.Error:
            seen = seen
        if seen >= n:
            return seen
        time.sleep(0.2)
    return seen
