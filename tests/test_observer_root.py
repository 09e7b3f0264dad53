"""Root test (issue 20): a recorder that never counts itself as the job's tax.

Records a loopback TCP flood (tests/workloads/tcp_loopback.py) with eBPF and checks that the
recording stores what the probes cost (``probe_cost``: run time of the programs that ran, with BPF
statistics turned on for the recording; ``recorder_cpu``), and that every sampled stack running one
of the BPF programs is filed as ``observer``, never as network, storage or kernel_other.
"""

from __future__ import annotations

import pytest

from conftest import PYTHON, WORKLOADS
from dpuprof.categories import OBSERVER
from dpuprof.recording import load

pytestmark = pytest.mark.root

BPF_FRAMES = ("bpf_prog_", "bpf_trace_run")


@pytest.fixture(scope="module")
def flood(recorded):
    # The same run as tests/test_record_root.py's tcp_loopback case: recorded once per session.
    out, _ = recorded(PYTHON, WORKLOADS / "tcp_loopback.py", "3", freq=499)
    return load(out)


def test_probe_cost_has_run_time_for_the_programs_that_ran(flood):
    assert flood.schema_version >= 5 and flood.meta["probe_cost"] == "measured", flood.meta.get("probe_cost")
    per = flood.table("probe_cost").groupby("program")[["runs", "run_ns"]].sum()
    print(per.sort_values("run_ns", ascending=False).to_string())
    assert (per["runs"] > 0).all() and (per["run_ns"] > 0).all()
    assert per.loc["on_sample", "run_ns"] > 0  # the cpu-clock sampler ran all along
    if "net_dev" in flood.meta["probes_used"]:  # every packet of the flood runs its programs
        net = per[per.index.str.contains("netif_receive_skb|net_dev_xmit")]
        assert not net.empty and (net["run_ns"] > 0).all(), per.index.tolist()


def test_recorder_cpu_is_stored_per_interval(flood):
    rc = flood.table("recorder_cpu")
    assert len(rc) == len(flood.table("intervals"))
    assert float((rc["user_s"] + rc["system_s"]).sum()) > 0


def test_no_stack_running_a_bpf_program_is_filed_as_the_jobs_work(flood):
    st = flood.table("stacks")
    frames = st["folded"].str.split(";")
    ours = st[frames.map(lambda fs: any(f.startswith(BPF_FRAMES) and f.endswith("_[k]") for f in fs))]
    ss = flood.table("stack_samples")
    sampled = int(ss[ss["stack_id"].isin(ours["stack_id"])]["samples"].sum())
    print(f"{len(ours)} stacks with a BPF frame, {sampled} samples of {int(ss['samples'].sum())}")
    wrong = ours[ours["category"] != OBSERVER]
    assert wrong.empty, wrong[["folded", "subcategory"]].head().to_string()
    cat = flood.table("cpu_category")
    assert int(cat.loc[cat["category"] == OBSERVER, "samples"].sum()) >= sampled
