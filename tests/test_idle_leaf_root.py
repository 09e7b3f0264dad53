"""Root test: the sampler stops walking the stacks of an idle CPU once it knows where idle sits.

probes/cpu_sample.bpf.c skips both stack walks for a sample of the idle task (pid 0) at an
instruction pointer listed in its idle_ips map; SampleDrainer._learn_idle lists the leaf of each
walked idle stack whose leaf frame alone classifies as idle. After the first interval an idle
machine's samples are then one-frame stacks at those leaves, still idle, and no walk is counted
as lost for them.
"""

from __future__ import annotations

import pytest

from conftest import dpuprof
from dpuprof.record.stacks.classify import Classifier
from dpuprof.recording import folded
from dpuprof.recording.reader import load

pytestmark = [pytest.mark.root]


def test_idle_samples_after_the_first_interval_are_one_frame_idle_leaves(tmp_path):
    out = tmp_path / "idle.rec"
    proc = dpuprof("record", "-q", "-o", out, "--", "sleep", "4", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = load(out)
    stacks = rec.table("stacks").set_index("stack_id")
    samples = rec.table("stack_samples")
    idle = samples[samples["pid"] == 0].join(stacks, on="stack_id")
    share = idle.loc[idle["subcategory"] == "idle", "samples"].sum() / idle["samples"].sum()
    assert share > 0.9, idle  # the idle task's samples: its interrupts and softirqs aside
    later = idle[(idle["interval"] >= 1) & (idle["subcategory"] == "idle")]
    frames = later["folded"].map(lambda f: len(folded.split(f)))
    one = later.loc[frames == 1, "samples"].sum()
    assert one >= 0.9 * later["samples"].sum(), later[["interval", "folded", "samples"]]
    # Each leaf is one the classifier calls idle on its own (what _learn_idle checked).
    classifier = Classifier()
    for leaf in set(later.loc[frames == 1, "folded"]):
        assert classifier.classify([leaf.removesuffix("_[k]")], []) == "idle", leaf
    lost = rec.table("lost")
    assert lost[lost["kind"].str.startswith("kernel_stack")]["count"].sum() == 0, lost
