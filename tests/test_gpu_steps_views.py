"""The GPU view (dpuprof/render/gpu.py) and the per-step view (dpuprof/render/steps.py), and how
the terminal, JSON, Markdown and Perfetto formats show them: on every fixture (copies), and on a
synthetic recording with gpu / gpu_process rows and "step" markers (the fixtures were recorded on
hosts without a GPU)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_render import FIXTURE_PARAMS  # noqa: E402
from test_report_synth import make_recording  # noqa: E402

from dpuprof.categories import INFRASTRUCTURE  # noqa: E402
from dpuprof.recording import load  # noqa: E402
from dpuprof.render import registry  # noqa: E402
from dpuprof.render.build import build_report  # noqa: E402
from dpuprof.render.gpu import gpu_view  # noqa: E402
from dpuprof.render.steps import METHOD, apportion, steps_view  # noqa: E402

GIB = 1 << 30
UTIL = [10.0, 50.0, 90.0, 30.0]  # gpu 0, per interval (cycled)


def with_gpu_and_steps(path: Path, intervals: int = 12, interval_s: float = 0.5) -> Path:
    """A synthetic recording (test_report_synth) plus two GPUs' rows, per-process rows and step
    markers every 0.3 s, added the way the recorder's writer stores them (a synthetic recording
    for the pure view functions)."""
    make_recording(path, intervals=intervals, interval_s=interval_s, t0=1_700_000_000.0)
    db = sqlite3.connect(path)
    rows, procs = [], []
    for k in range(intervals):
        rows.append((k, 0, UTIL[k % 4], (4 + k) * GIB, 80 * GIB))
        rows.append((k, 1, None if k == 3 else 5.0, 1 * GIB, 80 * GIB))  # a refused reading stays NULL
        procs.append((k, 0, 1000, 3.0 * UTIL[k % 4] / 4, (3 + k) * GIB))
        procs.append((k, 0, 1001, UTIL[k % 4] / 4, None))
    db.executemany("INSERT INTO gpu (interval, gpu_index, util_pct, mem_used_bytes, mem_total_bytes) "
                   "VALUES (?,?,?,?,?)", rows)
    db.executemany("INSERT INTO gpu_process VALUES (?,?,?,?,?)", procs)
    t0 = 1_700_000_000.0
    marks = [(1000, 1000, "step", t0 + 0.2 + 0.3 * i) for i in range(19)]
    marks += [(1000, 1000, "ddp_step", t0 + 0.25 + 0.3 * i) for i in range(5)]
    db.executemany("INSERT INTO markers VALUES (?,?,?,?)", marks)
    db.execute("UPDATE meta SET value = ? WHERE key = 'gpu'",
               (json.dumps({"available": True, "devices": ["Fake H100", "Fake L4"]}),))
    db.commit()
    db.close()
    return path


@pytest.fixture(scope="module")
def gsynth(tmp_path_factory) -> Path:
    return with_gpu_and_steps(tmp_path_factory.mktemp("gsynth") / "gpu.rec")


# ------------------------------------------------------------------------------------------ GPU

def test_gpu_view_devices_timeline_and_process_shares(gsynth):
    rec = load(gsynth)
    view, note = gpu_view(rec)
    assert note is None
    d = view.devices
    assert list(d["name"]) == ["Fake H100", "Fake L4"]
    util0 = [UTIL[k % 4] for k in range(12)]
    assert d.at[0, "util_mean_pct"] == pytest.approx(np.mean(util0)) and d.at[0, "util_max_pct"] == 90.0
    assert d.at[0, "mem_max_bytes"] == 15 * GIB and d.at[0, "mem_total_bytes"] == 80 * GIB
    assert d.at[1, "util_mean_pct"] == pytest.approx(5.0)  # the NULL reading is not averaged in as 0
    # the timeline is on the CPU timeline's clock (t_s from the recording's start)
    from dpuprof.render.view import build_view
    cpu_t = list(build_view(rec).timeline.index)
    assert sorted(view.timeline.loc[view.timeline["gpu_index"] == 0, "t_s"]) == pytest.approx(cpu_t)
    p = view.processes.set_index("pid")
    assert p.at[1000, "sm_share"] == pytest.approx(0.75) and p.at[1001, "sm_share"] == pytest.approx(0.25)
    assert p.at[1000, "sm_util_mean_pct"] == pytest.approx(0.75 * np.mean(util0))
    assert p.at[1000, "mem_max_bytes"] == 14 * GIB and np.isnan(p.at[1001, "mem_max_bytes"])
    assert p.at[1000, "comm"] == "python3" and bool(p.at[1000, "in_workload"])
    json.dumps(view.as_dict(), allow_nan=False)


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_fixture_without_gpu_says_why_in_one_line(fixture, fixture_copy):
    rec = load(fixture_copy(fixture))
    view, note = gpu_view(rec)
    assert view is None
    assert note == f"no GPU recorded: {rec.meta['gpu']['reason']}" and "\n" not in note


def test_gpu_in_terminal_json_markdown_and_perfetto(gsynth):
    rep = build_report([gsynth])
    term = registry.get("terminal")(rep).main.decode()
    assert "GPU 0 Fake H100: util mean 45 % (max 90 %), memory max 15.0 GiB of 80.0, 12 intervals" in term
    assert "GPU 0 pid 1000 python3: SM 34 % (75 % of the GPU's)" in term
    data = json.loads(registry.get("json")(rep).main)
    assert [x["name"] for x in data["gpu"]["devices"]] == ["Fake H100", "Fake L4"]
    assert len(data["gpu"]["timeline"]) == 24 and "gpu_note" not in data
    md = registry.get("markdown")(rep).main.decode()
    assert "## GPU" in md and "Fake H100: util mean 45 %" in md
    trace = json.loads(registry.get("perfetto")(rep).main)
    ev = trace["traceEvents"]
    util = [e for e in ev if e["name"] == "gpu 0 util (%)"]
    cpu = [e for e in ev if e["name"] == "host cpu (cores)"]
    # same epoch clock as the CPU tracks: one event per interval at the interval's start, then the end
    assert [e["ts"] for e in util] == [e["ts"] for e in cpu]
    assert [e["args"]["util"] for e in util[:-1]] == [UTIL[k % 4] for k in range(12)]
    mem1 = [e for e in ev if e["name"] == "gpu 1 memory (MiB)"]
    assert mem1[0]["args"] == {"used": 1024.0, "total": 80 * 1024.0}
    util1 = [e for e in ev if e["name"] == "gpu 1 util (%)"]
    assert len(util1) == 12  # the refused reading is left out, not drawn as 0


def test_no_gpu_line_in_every_format(fixture_copy):
    rep = build_report([fixture_copy("ddp-plain")])
    line = gpu_view(rep.main.recording)[1]
    assert line in registry.get("terminal")(rep).main.decode()
    from dpuprof.render.formats.markdown import md

    assert md(line) in registry.get("markdown")(rep).main.decode()  # markdown-escaped
    data = json.loads(registry.get("json")(rep).main)
    assert data["gpu"] is None and data["gpu_note"] == line
    assert not [e for e in json.loads(registry.get("perfetto")(rep).main)["traceEvents"]
                if e["name"].startswith("gpu ")]


# ------------------------------------------------------------------------------------------ steps

def test_unit_pure_apportion_splits_interval_cpu_by_overlap():
    iv = pd.DataFrame({"interval": [0, 1, 3], "t_start": [0.0, 1.0, 3.0], "t_end": [1.0, 2.0, 4.0]})
    cpu = pd.DataFrame({"network": [1.0, 2.0, 4.0]}, index=[0, 1, 3])
    got = apportion(iv, cpu, np.array([0.5, 1.5, 3.5, 4.0]))
    # [0.5,1.5): half of 1.0 + half of 2.0; [1.5,3.5): half of 2.0, nothing in the gap, half of 4.0
    assert got["network"].tolist() == pytest.approx([1.5, 3.0, 2.0])
    whole = apportion(iv, cpu, np.array([0.0, 4.0]))
    assert whole["network"].tolist() == pytest.approx([7.0])


def test_steps_view_prefers_step_markers(gsynth):
    rec = load(gsynth)
    sv = steps_view(rec)
    assert sv.kind == "step" and sv.pid == 1000 and sv.ranks == 1
    f = sv.frame
    assert len(f) == 18 and f["wall_s"].to_numpy() == pytest.approx(0.3)
    assert f["t_s"].iloc[0] == pytest.approx(0.2)
    assert f["infra_cpu_s"].to_numpy() == pytest.approx(f[list(INFRASTRUCTURE)].sum(axis=1).to_numpy())
    # the steps cover [0.2, 5.6) of the 6 s: their CPU is what the overlap gives, no more
    cat = rec.table("cpu_category")
    busy = cat[cat["category"] != "idle"]
    assert f["cpu_s"].sum() < busy["cpu_s"].sum()
    s = sv.summary()
    assert s["count"] == 18 and s["wall_s"]["median"] == pytest.approx(0.3) and s["method"] == METHOD


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_steps_on_fixtures(fixture, fixture_copy):
    rec = load(fixture_copy(fixture))
    sv = steps_view(rec)
    m = rec.table("markers")
    if m.empty:
        assert sv is None
        return
    ref = m[(m["kind"] == sv.kind) & (m["pid"] == sv.pid)]["t"].sort_values()
    assert len(sv.frame) == len(ref) - 1 and sv.ranks == m[m["kind"] == sv.kind]["pid"].nunique()
    assert sv.frame["wall_s"].sum() == pytest.approx(ref.iloc[-1] - ref.iloc[0])
    # apportioned CPU over the steps' span: between the CPU of the intervals fully inside and of
    # those touching it
    iv = rec.table("intervals")
    cat = rec.table("cpu_category")
    per = cat[cat["category"] != "idle"].groupby("interval")["cpu_s"].sum()
    inside = iv[(iv["t_start"] >= ref.iloc[0]) & (iv["t_end"] <= ref.iloc[-1])]["interval"]
    touch = iv[(iv["t_end"] > ref.iloc[0]) & (iv["t_start"] < ref.iloc[-1])]["interval"]
    assert per.reindex(inside).sum() - 1e-6 <= sv.frame["cpu_s"].sum() <= per.reindex(touch).sum() + 1e-6


def test_steps_in_terminal_and_json(fixture_copy):
    rep = build_report([fixture_copy("storage-heavy")])
    term = registry.get("terminal")(rep).main.decode()
    assert "Per step" in term and METHOD in term and "174 steps (ddp_step markers of pid 492, 1 of 2 ranks)" in term
    data = json.loads(registry.get("json")(rep).main)
    s = data["steps"]["summary"]
    assert s["count"] == len(data["steps"]["steps"]) == 174 and s["method"] == METHOD
    assert s["wall_s"]["median"] <= s["wall_s"]["p90"]
    row = data["steps"]["steps"][0]
    assert {"step", "t_s", "wall_s", "cpu_s", "infra_cpu_s", "network", "storage"} <= set(row)


def test_steps_follow_a_time_window(fixture_copy):
    path = fixture_copy("ddp-plain")
    whole = steps_view(load(path))
    rep = build_report([path], time_range="steady")
    data = json.loads(registry.get("json")(rep).main)
    assert 0 < data["steps"]["summary"]["count"] < len(whole.frame)


def test_recording_without_markers_has_no_steps(tmp_path):
    rec = load(make_recording(tmp_path / "plain.rec"))
    assert steps_view(rec) is None
    rep = build_report([tmp_path / "plain.rec"])
    assert json.loads(registry.get("json")(rep).main)["steps"] is None
    assert "Per step" not in registry.get("terminal")(rep).main.decode()


# ------------------------------------------------------------------------------------------ HTML

def _visible(page: str) -> str:
    import html
    import re

    page = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_html_gpu_panel_steps_and_window_on_synthetic(gsynth):
    page = registry.get("html")(build_report([gsynth])).main.decode()
    text = " ".join(_visible(page).split())
    assert 'id="fig-gpu-over-time"' in page and "data:image/png;base64," in page
    assert page.index('id="fig-categories-over-time"') < page.index('id="fig-gpu-over-time"')  # under the CPU chart
    assert "Fake H100 45.0 90.0 15.00 80.00 12" in text and "python3 yes 33.8 75.0 14.00" in text
    assert "18 steps (step markers of pid 1000)" in text and METHOD in text
    assert "Window: the whole run, 0–6.0 s" in text


def test_html_no_gpu_line_and_steady_window_on_fixture(fixture_copy):
    path = fixture_copy("ddp-encrypted")
    rec = load(path)
    text = " ".join(_visible(registry.get("html")(build_report([path])).main.decode()).split())
    assert gpu_view(rec)[1] in text and "Window: the whole run" in text and "Per step" in text
    text = " ".join(_visible(registry.get("html")(build_report([path], time_range="steady")).main.decode()).split())
    assert "Window: steady state (--time steady)" in text and "chosen by step markers" in text
    text = " ".join(_visible(registry.get("html")(build_report([path], time_range="5:15")).main.decode()).split())
    assert "Window: 5.0–15.0 s of the recording (10 intervals), --time 5:15 as given." in text


def test_perfetto_gpu_tracks_per_process_and_valid(gsynth):
    from test_report_perfetto import check_trace_event_format

    trace = json.loads(registry.get("perfetto")(build_report([gsynth])).main)
    assert check_trace_event_format(trace) == []
    ev = trace["traceEvents"]
    sm = [e for e in ev if e["name"] == "gpu 0 (%)" and e["pid"] == 1000]
    assert [e["args"]["sm"] for e in sm[:-1]] == pytest.approx([3.0 * UTIL[k % 4] / 4 for k in range(12)])
    mem = [e for e in ev if e["name"] == "gpu 0 memory (MiB)" and e["pid"] == 1000]
    assert mem[0]["args"] == {"used": 3 * 1024.0}
    assert not [e for e in ev if e["name"] == "gpu 0 memory (MiB)" and e["pid"] == 1001]  # NVML gave no memory
