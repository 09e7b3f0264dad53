"""benchmarks/hot_loads.py's pure helpers (issue 20): --tree parsing, the rotated order, per-program
BPF rates, the cost formula, the summary's medians and verdicts and its Markdown; and
suite/runner.py's /proc/PID/stat reader. Synthetic numbers, no measuring, no timing bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

import hot_loads as hl
from suite.runner import stat_cpu


def test_parse_trees_labels_and_default(tmp_path):
    assert hl.parse_trees(None, default=tmp_path) == {"dpuprof": tmp_path}
    (tmp_path / "old").mkdir()
    got = hl.parse_trees([f"base={tmp_path / 'old'}", str(tmp_path)])
    assert got == {"base": (tmp_path / "old").resolve(), tmp_path.name: tmp_path.resolve()}
    with pytest.raises(ValueError):
        hl.parse_trees([f"a={tmp_path}", f"a={tmp_path / 'old'}"])


def test_rotated():
    conds = ["bare", "dpuprof:a", "dpuprof:b", "perf"]
    assert hl.rotated(conds, 0) == conds
    assert hl.rotated(conds, 1) == ["dpuprof:a", "dpuprof:b", "perf", "bare"]
    assert hl.rotated(conds, 4) == conds
    assert hl.rotated([], 3) == []


def test_program_rows_deltas_sum_by_name_and_new_programs():
    first = {1: {"type": 17, "run_time_ns": 1000, "run_cnt": 10}, 2: {"type": 5, "run_time_ns": 0, "run_cnt": 0}}
    last = {1: {"type": 17, "run_time_ns": 5000, "run_cnt": 20},
            2: {"type": 5, "run_time_ns": 2000, "run_cnt": 10},
            3: {"type": 5, "run_time_ns": 1000, "run_cnt": 10},   # same name as 2, loaded later
            4: {"type": 7, "run_time_ns": 0, "run_cnt": 0}}
    rows = hl.program_rows(first, last, {1: "sw_switch", 2: "fork", 3: "fork"}, span_s=2.0)
    assert rows["sw_switch"] == {"type": "raw_tracepoint", "run_time_ns": 4000, "run_cnt": 10,
                                 "ns_per_event": 400.0, "events_per_s": 5.0, "core_pct": 100 * 4000 / 1e9 / 2}
    assert rows["fork"]["run_cnt"] == 20 and rows["fork"]["ns_per_event"] == 150.0
    assert rows["prog4"]["ns_per_event"] is None and rows["prog4"]["type"] == "perf_event"
    assert hl.program_rows({}, last, {}, 0.0)["prog1"]["events_per_s"] is None


def test_cost_pct():
    assert hl.cost_pct(1.0, 1.0, 11.0) == pytest.approx(20.0)   # (1 + 1) / (11 - 1)
    assert hl.cost_pct(0.0, 0.5, 10.0) == pytest.approx(5.0)    # perf: own CPU over the workload's
    assert hl.cost_pct(None, None, 10.0) is None
    assert hl.cost_pct(2.0, 1.0, 2.0) is None


def _run(load, cond, rnd, **kw):
    return {"load": load, "condition": cond, "round": rnd, **kw}


def test_summarize_medians_vs_bare_and_verdicts():
    prog = lambda ns: {"p": {"type": "tracepoint", "events_per_s": 100.0, "ns_per_event": ns, "core_pct": 1.0}}  # noqa: E731
    runs = [
        _run("iperf3", "bare", 0, throughput=10.0), _run("iperf3", "bare", 1, throughput=8.0),
        _run("iperf3", "dpuprof:new", 0, throughput=9.0, cost_pct=1.0, programs=prog(100)),
        _run("iperf3", "dpuprof:new", 1, throughput=8.0, cost_pct=3.0, programs=prog(300)),
        _run("iperf3", "dpuprof:new", 2, error="boom"),
        _run("wake-2x8", "dpuprof:new", 0, mb_per_min=1.0),
        _run("wake-4x128", "dpuprof:new", 0, mb_per_min=5.0, cost_pct=1.5),
    ]
    s = hl.summarize(runs)
    cell = s["loads"]["iperf3"]["dpuprof:new"]
    assert cell["rounds"] == 2 and cell["cost_pct"] == 2.0
    assert cell["vs_bare"] == pytest.approx((0.9 + 1.0) / 2)
    assert cell["programs"]["p"]["ns_per_event"] == 200
    assert [x["met"] for x in s["verdicts"]] == [True, True, False]  # iperf3 2.0, wake 1.5, size 5x
    assert s["verdicts"][2]["value"] == 5.0
    md = hl.render(s, {"rounds": 2, "duration_s": 3, "units": {"iperf3": "GB/s"}})
    assert "| iperf3 | dpuprof:new | 8.5 GB/s | 0.950 |" in md
    assert "| p | tracepoint | 100 | 200 | 1.00 |" in md
    assert "**no**" in md


def test_make_loads_names():
    loads = hl.make_loads(["iperf3", "wake-3x16"], 2)
    assert [x.name for x in loads] == ["iperf3", "wake-3x16"]
    assert "--threads 16" in loads[1].what
    with pytest.raises(SystemExit):
        hl.make_loads(["fio"], 2)


def test_stat_cpu_own_and_reaped():
    text = "1234 (a) b) Z 1 2 3 4 5 6 7 8 9 10 150 50 300 100 20 0 1 0 5 6 7"
    own, reaped = stat_cpu(text, 100)
    assert own == pytest.approx(2.0) and reaped == pytest.approx(4.0)
    assert stat_cpu(Path("/proc/self/stat").read_text(), 100)[0] >= 0
