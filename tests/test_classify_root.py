"""Root test: thread rules and --rules on a real recording of the gloo DDP example.

gloo is linked into libtorch_cpu.so, whose frames are labelled by module only, so only the
sampled thread's name (pt_gloo_runloop, gloo_tcp_loop) can tell its transport work from the
main thread's compute: this checks that drain.py hands the thread name to the classifier and
that the same frames are filed both ways.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import dpuprof
from dpuprof.record.stacks.classify import Classifier
from dpuprof.recording import load

pytestmark = [pytest.mark.root, pytest.mark.slow]
EXAMPLE = Path(__file__).parent.parent / "examples" / "train_ddp.py"


def test_gloo_threads_are_network_collective_and_rules_digest(tmp_path):
    rules = tmp_path / "extra.toml"
    rules.write_text('[[rule]]\nsubcategory = "compute.other"\ncause = "mine"\nuser = ["dpuprof_test_fn"]\n')
    out = tmp_path / "ddp.rec"
    proc = dpuprof("record", "-q", "-F", 499, "--rules", rules, "-o", out, "--", "python3", EXAMPLE,
                   "--variant", "compute", "--duration", 6, timeout=240)
    assert proc.returncode == 0, proc.stderr
    rec = load(out)
    assert rec.meta["rules_sha256"] == Classifier(extra=rules).digest != Classifier().digest
    st = rec.table("stacks")
    with sqlite3.connect(out) as db:
        samples = dict(db.execute("SELECT stack_id, sum(samples) FROM stack_samples GROUP BY 1").fetchall())
    st = st.assign(samples=st["stack_id"].map(samples).fillna(0))
    coll = st[(st["subcategory"] == "network.collective") & (st["samples"] > 0)]
    assert len(coll) > 0, "no sample of a gloo thread was filed as network.collective"
    # Thread-decided: the same frames, sampled in the main thread, are compute.torch.
    torch_folded = set(st.loc[st["subcategory"] == "compute.torch", "folded"])
    assert any("libtorch_cpu.so" in f and f in torch_folded for f in coll["folded"])
    # Kernel stacks carry a cause column; page faults under torch/python frames name them.
    kernel = st[st["folded"].str.contains(r"_\[k\]", regex=True)]
    assert set(kernel["cause"]) - {""}, "no kernel stack got a user-space cause"
    assert (st.loc[~st["folded"].str.contains(r"_\[k\]", regex=True), "cause"] == "").all()
