"""The recording's metadata and the run summary as typed objects (dpuprof/recording/meta.py,
dpuprof/render/run_summary.py): built once, with explicit defaults for what old files lack."""

from __future__ import annotations

import pytest

from conftest import fixture_path
from dpuprof.categories import INFRASTRUCTURE
from dpuprof.recording import load
from dpuprof.recording.meta import DutyMeta, RecordingMeta, WindowMeta


def test_missing_keys_take_explicit_defaults():
    m = RecordingMeta.from_dict({"schema_version": 1})
    assert (m.sample_freq_hz, m.workload, m.complete, m.category_split) == (0.0, "command", False, True)
    assert m.cpu_count is None and m.command is None and m.window is None and m.duty is None
    assert m.probes_unavailable == {} and m.job == {} and m.gpu == {} and m.attached == []


def test_shapes_the_reader_does_not_check_are_normalised_once():
    m = RecordingMeta.from_dict({"schema_version": 3, "recorder_pid": True, "attached": [{"pid": 7}, "junk"],
                                 "job": "not an object", "window": {"start_s": 1.5, "end_s": 9.0,
                                                                    "intervals": 8, "how": "--time 1.5:9"}})
    assert m.recorder_pid is None and m.attached == [{"pid": 7}] and m.job == {}
    assert m.window == WindowMeta(1.5, 9.0, 8, "--time 1.5:9")
    assert m.window.as_dict() == {"start_s": 1.5, "end_s": 9.0, "intervals": 8, "how": "--time 1.5:9"}
    assert RecordingMeta.from_dict({"duty": {"on_s": 1, "period_s": 3}}).duty == DutyMeta(1.0, 3.0)
    # a damaged file's attached may be a number (the loader fuzz found it raising TypeError)
    assert RecordingMeta.from_dict({"attached": 1}).attached == []
    assert RecordingMeta.from_dict({"io_sources": ["x"], "command_cpu_s": "4"}).io_sources == {}


@pytest.mark.parametrize("name", ["ddp-plain", "ddp-plain-v1"])
def test_a_loaded_recording_carries_its_typed_metadata(name):
    rec = load(fixture_path(name))
    assert rec.info == RecordingMeta.from_dict(rec.meta)
    assert rec.info.sample_freq_hz == float(rec.meta["sample_freq_hz"]) > 0
    assert rec.sample_freq_hz == rec.info.sample_freq_hz and rec.complete is rec.info.complete


def test_run_summary_figures_are_the_contracts():
    from dpuprof.render.view import build_view

    rec = load(fixture_path("ddp-encrypted"))
    v = build_view(rec)
    c = v.summary.contract
    assert v.summary.net_bytes == c["net"]["tx_bytes"] + c["net"]["rx_bytes"] > 0
    assert v.summary.disk_bytes == c["io"]["read_bytes"] + c["io"]["write_bytes"]
    assert [p.pid for p in v.summary.processes] == [p["pid"] for p in c["processes"]]
    top = c["processes"][0]
    assert v.summary.processes[0].infra_s == pytest.approx(sum(top["by_category"][k] for k in INFRASTRUCTURE))
    assert v.meta is rec.info and v.busy_s == pytest.approx(c["host_cpu"]["total_s"], abs=1e-5)
