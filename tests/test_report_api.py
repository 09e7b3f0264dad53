"""The Python API (dpuprof.load, dpuprof.project_run): its DataFrames equal the CLI's JSON totals on
every fixture, ``import dpuprof`` stays light, and docs/api.md's examples run (doctest) on a copy of
a fixture in a temporary directory."""

from __future__ import annotations

import doctest
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_report_render import FIXTURE_PARAMS, ROOT, render, report_for  # noqa: E402

import dpuprof  # noqa: E402
from dpuprof.categories import CATEGORIES, IDLE  # noqa: E402
from dpuprof.render.formats.folded import parse_folded  # noqa: E402


def cli_json(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "dpuprof", "report", str(path), "--format", "json", "-q"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_api_dataframes_equal_the_cli_json_totals(fixture, tmp_path):
    rec = tmp_path / "run.rec"
    shutil.copy(fixture, rec)
    got = cli_json(rec)
    run = dpuprof.load(rec)
    cats = run.categories()
    busy = cats[cats["category"] != IDLE]
    host = busy.groupby("category")["cpu_s"].sum()
    for cat in CATEGORIES:
        assert round(float(host.get(cat, 0.0)), 6) == pytest.approx(got["host_cpu"]["by_category"][cat], abs=2e-6)
    assert float(cats.loc[cats["category"] == IDLE, "cpu_s"].sum()) == pytest.approx(got["host_cpu"]["idle_s"], abs=1e-5)
    wl = run.categories(workload=True)
    wl = wl[wl["category"] != IDLE]
    assert float(wl["cpu_s"].sum()) == pytest.approx(got["workload_cpu"]["total_s"], abs=1e-5)
    procs = run.processes().set_index("pid")
    for p in got["processes"]:
        assert procs.at[p["pid"], "role"] in ("workload", "recorder")
        assert float(procs.at[p["pid"], "cpu_s"]) == pytest.approx(p["cpu_s"], abs=1e-5)
    assert (procs["role"] == "recorder").sum() == 1
    assert float(procs.loc[procs["role"] == "recorder", "cpu_s"].iloc[0]) == pytest.approx(got["recorder"]["cpu_s"], abs=1e-5)
    # stacks: the folded output's total, recorder and idle left out
    folded = parse_folded(render(report_for(fixture), "folded").main.decode())
    st = run.stacks()
    assert int(st["samples"].sum()) == sum(folded.values())
    assert run.meta["recorder_pid"] not in set(st["pid"])
    assert run.summary() == {k: v for k, v in got.items() if k != "recording"} | {"recording": str(rec)}
    assert list(run.gpu().columns) == ["interval", "t_start", "t_s", "gpu_index", "util_pct", "mem_used_bytes",
                                  "mem_total_bytes"]


def test_project_run_is_the_model_projection(tmp_path):
    rec = tmp_path / "run.rec"
    shutil.copy(FIXTURE_PARAMS[0].values[0], rec)
    proj = dpuprof.project_run(dpuprof.load(rec), "bluefield-3")
    from dpuprof.project import build_projection, from_recording, load_profile
    from dpuprof.projection.schema import Projection
    from dpuprof.recording import load

    want = build_projection(from_recording(load(rec)), load_profile("bluefield-3"))
    assert isinstance(proj, Projection) and proj == want
    assert proj.totals.before_s >= proj.totals.after_s
    assert dpuprof.project_run(str(rec), "ideal").dpu.name != proj.dpu.name


def test_old_project_spelling_names_the_new_function():
    # in a fresh interpreter: once the model is imported, dpuprof.project is its subpackage
    code = ("import dpuprof\ntry:\n    dpuprof.project\nexcept AttributeError as e:\n    print(e)\n"
            "from dpuprof import project\nprint(project.__name__, callable(project))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert "dpuprof.project_run(run, dpu)" in first
    assert second == "dpuprof.project False"  # the subpackage, not a callable module
    import dpuprof.api

    with pytest.raises(AttributeError, match="project_run"):
        dpuprof.api.project


def test_import_dpuprof_is_light():
    code = "import sys, dpuprof; print(sorted(m for m in ('pandas', 'matplotlib', 'google.protobuf') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_docs_api_examples_run(tmp_path, monkeypatch):
    fixture = ROOT / "fixtures" / "ddp-encrypted" / "recording.rec"
    if not fixture.exists():
        pytest.skip("docs/api.md's examples run on fixtures/ddp-encrypted")
    shutil.copy(fixture, tmp_path / "run.rec")
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, verbose=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 20 and result.failed == 0
    assert sorted(os.listdir(tmp_path)) == ["run.rec"]  # the examples write nothing
