"""Kernel work by its user-space cause (dpuprof/render/causes.py) on the fixtures."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import PYTHON
from dpuprof.recording import load
from dpuprof.render.causes import as_records, cause_frame


def test_causes_split_each_subcategory_within_its_measured_cpu(fixture_copy):
    rec = load(fixture_copy("ddp-encrypted"))
    frame = cause_frame(rec)
    assert frame is not None and not frame.empty
    assert {"kernel_other.mm"} <= set(frame["subcategory"])
    cpu = rec.table("cpu_category").groupby("subcategory")["cpu_s"].sum()
    for sub, part in frame.groupby("subcategory"):
        assert 0 < part["share"].sum() <= 1 + 1e-9, sub
        assert part["cpu_s"].sum() <= cpu[sub] + 1e-9, sub
    assert list(frame["cpu_s"]) == sorted(frame["cpu_s"], reverse=True)


def test_a_recording_without_causes_has_none(fixture_copy):
    rec = load(fixture_copy("ddp-plain-v1"))
    assert cause_frame(rec) is None and as_records(None) is None


@pytest.mark.parametrize("fmt", ["json", "terminal"])
def test_report_shows_kernel_work_by_cause(fixture_copy, fmt, tmp_path):
    rec = fixture_copy("ddp-encrypted")
    out = subprocess.run([PYTHON, "-m", "dpuprof", "report", str(rec), "--format", fmt], capture_output=True,
                         text=True, cwd=tmp_path, check=True).stdout
    if fmt == "json":
        rows = json.loads(out)["kernel_by_cause"]
        assert rows and all(r["cause"] and 0 < r["share"] <= 1 for r in rows)
    else:
        assert "Kernel work by its user-space cause" in out and "kernel_other.mm" in out
