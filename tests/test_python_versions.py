"""dpuprof installs and runs on every supported Python (>= 3.10: DGX OS 6 and Ubuntu 22.04 ship
3.10): a fresh venv per interpreter, ``pip install`` of this checkout (its declared dependencies
only, so a missing ``tomli`` on 3.10 fails here), then ``project`` and ``report`` on a fixture copy
and the agent's help and metrics (prometheus-client). The report must be the same as the one this
interpreter makes.

Interpreters are found in pyenv (``$PYENV_ROOT/versions/3.X.*``) and on PATH or in ~/.local/bin
(``python3.X``: scripts/setup-dev.sh installs 3.10 and 3.13 with uv where none is present). A
version that is truly absent is skipped; each venv is made once per session, in a temporary
directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, dpuprof

VERSIONS = ("3.10", "3.11", "3.12", "3.13")
FIXTURE = "ddp-encrypted"

pytestmark = pytest.mark.slow


def interpreter(version: str) -> str | None:
    """The newest pyenv CPython ``version``.*, else ``python<version>`` on PATH or in ~/.local/bin."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob(f"{version}.*/bin/python"),
                   key=lambda p: [int(x) if x.isdigit() else -1 for x in p.parts[-3].split(".")])
    if found:
        return str(found[-1])
    path = os.pathsep.join([os.environ.get("PATH", ""), str(Path.home() / ".local" / "bin")])
    return shutil.which(f"python{version}", path=path)


def install(python: str, venv: Path) -> None:
    """A venv of ``python`` at ``venv`` with this checkout installed (not editable): with uv where
    it is installed (the test extra; seconds from its cache), else venv and pip (minutes)."""
    uv = importlib.util.find_spec("uv") is not None
    if uv:
        make = [sys.executable, "-m", "uv", "venv", "-q", "-p", python, str(venv)]
        # --python names the venv: uv must never fall back to the interpreter that runs the tests.
        pip = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
    else:
        make = [python, "-m", "venv", str(venv)]
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(make, check=True, timeout=300)
    done = subprocess.run([*pip, str(REPO)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"installing into {venv} failed: {done.stderr[-2000:]}"


@pytest.fixture(scope="session")
def venv_dpuprof(tmp_path_factory):
    """``venv_dpuprof(version)``: the ``dpuprof`` script of a venv of that Python with this
    checkout installed, made once per session; skips when no such interpreter exists."""
    made: dict[str, Path] = {}

    def make(version: str) -> Path:
        if version not in made:
            python = interpreter(version)
            if python is None:
                pytest.skip(f"no Python {version} here (pyenv or python{version} on PATH)")
            venv = tmp_path_factory.mktemp(f"venv{version}")
            install(python, venv)
            made[version] = venv / "bin" / "dpuprof"
        return made[version]

    return make


@pytest.fixture(scope="session")
def reference_report(fixture_copy, tmp_path_factory):
    """The JSON report of the fixture (with its bluefield projection) from this interpreter."""
    work = tmp_path_factory.mktemp("reference")
    rec = fixture_copy(FIXTURE, into=work)
    dpuprof("project", rec, "--dpu", "bluefield", check=True, cwd=work)
    return comparable(dpuprof("report", rec, "--format", "json", check=True, cwd=work).stdout)


def comparable(report_json: str) -> dict:
    """The report less what names a place: the recording's path, the profile file's directory."""
    report = json.loads(report_json)
    report.pop("recording")
    report["projection"].pop("recording")
    dpu = report["projection"]["dpu"]
    dpu["file"] = Path(dpu["file"]).name
    return report


@pytest.mark.parametrize("version", VERSIONS)
def test_project_and_report_run_on(version, venv_dpuprof, reference_report, fixture_copy, tmp_path):
    exe = venv_dpuprof(version)
    # The venv's install, not the checkout (no PYTHONPATH). Bytecode may be written (where the
    # environment says PYTHONDONTWRITEBYTECODE, e.g. a CI image): into the venv's site-packages, a
    # temporary directory, so that ``report`` reuses what ``project`` compiled instead of compiling
    # pandas and numpy again (seconds a version on a 2-CPU VM); what runs is the same code.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    rec = fixture_copy(FIXTURE, into=tmp_path)
    proj = subprocess.run([str(exe), "project", str(rec), "--dpu", "bluefield"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proj.returncode == 0, proj.stderr
    assert (tmp_path / "recording.proj.json").is_file()
    rep = subprocess.run([str(exe), "report", str(rec), "--format", "json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    assert comparable(rep.stdout) == reference_report
    agent = subprocess.run([str(exe), "agent", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert agent.returncode == 0 and "dpuprof_cpu_seconds_total" in agent.stdout, agent.stderr
    metrics = subprocess.run([str(exe.parent / "python"), "-c", "from dpuprof.agent.metrics import IntervalMetrics; "
                              "IntervalMetrics('n')"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert metrics.returncode == 0, metrics.stderr  # prometheus-client installed as a dependency
    where = subprocess.run([str(exe.parent / "python"), "-c", "import dpuprof, sys; print(dpuprof.__file__)"],
                           env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert str(exe.parent.parent) in where.stdout, "the venv ran the checkout, not its own install"
