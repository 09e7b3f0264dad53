"""The benchmark suite's report side (benchmarks/suite: verdicts, diagnosis, Markdown), without
measuring: re-rendering the committed benchmarks/results.json must give the committed
benchmarks/RESULTS.md byte for byte (the golden test of the split of run.py and results_md.py), and
the statistics behave on hand-derivable numbers. Nothing in the rendering reads the clock: the date
in RESULTS.md is the run's, from results.json."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import PYTHON, REPO
from suite import stats
from suite.report import render
from suite.verdicts import evaluate

BENCH = REPO / "benchmarks"


def test_results_md_regenerates_the_committed_results(tmp_path):
    shutil.copy(BENCH / "results.json", tmp_path / "results.json")
    proc = subprocess.run([PYTHON, str(BENCH / "results_md.py"), str(tmp_path / "results.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "RESULTS.md").read_text() == (BENCH / "RESULTS.md").read_text()


def test_missed_targets_are_explained_and_quick_judges_no_timing():
    res = json.loads((BENCH / "results.json").read_text())
    res["long"]["size_ratio"] = 1.0  # force a miss: its why comes from the run's own row counts
    targets = {t["id"]: t for t in evaluate(res)}
    assert targets["size_ratio"]["met"] is False and "distinct stacks" in targets["size_ratio"]["why"]
    res["mode"] = "quick"
    res["targets"] = evaluate(res)
    assert all(t["met"] is None for t in res["targets"]
               if t["id"] in ("cost_ddp", "cost_iperf3", "startup_s", "rss_mb", "report_time"))
    assert "**Quick (smoke) run**" in render(res)


def test_statistics_on_hand_derived_numbers():
    assert stats.median([3.0, None, 1.0, 2.0]) == 2.0 and stats.median([None]) is None
    r = stats.ratio_summary([9.0, 8.0, 10.0], [10.0, 10.0, 10.0])
    assert r == {"ratio_median": 0.9, "ratio_min": 0.8, "ratio_max": 1.0,
                 "slowdown_pct": pytest.approx(10.0)}
    assert stats.cost_pct([1.1, 1.2, None], [1.0, 1.0, 1.0]) == pytest.approx(15.0)
    shares = stats.shares({"network": 3.0, "storage": 1.0, "crypto": 0.0, "compression": 0.0,
                           "compute": 0.0, "kernel_other": 0.0})
    assert shares["network"] == 0.75 and sum(shares.values()) == 1.0
    other = dict(shares, network=0.5, storage=0.3, compute=0.2)  # differences +25, -5, -20 pp
    assert stats.worst_difference(shares, other) == (pytest.approx(25.0), "network")
    # RSS rising 1 MB/s in the second half of a 20 s run: 60 MB/min, extrapolated to 10 minutes.
    samples = [(t, 50.0 + max(0, t - 10), 80.0, 0.1 * t, True, 5.0) for t in range(21)]
    trend = stats.rss_trend(samples)
    assert trend["rss_slope_mb_per_min"] == pytest.approx(60.0)
    assert trend["rss_10min_estimate_mb"] == pytest.approx(60.0 + 60.0 * (10 - 20 / 60))
    assert trend["recorder_cpu_pct_second_half"] == pytest.approx(10.0)


def test_the_agent_soak_is_section_7_when_results_hold_one():
    res = json.loads((BENCH / "results.json").read_text())
    res["targets"] = evaluate(res)
    res.pop("agent_soak", None)
    assert "## 7. Agent soak" not in render(res)
    res["agent_soak"] = {"date_utc": "2026-12-04 17:30 UTC", "command": "sudo python3 benchmarks/agent_soak.py",
                         "markdown": "## dpuprof agent soak: 3600 s, 600-s windows\n\n| window |\n\nVerdict: flat"}
    text = render(res)
    assert "## 7. Agent soak" in text and "### dpuprof agent soak: 3600 s" in text
    assert text.index("## 7. Agent soak") < text.index("## Commands")
