"""The observer bucket (issue 20): samples in dpuprof's own BPF programs are the recorder's cost.

Classification files them as ``observer.bpf``; the summary, the report view and the projection
keep them out of busy, workload and infrastructure CPU; schema v5 stores the programs' run time
(``probe_cost``) and the recorder's own CPU (``recorder_cpu``); the report shows all three beside
the losses. Synthetic stacks and recordings only: tests/test_observer_root.py records a real one.
"""

from __future__ import annotations

import types

import pandas as pd
import pytest

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE, OBSERVER
from dpuprof.errors import UserError
from dpuprof.project.features import demand
from dpuprof.project.inputs import ProjectionInput
from dpuprof.record.drain.accounting import cpu_category_rows
from dpuprof.record.drain.cost import MEASURED, ProbeCost, RecorderCpu, enable_stats
from dpuprof.record.stacks import rulefile
from dpuprof.record.stacks.classify import Classifier
from dpuprof.recording import load
from dpuprof.recording.summary import summarize
from dpuprof.render import observer
from dpuprof.render.view import build_view
from factory import make_recording

RX = ["ret_from_fork", "smpboot_thread_fn", "run_ksoftirqd", "handle_softirqs", "net_rx_action",
      "__napi_poll", "process_backlog", "__netif_receive_skb_one_core", "__netif_receive_skb_core"]


@pytest.fixture(scope="module")
def clf():
    return Classifier()


# ----------------------------------------------------------------------------- classification

def test_bpf_trace_run_under_netif_receive_skb_is_observer_not_network(clf):
    probe = RX + ["bpf_trace_run1", "bpf_prog_6deef7357e7b4530_raw_tracepoint__netif_receive_skb"]
    assert clf.classify(probe, []) == "observer.bpf"
    assert clf.classify(RX, []) == "network.softirq"  # the same stack without the probe


@pytest.mark.parametrize("frames", [
    ["bpf_trace_run2", "bpf_get_stackid", "__bpf_get_stackid", "get_perf_callchain"],  # a helper is the leaf
    ["__bpf_trace_softirq", "bpf_prog_abc_sw_irq_enter", "htab_map_update_elem"],
    ["perf_trace_sched_switch", "perf_trace_run_bpf_submit", "trace_call_bpf", "bpf_prog_1_x"],
    ["__bpf_prog_enter_recur", "bpf_prog_2_y"],
])
def test_a_bpf_frame_anywhere_makes_it_observer(clf, frames):
    assert clf.explain(["entry_SYSCALL_64", "do_syscall_64", "tcp_sendmsg"] + frames, ["send (libc.so.6)"]) \
        == clf.explain(RX + frames, []) \
        and clf.classify(RX + frames, []) == "observer.bpf"


def test_observer_wins_over_thread_rules_and_has_no_cause(clf):
    res = clf.explain(RX + ["bpf_trace_run3", "bpf_prog_1_x"], ["[unknown] (libcrypto.so.3)"], "gloo_tcp_loop")
    assert res.subcategory == "observer.bpf" and res.category == OBSERVER and res.cause == ""


def test_ordinary_bpf_named_kernel_functions_are_not_observer(clf):
    # bpf_* kernel functions a program calls only ever run under a program frame; alone they are
    # something else (here the syscall that loads a map, kernel_other)
    assert clf.classify(["entry_SYSCALL_64", "do_syscall_64", "__sys_bpf", "map_create"], []) != "observer.bpf"


def test_observer_rules_must_name_an_observer_subcategory():
    with pytest.raises(UserError, match="observer subcategory 'network.bpf' must be observer.<name>"):
        rulefile.parse('[[observer]]\nsubcategory = "network.bpf"\nkernel = ["bpf_*"]\n', "f.toml")
    with pytest.raises(UserError, match="not a known category"):
        rulefile.parse('[[rule]]\nsubcategory = "observer.bpf"\nkernel = ["x"]\n', "f.toml")


# ----------------------------------------------------------------------------- accounting

def test_a_process_observer_share_comes_out_of_its_own_exact_time():
    # pid 7 ran 1 s exactly (schedstat); 30 of its 100 samples were in our probes
    rows = cpu_category_rows({(7, "network.tcpip"): 70, (7, "observer.bpf"): 30}, {7: 1e9}, None, 1e7)
    by = {r.subcategory: r.cpu_s for r in rows if r.pid == 7}
    assert by == pytest.approx({"network.tcpip": 0.7, "observer.bpf": 0.3})
    assert {r.category for r in rows} == {"network", OBSERVER}


# ----------------------------------------------------------------------------- exclusion

WL, OTHER = 42, 50
CPU = [(WL, "network", "network.tcpip", 60, 0.6), (WL, "compute", "compute.python", 20, 0.2),
       (WL, OBSERVER, "observer.bpf", 20, 0.2), (OTHER, "storage", "storage.fs", 10, 0.1),
       (0, OBSERVER, "observer.bpf", 5, 0.05), (0, "idle", "idle", 85, 0.85)]
PROCS = [(WL, 1, "wl", "wl", 1, 100.0, 101.0), (OTHER, 1, "other", "", 0, 100.0, 101.0)]


@pytest.fixture
def synth(tmp_path):
    return make_recording(tmp_path, intervals=2, cpu=CPU, processes=PROCS,
                          meta={"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
                                "probe_cost": MEASURED, "recorder_pid": 999},
                          tables={"probe_cost": [("on_sample", 1000, 30_000_000),
                                                 ("raw_tracepoint__x", 10, 10_000_000)],
                                  "recorder_cpu": [(0.01, 0.03)]})


def test_summary_keeps_observer_out_of_workload_and_infrastructure(synth):
    s = summarize(load(synth))
    wl, host = s["workload_cpu"], s["host_cpu"]
    assert wl["total_s"] == pytest.approx(2 * 0.8) and wl["observer_s"] == pytest.approx(2 * 0.2)
    assert set(wl["by_category"]) == set(CATEGORIES) and OBSERVER not in host["by_category"]
    assert not any(k.startswith("observer") for k in host["by_subcategory"])
    assert host["total_s"] == pytest.approx(2 * 0.9) and host["observer_s"] == pytest.approx(2 * 0.25)
    assert host["total_s"] + host["idle_s"] + host["observer_s"] == pytest.approx(2 * 2.0)
    assert s["processes"][0]["cpu_s"] == pytest.approx(1.6)


def test_report_view_infrastructure_and_busy_exclude_observer(synth):
    v = build_view(load(synth))
    assert v.infra_s == pytest.approx(2 * 0.7) and v.busy_s == pytest.approx(2 * 0.9)
    assert float(v.cats.loc[OBSERVER, "cpu_s"]) == pytest.approx(0.5)
    assert float(v.wl_cats.loc[list(INFRASTRUCTURE), "cpu_s"].sum()) == pytest.approx(1.2)
    assert "observer.bpf" not in v.subcats.index


def test_projection_inputs_drop_observer_rows():
    cpu = pd.DataFrame([(1, *row) for row in CPU], columns=["interval", "pid", "category", "subcategory",
                                                             "samples", "cpu_s"])
    threads = pd.DataFrame({"interval": [1, 1], "tid": [WL, WL], "subcategory": ["observer.bpf", "network.tcpip"],
                            "samples": [3, 7]})
    stacks = pd.DataFrame({"stack_id": [1, 2], "folded": ["a_[k];bpf_trace_run1_[k]", "a_[k]"],
                           "category": [OBSERVER, "network"], "subcategory": ["observer.bpf", "network.tcpip"],
                           "cause": ["", ""]})
    inp = ProjectionInput(cpu_count=2, duration_s=1.0, workload_pids={WL},
                          frames={"cpu_category": cpu, "thread_category": threads, "stacks": stacks})
    assert OBSERVER not in set(inp.table("cpu_category")["category"])
    assert inp.table("thread_category")["subcategory"].tolist() == ["network.tcpip"]
    assert inp.table("stacks")["stack_id"].tolist() == [2]
    d = demand(inp)
    assert OBSERVER not in set(d["category"])
    assert d["workload_s"].sum() == pytest.approx(0.8) and d["host_s"].sum() == pytest.approx(0.9)


# ----------------------------------------------------------------------------- stored and shown

def test_v5_stores_probe_cost_and_recorder_cpu(synth):
    rec = load(synth)
    pc = rec.table("probe_cost")
    assert rec.schema_version >= 5 and len(pc) == 4
    assert pc.groupby("program")["run_ns"].sum().to_dict() == {"on_sample": 60_000_000, "raw_tracepoint__x": 20_000_000}
    assert rec.table("recorder_cpu")[["user_s", "system_s"]].sum().tolist() == pytest.approx([0.02, 0.06])


def test_older_recordings_read_without_cost_or_observer(fixture_copy):
    rec = load(fixture_copy("ddp-plain"))
    assert rec.schema_version < 5 and rec.table("probe_cost").empty and rec.table("recorder_cpu").empty
    c = observer.cost(rec, 10.0)
    assert c["observer_s"] == 0.0 and c["bpf_run_s"] is None and c["recorder_process_s"] is None
    assert observer.line(c) is None


def test_report_shows_the_three_costs_as_shares_of_workload_cpu(synth):
    v = build_view(load(synth))
    c = v.summary.contract["observer_cost"]
    assert c["workload_cpu_s"] == pytest.approx(1.6)
    assert c["observer_s"] == pytest.approx(0.5) and c["observer_share"] == pytest.approx(0.5 / 1.6, abs=1e-6)
    assert c["bpf_run_s"] == pytest.approx(0.08) and c["bpf_run_share"] == pytest.approx(0.05, abs=1e-6)
    assert c["bpf_runs"] == 2020 and c["by_program"][0] == {"program": "on_sample", "runs": 2000, "run_s": 0.06}
    assert c["recorder_process_s"] == pytest.approx(0.08) and c["recorder_process_share"] == pytest.approx(0.05)
    line = next(w for w in v.warnings if w.startswith("the recorder's own cost"))
    assert "31.25 % of the workload's CPU" in line and "5.00 %" in line


def test_probe_cost_of_one_interval_in_n_is_scaled_to_the_recording(tmp_path):
    path = make_recording(tmp_path, intervals=4, cpu=CPU, processes=PROCS,
                          meta={"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
                                "probe_cost": MEASURED, "probe_cost_every": 2},
                          tables=lambda i: {"probe_cost": [("on_sample", 1000, 30_000_000)] if i % 2 == 0 else []})
    c = observer.cost(load(path), 1.0)  # intervals 0 and 2 were the windows
    assert c["bpf_run_measured_share"] == pytest.approx(0.5)
    assert c["bpf_run_s"] == pytest.approx(2 * 0.03 * 2) and c["bpf_runs"] == 4000
    assert "from the 50 % of the time the kernel's statistics were on" in observer.line(c)


def test_probe_cost_counts_only_in_its_windows(monkeypatch):
    readings = [{"a": (0, 0)}, {"a": (0, 0)}, {"a": (10, 100)}, {"a": (12, 140)}, {"a": (20, 300)}]
    enabled, closed = [], []
    monkeypatch.setattr("dpuprof.record.drain.cost.os.close", closed.append)
    cost = ProbeCost(None, stats=lambda bpf, infos=None: readings.pop(0), enable=lambda: (enabled.append(1) or 7, None),
                     sysctl=lambda: False, every=2)
    cost.drain()  # prime (construction read one: is there run_time_ns at all)
    cost.window(0)
    assert cost.drain() == [("a", 10, 100)] and closed == []
    cost.window(1)
    assert closed == [7] and cost.drain() == []  # off: moved by another's statistics, not ours
    cost.window(2)
    assert len(enabled) == 2 and cost.drain() == [("a", 8, 160)]


def test_report_says_when_probe_cost_was_not_measured(tmp_path):
    path = make_recording(tmp_path, cpu=CPU, processes=PROCS,
                          meta={"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
                                "probe_cost": "unavailable: BPF_ENABLE_STATS failed (Operation not permitted)"})
    c = observer.cost(load(path), 1.0)
    assert c["bpf_run_s"] is None and c["bpf_runs"] is None
    assert "BPF program run time not measured (BPF_ENABLE_STATS failed (Operation not permitted))" in observer.line(c)


# ----------------------------------------------------------------------------- the recorder's side

def test_probe_cost_rows_are_deltas_and_close_releases_the_fd(monkeypatch):
    readings = [{"a": (1, 1)}, {"a": (10, 100)}, {"a": (15, 180), "b": (2, 40)}, {"a": (15, 180), "b": (2, 40)}]
    closed = []
    monkeypatch.setattr("dpuprof.record.drain.cost.os.close", closed.append)
    cost = ProbeCost(None, stats=lambda bpf, infos=None: readings.pop(0), enable=lambda: (77, None), sysctl=lambda: False)
    assert cost.drain() == [("a", 10, 100)]  # since load (prime() takes and drops this one)
    assert cost.drain() == [("a", 5, 80), ("b", 2, 40)]
    assert cost.drain() == []
    cost.close()
    cost.close()
    assert closed == [77]


EINVAL = "BPF_ENABLE_STATS failed (Invalid argument)"


@pytest.mark.parametrize("sysctl,status", [(True, MEASURED), (False, f"unavailable: {EINVAL}")])
def test_probe_cost_falls_back_to_the_sysctl(sysctl, status):
    cost = ProbeCost(None, stats=lambda bpf, infos=None: {"a": (1, 2)}, enable=lambda: (None, EINVAL), sysctl=lambda: sysctl)
    assert cost.status == status
    assert (cost.drain() == []) == (status != MEASURED)


def test_probe_cost_unavailable_on_old_kernels():
    cost = ProbeCost(None, stats=lambda bpf, infos=None: None, enable=lambda: (5, None), sysctl=lambda: False)
    assert cost.status.startswith("unavailable: bpf_prog_info has no run_time_ns") and cost.drain() == []


def test_enable_stats_reports_the_errno(monkeypatch):
    monkeypatch.setattr("dpuprof.record.drain.cost.os.uname", lambda: types.SimpleNamespace(machine="x86_64"))
    monkeypatch.setattr("dpuprof.record.drain.cost.ct.get_errno", lambda: 1)
    calls = []
    fd, why = enable_stats(syscall=lambda *a: calls.append(a[:2]) or -1)
    assert fd is None and why == "BPF_ENABLE_STATS failed (Operation not permitted)" and calls == [(321, 32)]


def test_recorder_cpu_is_per_interval():
    seq = iter([(1.0, 2.0), (1.5, 2.25), (1.5, 2.25)])
    times = lambda: types.SimpleNamespace(**dict(zip(("user", "system"), next(seq))))  # noqa: E731
    own = RecorderCpu(times=times)
    assert own.sample() == [(0.5, 0.25)] and own.sample() == [(0.0, 0.0)]
