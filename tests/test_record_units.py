"""Record-stage pieces that need neither root nor bcc."""

from __future__ import annotations

import pytest

from dpuprof.record.drain.maps import Cumulative
from dpuprof.record.workload.targets import descendants_of
from dpuprof.record.stacks.symbols import module_label


def test_cumulative_deltas_never_negative():
    c = Cumulative()
    assert c.deltas({"a": (10, 1)}) == {"a": (10, 1)}
    assert c.deltas({"a": (15, 1)}) == {"a": (5, 0)}
    assert c.deltas({"a": (3, 0)}) == {}  # a reset reads as nothing, not as negative


def test_descendants_follow_double_forks():
    parents = {100: 1, 200: 100, 300: 200, 400: 1, 201: 100}
    assert descendants_of(parents, 100) == {100, 200, 300, 201}


@pytest.mark.parametrize("path,label", [
    ("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "libz.so.1.2.13"),
    ("/venv/lib/python3.11/site-packages/cryptography/hazmat/bindings/_rust.abi3.so",
     "cryptography/hazmat/bindings/_rust.abi3.so"),
    ("/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so", "numpy/core/_multiarray_umath.so"),
    ("", "[anon]"),
    ("[vdso]", "[vdso]"),
])
def test_module_label(path, label):
    assert module_label(path) == label


@pytest.mark.parametrize("fields,status", [
    ({"command_rc": 3, "stop_reason": "command exited"}, 3),
    ({"command_rc": None, "stop_reason": "stopped"}, 0),  # attached: no command of ours
    ({"command_rc": 0, "stop_reason": "command exited", "write_ok": False}, 2),
    ({"command_rc": 139, "stop_reason": "command exited", "write_ok": False}, 139),
    ({"stopped_by": 15}, 128 + 15),
])
def test_the_cli_words_the_run_result_and_picks_the_exit_status(fields, status, capsys):
    from pathlib import Path

    from dpuprof.cli.record import _speak
    from dpuprof.record.recorder import RunResult

    res = RunResult(Path("x.rec"), **fields)
    assert _speak(None, res, quiet=False) == status
    err = capsys.readouterr().err
    if "stopped_by" in fields:
        assert err == "dpuprof: stopped by SIGTERM before the command started; nothing recorded\n"
    elif res.write_ok:
        assert err.startswith("dpuprof: recorded 0.0 s, 0 samples -> x.rec; ")
    else:
        assert err == ""  # the write error was reported when it happened (on_error)
