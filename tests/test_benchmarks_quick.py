"""The benchmark suite's smoke run (`benchmarks/run.py --quick`): the harness runs end to end and
writes RESULTS.md with every section. No timing is asserted (CI machines are noisy); the accuracy
checks below are ratios of CPU seconds, which do not depend on load.

The whole harness (about 2.5 minutes of timed runs) is marked ``benchmark``: the default run leaves
it out and CI runs it once in its second step, ``python3 -m pytest -q -m benchmark``. Its accuracy
section alone (one recording of the five tools together, as --quick records them) guards dpuprof's
classification and CPU accounting, so it stays in the default run (test_accuracy_ratios)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import PYTHON, REPO
from suite.accuracy import bench_accuracy
from suite.config import QUICK
from suite.setup import ensure_tools, make_fio_file, make_text_file

pytestmark = pytest.mark.root

SECTIONS = ("## Machine", "## Targets", "## 1. Accuracy", "## 2. Overhead", "## 3. Output size",
            "## 4a. Start-up", "## 5. Report time", "## 6. Short-lived helpers", "## Commands")
# The dominant category's share of each single-purpose tool's CPU, as dpuprof measures it, must at
# least reach these floors even in a short run with few samples (full runs: benchmarks/RESULTS.md).
# zstd is left out: the Debian zstd CLI links libzstd statically and is stripped, which the rules do
# not yet recognise as compression (RESULTS.md reports it as a missed target). In the smoke run's
# 2-s runs of all five tools at once the kernel's part of pigz and openssl (reading the input,
# page faults, exit) weighs more than in the full run (pigz 85-90 % there): pigz read 0.752 in a
# fresh-clone CI run on 2026-12-05 and 0.801 in the next run, openssl 0.848; 0.70 still catches
# a category lost to another.
SHARE_FLOORS = {"tcp_stream": 0.60, "openssl": 0.70, "fio": 0.50, "pigz": 0.70}


@pytest.fixture(scope="module")
def accuracy_table(tmp_path_factory):
    """The quick harness's accuracy section alone, run in this process on a scratch directory of its
    own: one `dpuprof record` of tcp_stream, openssl, fio, pigz and zstd started together (each for
    QUICK.acc_together_s seconds), one row per tool."""
    missing = ensure_tools(install=True)  # as run.py does: apt-get where a tool is missing
    assert not missing, f"missing tools: {missing}"
    scratch = tmp_path_factory.mktemp("accuracy")  # a real disk here (fio reads with O_DIRECT)
    make_fio_file(scratch / "fio.dat")
    make_text_file(scratch / f"pigz-{QUICK.pigz_mb}M.txt", QUICK.pigz_mb << 20)
    return bench_accuracy(QUICK, scratch)["table"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([PYTHON, str(REPO / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text()), (out / "RESULTS.md").read_text()


@pytest.mark.benchmark
def test_writes_every_section(quick_run):
    _, results, md = quick_run
    for section in SECTIONS:
        assert section in md, section
    ids = {t["id"] for t in results["targets"]}
    assert ids == {"stack_loss", "recursion_misses", "accuracy_ratio", "accuracy_pp", "cost_ddp", "cost_iperf3",
                   "size_ratio", "rss_mb", "startup_s", "report_time", "short_helpers"}
    # Every target row is in the table, and the command to reproduce is written down.
    for t in results["targets"]:
        assert t["name"] in md
    assert "python3 benchmarks/run.py --quick" in md
    # No timing is judged in quick mode.
    assert all(t["met"] is None for t in results["targets"]
               if t["id"] in ("cost_ddp", "cost_iperf3", "startup_s", "rss_mb", "report_time"))


@pytest.mark.benchmark
def test_measured_every_tool_and_condition(quick_run):
    _, results, _ = quick_run
    tools = {r["tool"] for r in results["accuracy"]["table"]}
    assert tools == {"tcp_stream", "openssl", "fio", "pigz", "zstd"}
    for wl in ("ddp", "iperf3", "fio"):
        conds = results["overhead"][wl]["conditions"]
        assert {"bare", "dpuprof"} <= set(conds)
        assert all(v["median"] > 0 for v in conds.values()), (wl, conds)
    assert results["long"]["rec_bytes"] > 0 and results["long"]["perf_bytes"] > 0
    # Issue 11's long-run measures are taken in the smoke run too (judged only on the full run's
    # 10 minutes of training): stack loss per minute, misses per program, the cost per workload CPU.
    lg = results["long"]
    assert lg["stack_loss"]["windows"] and "error" not in lg["recursion"], (lg["stack_loss"], lg["recursion"])
    if shutil.which("bpftool"):  # it names the programs, so that their run counts can be matched
        assert any(r["runs"] for r in lg["recursion"].values()), lg["recursion"]
    assert results["overhead"]["bpf_cost"]["iperf3"]["dpuprof"]["workload_pct"] > 0
    assert results["startup"]["dpuprof"]["median_s"] > 0


def test_accuracy_ratios(accuracy_table):
    assert {row["tool"] for row in accuracy_table} == {"tcp_stream", "openssl", "fio", "pigz", "zstd"}
    _check_accuracy(accuracy_table)


@pytest.mark.benchmark
def test_the_harness_accuracy_ratios(quick_run):
    _check_accuracy(quick_run[1]["accuracy"]["table"])


def _check_accuracy(table: list[dict]) -> None:
    for row in table:
        # Each tool's CPU seconds in dpuprof add up to the kernel's own accounting of it (wait4).
        # Quick runs last ~2 s, so one second of a tool's process that dpuprof attributes late or
        # early moves the ratio a lot (fio once read 0.82 here, 0.99 in the full suite's 6 s runs):
        # the full run (benchmarks/RESULTS.md) holds the ±10 % target; the smoke test guards
        # against gross loss or double counting.
        assert row["ratio_total"] == pytest.approx(1.0, abs=0.25), row
        floor = SHARE_FLOORS.get(row["tool"])
        if floor is not None:
            assert row["dp_share_cat"] >= floor, row
