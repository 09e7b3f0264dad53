"""A run that fails to start never costs the last good recording (issue 35, item 2): the command,
the options and the output are checked before anything loads, and the new file takes the
output's name only once the recording has really started (recording/output.py, recorder.py)."""

from __future__ import annotations

import os
import signal
import stat
import threading
from pathlib import Path

import pytest

from conftest import PYTHON, dpuprof
from dpuprof.errors import UserError
from dpuprof.record.recorder import Options, Recorder
from dpuprof.record.sources import PsutilSource
from dpuprof.record.workload import child as childmod
from dpuprof.record.workload.child import CommandNotFound, Identity, resolve_command
from dpuprof.recording import load
from dpuprof.recording.output import check_output
from dpuprof.recording.writer import RecordingWriter


def _good(path: Path) -> bytes:
    """A complete recording at ``path`` (through the writer, as dpuprof record writes one); its bytes."""
    w = RecordingWriter(path, {"interval_s": 1.0, "command": ["good"]})
    w.write_interval(0, 100.0, 101.0, {})
    w.close(end_time=101.0, exit_code=0)
    return path.read_bytes()


def _script(path: Path, mode: int) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


# ---------------------------------------------------------------- resolve_command

def test_resolve_finds_on_path_like_exec(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    _script(first / "tool", 0o644)  # not executable: execvp goes on to the next directory
    found = _script(second / "tool", 0o755)
    monkeypatch.setenv("PATH", f"{first}:{second}")
    assert resolve_command("tool", None) == str(found)


def test_resolve_typo_is_command_not_found_127(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CommandNotFound, match="command not found: pyhton3") as err:
        resolve_command("pyhton3", None)
    assert err.value.exit_code == 127
    with pytest.raises(CommandNotFound):
        resolve_command(str(tmp_path / "missing" / "cmd"), None)


def test_resolve_refuses_what_exec_would(tmp_path):
    with pytest.raises(UserError, match="permission denied"):
        resolve_command(str(tmp_path), None)  # a directory
    if os.geteuid() != 0:
        with pytest.raises(UserError, match="permission denied"):
            resolve_command(str(_script(tmp_path / "x.sh", 0o644)), None)


def test_resolve_checks_as_the_user_the_command_runs_as(tmp_path):
    """Under sudo the command runs as the invoking user: a file only its owner may execute is
    refused for another user, and allowed for the owner."""
    mine = _script(tmp_path / "mine.sh", 0o700)
    owner = os.stat(mine).st_uid
    other = Identity(uid=owner + 12345, gid=owner + 12345, name="dpuprof-nobody-test", home="/")
    with pytest.raises(UserError, match="permission denied: .*mine.sh \\(as user dpuprof-nobody-test\\)"):
        resolve_command(str(mine), other)
    me = Identity(uid=owner, gid=os.stat(mine).st_gid, name="dpuprof-owner-test", home="/")
    assert resolve_command(str(mine), me) == str(mine)


# ---------------------------------------------------------------- check_output

def test_check_output_touches_nothing(tmp_path):
    out = tmp_path / "run.rec"
    data = _good(out)
    before = os.stat(out)
    check_output(out)
    assert out.read_bytes() == data and os.stat(out).st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rec"]  # the probe file is gone


def test_check_output_refuses_in_one_line(tmp_path):
    with pytest.raises(UserError, match="cannot create .*No such file or directory"):
        check_output(tmp_path / "no-such-dir" / "x.rec")
    (tmp_path / "link.rec").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match="symbolic link"):
        check_output(tmp_path / "link.rec")
    (tmp_path / "dir.rec").mkdir()
    with pytest.raises(UserError, match="not a regular file"):
        check_output(tmp_path / "dir.rec")
    if os.geteuid() != 0:  # root may write in a read-only directory
        ro = tmp_path / "ro"
        ro.mkdir(mode=stat.S_IRUSR | stat.S_IXUSR)
        with pytest.raises(UserError, match="Permission denied"):
            check_output(ro / "x.rec")


# ---------------------------------------------------------------- the staged writer

def test_staged_writer_renames_only_at_publish(tmp_path):
    out = tmp_path / "run.rec"
    good = _good(out)
    w = RecordingWriter(out, {"interval_s": 1.0}, staged=True)
    assert out.read_bytes() == good and not (tmp_path / "run.rec.old").exists()
    w.publish(start_time=200.0)
    assert (tmp_path / "run.rec.old").read_bytes() == good
    w.write_interval(0, 200.0, 201.0, {})  # written through the file's final name now
    w.close(end_time=201.0, exit_code=0)
    rec = load(out)
    assert rec.complete and rec.meta["start_time"] == 200.0 and len(rec.table("intervals")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rec", "run.rec.old"]


def test_staged_writer_discard_leaves_everything_as_it_was(tmp_path):
    out = tmp_path / "run.rec"
    good = _good(out)
    w = RecordingWriter(out, {"interval_s": 1.0}, staged=True)
    assert w.discard(error="never started") is False
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rec"]


def test_killed_after_publish_leaves_a_loadable_file(tmp_path):
    """What a ``kill -9`` after the start leaves: the file at its name up to its last commit (the
    connection is reopened under the final name, so SQLite's journal follows it)."""
    out = tmp_path / "run.rec"
    w = RecordingWriter(out, {"interval_s": 1.0}, staged=True)
    w.publish(start_time=300.0)
    w.write_interval(0, 300.0, 301.0, {})
    w._db.execute("BEGIN IMMEDIATE")  # an interval half-written when the recorder died
    w._db.execute("INSERT INTO intervals (interval, t_start, t_end) VALUES (1, 301.0, 302.0)")
    journal = Path(f"{out}-journal")
    assert journal.exists()  # the rollback journal sits beside the final name
    rec = load(out)  # read by another connection while the writer's transaction is open
    assert len(rec.table("intervals")) == 1 and not rec.complete
    w._db.close()


# ---------------------------------------------------------------- the recorder

class _NoLoad(PsutilSource):
    """psutil mode, but a probe load fails the test; ``stop_in_prime`` sends a stop signal where a
    Ctrl-C would land just after the writer was made."""

    stop_in_prime = False

    def check(self) -> None:
        raise AssertionError("source.check ran before the command was checked")

    def load(self, work) -> None:
        raise AssertionError("probes loaded before the command was checked")

    def prime(self) -> None:
        if self.stop_in_prime:
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


@pytest.fixture
def signals_restored():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    while childmod.pending_stop() is not None:
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, before)


def test_recorder_checks_command_before_any_probe(tmp_path, monkeypatch, signals_restored):
    monkeypatch.setattr("dpuprof.record.recorder.make_source", _NoLoad)
    out = tmp_path / "dpuprof.rec"
    good = _good(out)
    with pytest.raises(CommandNotFound):
        Recorder(Options(command=["pyhton3-no-such-command", "train.py"], output=out)).run()
    with pytest.raises(UserError, match="cannot create"):
        Recorder(Options(command=["true"], output=tmp_path / "missing" / "x.rec")).run()
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dpuprof.rec"]


def test_stop_before_start_keeps_the_existing_file(tmp_path, monkeypatch, signals_restored):
    class StopInPrime(_NoLoad):
        stop_in_prime = True

        def check(self) -> None:
            pass

        def load(self, work) -> None:
            pass

    monkeypatch.setattr("dpuprof.record.recorder.make_source", StopInPrime)
    out = tmp_path / "dpuprof.rec"
    good = _good(out)
    res = Recorder(Options(command=["true"], output=out)).run()
    assert res.stopped_by == signal.SIGTERM and not res.file_written
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dpuprof.rec"]  # no staged file left


# ---------------------------------------------------------------- the command line

def test_mistyped_option_is_a_usage_error_not_the_command(tmp_path):
    out = tmp_path / "dpuprof.rec"
    good = _good(out)
    proc = dpuprof("record", "--freqq", "9", "-o", out, "--", "true")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "no such option '--freqq'" in lines[0] and "Did you mean '--freq'" in lines[0]
    assert out.read_bytes() == good


def test_options_after_the_command_are_the_commands(tmp_path):
    """`record python script.py --epochs 1 -o x`: every argument after COMMAND is COMMAND's own."""
    out, seen = tmp_path / "p.rec", tmp_path / "argv.txt"
    code = f"import sys; open({str(seen)!r}, 'w').write(' '.join(sys.argv[1:]))"
    proc = dpuprof("record", "-q", "--probes", "psutil", "-o", out, PYTHON, "-c", code, "--epochs", "1", "-o", "x")
    assert proc.returncode == 0, proc.stderr
    assert seen.read_text() == "--epochs 1 -o x" and load(out).complete
    proc = dpuprof("record", "-q", "--probes", "psutil", "-o", out, "--", PYTHON, "-c", code, "--flag", "-q")
    assert proc.returncode == 0, proc.stderr
    assert seen.read_text() == "--flag -q"
