"""A uprobe that stopped early (issue 35): its coverage, the projection's arithmetic on its partial
counts, and the warning in report and project, on synthetic recordings (tests/factory.py).

The recording: 3 one-second intervals from t = 100 s; crypto.user CPU of 0.5 s per interval in pid
42; libcrypto:EVP_EncryptUpdate counted 300 MB in 1000 calls in interval 0 only, then detached at
t = 101 s (68550 calls/s, over the 2000/s limit).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from conftest import dpuprof
from factory import make_recording

from dpuprof.project import build_projection, codecs, from_recording, load_profile
from dpuprof.recording import load, partial

TARGET = "libcrypto:EVP_EncryptUpdate"
STATUS = "detached: 68550 calls/s, over the limit of 2000/s (DPUPROF_UPROBE_MAX_HZ); each call is a trap"
DETACH = {TARGET: {"from": 100.0, "detached_at": 101.0, "calls_per_s": 68550.0, "limit_per_s": 2000.0}}
MB = 300e6


def _meta(times: bool = True) -> dict:
    meta = {"command": ["x"], "sample_freq_hz": 99, "category_split": True, "cpu_count": 2,
            "uprobes": {TARGET: STATUS, "libz:inflate": "attached"}}
    return meta | ({"uprobes_detached": DETACH} if times else {})


def _recording(tmp_path, times: bool = True):
    codec = lambda i: {"codec_calls": [(42, "libcrypto", "EVP_EncryptUpdate", "encrypt", 1000, int(MB),  # noqa: E731
                                        int(0.4e9), int(0.4e9))] if i == 0 else []}
    return make_recording(tmp_path, meta=_meta(times), intervals=3,
                          cpu=[(42, "crypto", "crypto.user", 50, 0.5)], tables=codec,
                          processes=[(42, 1, "py", "py", 1, 100.0, 103.0)])


INTERVALS = pd.DataFrame({"t_start": [100.0, 101.0, 102.0], "t_end": [101.0, 102.0, 103.0]})


def test_coverage_is_measured_against_the_intervals_present():
    (p,) = partial.detached(_meta(), INTERVALS)
    assert (p.target, p.covered_s, p.span_s, p.calls_per_s, p.limit_per_s) == (TARGET, 1.0, 3.0, 68550.0, 2000.0)
    assert p.weight == pytest.approx(1 / 3)
    assert "stopped early: detached after 1.0 s of 3.0 s at 68550 calls/s" in p.line()
    # a report --time window of the last two intervals: the probe covered none of it
    (w,) = partial.detached(_meta(), INTERVALS.iloc[1:])
    assert (w.covered_s, w.span_s, w.weight) == (0.0, 2.0, None)


def test_an_older_recording_says_detached_but_not_when():
    (p,) = partial.detached(_meta(times=False), INTERVALS)
    assert (p.calls_per_s, p.limit_per_s, p.covered_s, p.weight) == (68550.0, 2000.0, None, None)
    assert "an unknown part of the calls" in p.line()
    assert partial.detached({"uprobes": {TARGET: "attached"}}, INTERVALS) == []


def _codec_frames():
    cc = pd.DataFrame([(0, 42, "libcrypto", "EVP_EncryptUpdate", "encrypt", 1000, MB, 0.4e9, 0.4e9),
                       (0, 42, "libcrypto", "EVP_DecryptUpdate", "decrypt", 500, 100e6, 0.2e9, 0.2e9)],
                      columns=["interval", "pid", "lib", "func", "direction", "calls", "bytes", "duration_ns",
                               "cpu_ns"])
    cpu = pd.DataFrame([(i, 42, "crypto", "crypto.user", 50, 0.5) for i in range(3)],
                       columns=["interval", "pid", "category", "subcategory", "samples", "cpu_s"])
    return cc, cpu


def test_partial_counts_are_scaled_by_the_time_covered():
    cc, cpu = _codec_frames()
    detached = partial.detached(_meta(), INTERVALS)
    m = codecs.measure(codecs.extrapolate(cc, detached), cpu, "crypto.user", detached=detached)
    # encrypt: 300 MB in 1 s of 3 -> 900 MB; decrypt never detached: 100 MB as counted
    assert m.basis == "extrapolated"
    assert m.bytes == pytest.approx(3 * MB + 100e6) and m.counted_bytes == pytest.approx(MB + 100e6)
    assert m.calls == pytest.approx(3000 + 500)
    assert m.bytes_per_cpu_s == pytest.approx((3 * MB + 100e6) / 1.5)
    assert m.describe().startswith("extrapolated from the first 1.0 s of 3.0 s (uprobe libcrypto:EVP_EncryptUpdate "
                                   "detached at 68550 calls/s after 1.0 s")
    assert "400.0 MB counted" in m.describe()
    # the direction split weighs the scaled times: encrypt 1.2 s against decrypt 0.2 s
    assert codecs.time_fraction(codecs.extrapolate(cc, detached), "crypto.user",
                                directions=("encrypt",)) == pytest.approx(1.2 / 1.4)


def test_without_the_detach_time_the_counts_are_a_lower_bound():
    cc, cpu = _codec_frames()
    detached = partial.detached(_meta(times=False), INTERVALS)
    scaled = codecs.extrapolate(cc, detached)
    assert math.isnan(scaled.loc[0, "weight"]) and scaled.loc[1, "weight"] == 1.0
    m = codecs.measure(scaled, cpu, "crypto.user", detached=detached)
    assert m.basis == "lower_bound" and m.bytes == pytest.approx(MB + 100e6)
    assert "at least 400.0 MB" in m.describe()
    untouched = codecs.measure(codecs.extrapolate(cc, ()), cpu, "crypto.user")
    assert untouched.basis == "measured" and untouched.describe().startswith("measured: 400.0 MB")


def test_projection_rows_carry_the_basis_and_the_scaled_rate(tmp_path):
    proj = build_projection(from_recording(load(_recording(tmp_path))), load_profile("bluefield"))
    rows = [r for r in proj.rows + proj.rejected if r.subcategory == "crypto.user" and r.mechanism]
    assert rows, [(r.subcategory, r.mechanism) for r in proj.rows + proj.rejected]
    for r in rows:
        d = r.model_dump()
        assert d["rate_basis"] == "extrapolated"
        assert d["host_bytes_per_cpu_s"] == pytest.approx(3 * MB / 1.5, rel=1e-6)  # 900 MB over 1.5 CPU-s
        assert "extrapolated from the first 1.0 s of 3.0 s" in d["rate_note"]
    (warning,) = [w for w in proj.warnings if "stopped early" in w]
    assert warning.startswith(f"uprobe {TARGET} stopped early: detached after 1.0 s of 3.0 s at 68550 calls/s")
    assert "scaled by 3.00" in warning


def test_report_and_project_say_it(tmp_path):
    rec = _recording(tmp_path)
    report = dpuprof("report", rec, "--format", "json", check=True)
    (stopped,) = json.loads(report.stdout)["probes_stopped_early"]
    assert stopped["target"] == TARGET and stopped["covered_s"] == 1.0 and stopped["span_s"] == 3.0
    line = f"uprobe {TARGET} stopped early: detached after 1.0 s of 3.0 s"
    assert line in dpuprof("report", rec, check=True).stdout
    project = dpuprof("project", rec, "-o", tmp_path / "p.json", check=True)
    assert line in project.stdout and "scaled by 3.00" in project.stdout
    # with the projection drawn in, the report says it once, with what the projection did
    terminal = dpuprof("report", rec, "--projection", tmp_path / "p.json", check=True).stdout
    assert terminal.count(line) == 1 and "scaled by 3.00" in terminal
