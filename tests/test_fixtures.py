"""The bundled fixtures: real recordings of examples/train_ddp.py made by `dpuprof record`.

Every bound here is relative (one scenario against the others), never a hand-copied number.
Recordings are read from private copies (conftest ``fixture_copy``); the checkout's files are
only checked for presence and size.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FIXTURES, summary_of
from dpuprof.categories import CATEGORIES
from dpuprof.recording import load
from dpuprof.recording.schema import READABLE_VERSIONS, SCHEMA_VERSION

SCENARIOS = ("ddp-plain", "ddp-encrypted", "ddp-compressed", "storage-heavy", "compute-bound")
ALL = SCENARIOS + ("long",)
#: Kept as recorded with an older schema version, never regenerated (its README says so).
OLD_SCHEMA = ("ddp-plain-v1",)


def _path(name: str) -> Path:
    """The checkout's file: only for presence and size, never opened (use ``fixture_copy``)."""
    return FIXTURES / name / "recording.rec"


@pytest.fixture(scope="module")
def summaries(fixture_copy):
    return {name: summary_of(fixture_copy(name)) for name in ALL if _path(name).exists()}


def _share(summary, category, scope="workload_cpu"):
    by = summary[scope]["by_category"]
    return by[category] / sum(by.values())


def test_every_scenario_is_bundled():
    missing = [n for n in ALL if not _path(n).exists()]
    assert not missing, f"missing fixtures: {missing} (sudo fixtures/regenerate {' '.join(missing)})"


@pytest.mark.parametrize("name", ALL)
def test_fixture_loads_and_is_complete(name, summaries, fixture_copy):
    rec = load(fixture_copy(name))
    s = summaries[name]
    assert s["complete"] and s["exit_code"] == 0
    assert s["category_split"] and s["mode"] == "bpf"
    assert set(s["workload_cpu"]["by_category"]) == set(CATEGORIES)
    assert rec.schema_version in READABLE_VERSIONS
    assert (FIXTURES / name / "README.md").exists()


@pytest.mark.parametrize("name", ALL)
def test_size_budget(name):
    budget = 8_000_000 if name == "long" else 2_000_000
    assert _path(name).stat().st_size <= budget


# An open regression, recorded rather than hidden: with the schema-2 recorder (sched_wait, uprobes,
# raw tracepoints) the IO-heavy scenario's host categories plus idle come to 94 % of cpu_count x
# duration (61.4 of 65.0 CPU-s, re-recorded on a quiet machine), where schema 1 held 2 %. The
# workload's own numbers still add up. strict: the day it adds up again, this marker must go.
# Recorded under 4.49 s of hypervisor steal (host_cpu): the workload is charged its schedstat time,
# which leaves steal out (rq_clock_task, CONFIG_PARAVIRT_TIME_ACCOUNTING), and everything else its
# sched_switch time, which counts it. The difference, 3.65 of 65.04 CPU-s (per interval 0.94
# correlated with steal), was charged to nobody before record/drain/accounting.py wrote it as idle.steal;
# the fixture has no switch times of workload processes to recover it from.
_HOST_GAP = pytest.mark.xfail(strict=True, reason="storage-heavy: 3.65 of 65.04 CPU-s of steal while the "
                              "workload ran is in no row (recorded before accounting.py's idle.steal)")


@pytest.mark.parametrize("name", [pytest.param(n, marks=_HOST_GAP) if n == "storage-heavy" else n for n in ALL])
def test_categories_add_up_to_recorded_cpu(name, summaries, fixture_copy):
    s = summaries[name]
    rec = load(fixture_copy(name))
    wl = s["workload_cpu"]
    # The workload's categories partition its recorded CPU time.
    assert sum(wl["by_category"].values()) == pytest.approx(wl["total_s"], rel=0.01)
    # psutil's per-process /proc totals miss the last partial interval of processes that exited
    # (DataLoader workers, the launcher), so they may only be lower, and not by much.
    assert wl["proc_cpu_s"] <= wl["total_s"] * 1.01
    assert wl["total_s"] == pytest.approx(wl["proc_cpu_s"], rel=0.08)
    # Host: busy categories plus idle cover every CPU for the whole recording. Within 2 %, not 1 %:
    # the scheduler charges a woken task for its wake-up path (what getrusage reports, and so
    # what dpuprof charges the workload); that time also ran in whatever task was current, and
    # when that was not idle (a busy host) it counts twice -- most for the IO-heavy scenario.
    capacity = rec.meta["cpu_count"] * s["duration_s"]
    host = sum(s["host_cpu"]["by_category"].values()) + s["host_cpu"]["idle_s"] + s["host_cpu"]["observer_s"]
    assert host == pytest.approx(capacity, rel=0.02)
    # And the host's busy categories agree with the kernel's own /proc/stat accounting, to 5 %:
    # /proc/stat is tick-sampled, and under NOHZ it counts the interrupt and wake-up work done in
    # the idle task's context as idle, which dpuprof charges to the woken task (see above).
    times = s["host_cpu"]["cpu_times"]
    busy = sum(v for k, v in times.items() if k not in ("idle", "iowait"))
    assert sum(s["host_cpu"]["by_category"].values()) == pytest.approx(busy, rel=0.05)


@pytest.mark.parametrize("name", ALL)
def test_metadata_names_a_real_command_and_kernel(name, summaries):
    s = summaries[name]
    cmd = s["command"]
    assert re.search(r"python3(\.\d+)?$", cmd[0]) and any(a.endswith("examples/train_ddp.py") for a in cmd)
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", s["kernel"])
    assert s["cpu_count"] >= 1 and s["host"]


def test_ddp_fixtures_show_network_in_the_rank_processes(summaries):
    for name in ("ddp-plain", "ddp-encrypted", "ddp-compressed"):
        ranks = [p for p in summaries[name]["processes"] if p["by_category"]["network"] > 0]
        assert len(ranks) >= 2, name  # both ranks send and receive all-reduce traffic
        assert _share(summaries[name], "network") > _share(summaries["compute-bound"], "network")


def test_encrypted_shows_crypto(summaries):
    enc = _share(summaries["ddp-encrypted"], "crypto")
    assert enc > 5 * _share(summaries["ddp-plain"], "crypto")
    assert enc > _share(summaries["ddp-encrypted"], "compression")
    assert enc == max(_share(s, "crypto") for s in summaries.values())


def test_compressed_shows_compression(summaries):
    comp = _share(summaries["ddp-compressed"], "compression")
    assert comp > 5 * _share(summaries["ddp-plain"], "compression")
    assert comp == max(_share(s, "compression") for s in summaries.values())


def test_storage_heavy_shows_storage(summaries):
    st = _share(summaries["storage-heavy"], "storage")
    others = [_share(summaries[n], "storage") for n in SCENARIOS if n != "storage-heavy"]
    assert st > 3 * max(others)


def test_compute_bound_is_dominated_by_compute(summaries):
    cb = _share(summaries["compute-bound"], "compute")
    assert cb > 0.5
    assert cb > max(_share(summaries[n], "compute") for n in SCENARIOS if n != "compute-bound")


def test_an_oldest_schema_fixture_keeps_loading(fixture_copy):
    # When SCHEMA_VERSION moves on, one fixture recorded with the oldest readable version stays
    # bundled: this test then proves the reader still upgrades it.
    versions = {load(fixture_copy(n)).schema_version for n in ALL + OLD_SCHEMA if _path(n).exists()}
    assert min(READABLE_VERSIONS) in versions
    assert max(versions) <= SCHEMA_VERSION


def test_the_schema_1_fixture_loads_reports_and_projects(fixture_copy):
    from dpuprof.project import from_recording, load_profile, build_projection as project
    from dpuprof.recording.summary import summarize

    rec = load(fixture_copy("ddp-plain-v1"))
    assert rec.schema_version == 1 and rec.table("thread_time").empty
    assert summarize(rec)["workload_cpu"]["total_s"] > 0
    sp = project(from_recording(rec), load_profile("ideal")).speedup
    assert sp.regime == "unknown" and sp.expected == sp.contention_proxy > 1.0
