"""Output name templates for ``dpuprof record -o`` (a pure function: no root, no files written)."""

from __future__ import annotations

import pytest

from dpuprof.errors import UserError
from dpuprof.record.workload.outname import expand

ENV = {"SLURM_PROCID": "3", "RANK": "0", "EMPTY": ""}


def _expand(template, taken=(), **kw):
    kw.setdefault("hostname", "node7")
    kw.setdefault("pid", 4242)
    kw.setdefault("env", ENV)
    return expand(template, exists=lambda name: name in taken, **kw)


def test_default_name_is_unchanged():
    assert _expand("dpuprof.rec") == "dpuprof.rec"


def test_keys():
    assert _expand("run-%h-%q{SLURM_PROCID}.rec") == "run-node7-3.rec"
    assert _expand("r_%h_%p.rec") == "r_node7_4242.rec"
    assert _expand("100%%-%q{RANK}.rec") == "100%-0.rec"
    assert _expand("%%h") == "%h"
    assert _expand("dir/%q{RANK}/x.rec") == "dir/0/x.rec"


def test_counter_takes_the_first_free_name():
    assert _expand("run-%n.rec") == "run-1.rec"
    assert _expand("run-%n.rec", taken={"run-1.rec", "run-2.rec"}) == "run-3.rec"
    # Only a taken whole name counts: run-1 on another host does not move this host's counter.
    assert _expand("%h-%n.rec", taken={"other-1.rec"}) == "node7-1.rec"


def test_counter_checks_the_real_filesystem(tmp_path):
    (tmp_path / "r1.rec").write_bytes(b"")
    assert expand(str(tmp_path / "r%n.rec"), hostname="h", pid=1, env={}) == str(tmp_path / "r2.rec")


def test_defaults_are_this_host_and_process(monkeypatch):
    import os
    import socket

    monkeypatch.setenv("DPUPROF_TEST_VAR", "x")
    assert expand("%h.%p.%q{DPUPROF_TEST_VAR}") == f"{socket.gethostname()}.{os.getpid()}.x"


@pytest.mark.parametrize("template, words", [
    ("run-%q{UNSET_VAR}.rec", ("UNSET_VAR", "not set")),
    ("run-%q{EMPTY}.rec", ("EMPTY", "not set")),
    ("run-%x.rec", ("unknown key %x", "%h")),
    ("run.rec%", ("trailing %",)),
    ("run-%q.rec", ("braces",)),
    ("run-%q{SLURM_PROCID.rec", ("braces",)),
    ("run-%q{}.rec", ("not an environment variable name",)),
    ("run-%q{1X}.rec", ("not an environment variable name",)),
])
def test_bad_templates_are_one_line_errors(template, words):
    with pytest.raises(UserError) as err:
        _expand(template)
    text = str(err.value)
    assert "\n" not in text and template in text
    for w in words:
        assert w in text
