"""Root: a real recording survives the runs after it that fail to start (issue 35, item 2)."""

from __future__ import annotations

import pytest

from conftest import dpuprof, summary_of

pytestmark = pytest.mark.root


def test_good_recording_survives_failed_launches_and_a_mistyped_option(tmp_path):
    out = tmp_path / "dpuprof.rec"
    good = dpuprof("record", "-q", "-o", out, "--", "true", timeout=180)
    assert good.returncode == 0, good.stderr
    assert summary_of(out)["complete"]
    data = out.read_bytes()

    for _ in range(2):  # a second typo used to lose the good recording (rotated to .old, then over it)
        typo = dpuprof("record", "-q", "-o", out, "--", "pyhton3", "train.py", timeout=180)
        assert typo.returncode == 127
        assert typo.stderr == "dpuprof: error: command not found: pyhton3\n"
    option = dpuprof("record", "-q", "--freqq", "9", "-o", out, "--", "true", timeout=180)
    assert option.returncode == 2
    assert "no such option '--freqq'" in option.stderr and "Did you mean '--freq'" in option.stderr
    unwritable = dpuprof("record", "-q", "-o", tmp_path / "no-such-dir" / "x.rec", "--", "true", timeout=180)
    assert unwritable.returncode == 2 and "cannot create" in unwritable.stderr

    assert out.read_bytes() == data  # byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dpuprof.rec"]  # no .old, no staged file


def test_a_started_recording_rotates_the_old_one(tmp_path):
    out = tmp_path / "dpuprof.rec"
    first = dpuprof("record", "-q", "-o", out, "--", "true", timeout=180)
    assert first.returncode == 0, first.stderr
    data = out.read_bytes()
    second = dpuprof("record", "-q", "-o", out, "--", "sh", "-c", "exit 3", timeout=180)
    assert second.returncode == 3, second.stderr
    assert (tmp_path / "dpuprof.rec.old").read_bytes() == data
    assert summary_of(out)["exit_code"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dpuprof.rec", "dpuprof.rec.old"]
