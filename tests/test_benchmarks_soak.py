"""benchmarks/agent_soak.py's pure part (soak_windows.py): windows, ratios, the verdict, Markdown."""

from __future__ import annotations

from types import SimpleNamespace

from soak_windows import cpu_at, judge, markdown, rss_in, window_rows


def _file(start: float, end: float, workload: float = 100.0, bpf: float = 0.5, lost=None) -> dict:
    return {"file": f"n-{start:g}.rec", "start": start, "end": end, "intervals": int(end - start), "complete": True,
            "workload_cpu_s": workload, "bpf_s": bpf, "recorder_cpu_s": 1.0,
            "lost_by_kind": lost if lost is not None else {}, "bytes": 2_000_000}


# (t, cpu_s, rss_kb): the agent uses 1 CPU-s per 100 s, RSS 80 MB then 84 MB
SAMPLES = [(0.0, 0.0, 80 * 1024), (100.0, 1.0, 80 * 1024), (200.0, 2.0, 84 * 1024), (300.0, 3.0, 84 * 1024)]


def test_cpu_is_interpolated_between_samples_and_rss_taken_at_the_window_end():
    assert cpu_at(SAMPLES, 150.0) == 1.5 and cpu_at(SAMPLES, -5.0) == 0.0 and cpu_at(SAMPLES, 400.0) == 3.0
    assert cpu_at([], 1.0) is None
    assert rss_in(SAMPLES, 0.0, 150.0) == (80.0, 80.0)
    assert rss_in(SAMPLES, 150.0, 300.0) == (84.0, 84.0)


def test_windows_give_cost_and_ratios_to_the_first():
    rows = window_rows([_file(0, 100), _file(100, 200, workload=50.0), _file(200, 230)], SAMPLES, window_s=100)
    assert [r["judged"] for r in rows] == [True, True, False]  # the last lasted under half a window
    assert rows[0]["agent_cpu_s"] == 1.0 and rows[0]["cost_pct"] == 1.5  # (1.0 + 0.5) / 100
    assert rows[1]["cost_pct"] == 3.0 and rows[1]["cost_pct_ratio"] == 2.0
    assert rows[1]["rss_end_mb"] == 84.0 and rows[1]["rss_end_mb_ratio"] == 1.05
    assert rows[0]["lost_judged_ratio"] is None  # 0 in the first window: no ratio


def test_the_verdict_names_each_window_above_the_first():
    flat = window_rows([_file(0, 100), _file(100, 200)], SAMPLES, window_s=100)
    assert judge(flat)["ok"]
    costly = window_rows([_file(0, 100), _file(100, 200, workload=50.0)], SAMPLES, window_s=100)
    got = judge(costly)
    assert not got["ok"] and len(got["failures"]) == 1 and "window 1: cost_pct" in got["failures"][0]


def test_loss_is_judged_beyond_a_floor_and_without_the_loads_own_kinds():
    load_kinds = {"user_stack_unwalkable": 900, "thread_exit_unaccounted": 300}
    rows = window_rows([_file(0, 100, lost={"user_stack_unwalkable": 100}),
                        _file(100, 200, lost=dict(load_kinds, run_map_full=15))], SAMPLES, window_s=100)
    assert rows[1]["lost"] == 1215 and rows[1]["lost_judged"] == 15
    assert judge(rows, loss_floor=20)["ok"]  # 0 then 15: under the floor
    assert not judge(rows, loss_floor=10)["ok"]
    grown = window_rows([_file(0, 100, lost={"sock_map_full": 100}), _file(100, 200, lost={"sock_map_full": 111})],
                        SAMPLES, window_s=100)
    assert grown[1]["lost_judged_ratio"] == 1.11 and not judge(grown)["ok"]


def test_markdown_has_a_row_per_window_and_the_verdict():
    rows = window_rows([_file(0, 100), _file(100, 200)], SAMPLES, window_s=100)
    args = SimpleNamespace(duration=200.0, window=100.0, period=2.0, loss_floor=20)
    text = markdown(rows, judge(rows), args, (0.5, 0.4, 0.3), (1.1, 0.9, 0.5))
    assert text.count("\n| 0 |") == 1 and text.count("\n| 1 |") == 1
    assert "Verdict: flat" in text and "probe_cost" in text
