"""README's newcomer path: its try-it commands, run as written in a temporary clone, write nothing
inside the clone (so its test command that follows sees the checkout as cloned).

The commands are read from README.md itself, so the test and the README cannot drift apart. Only
the install line is not run: it would re-point the machine's own ``pip install -e`` at the
temporary clone. Its effect -- ``dpuprof`` on PATH, importing the clone's code -- is provided by
a shim instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, REPO

INSTALL = "python3 -m pip install -e ."


def readme_block(readme: str, heading: str) -> list[str]:
    """The first indented code block under the ``## heading...`` section, one command a line."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## " + heading))
    block: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("    "):
            block.append(line[4:])
        elif block and line.strip():
            break
    assert block, f"no code block under '## {heading}'"
    return block


def git(*args, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=120).stdout


@pytest.fixture()
def clone(tmp_path) -> Path:
    """A clone of this checkout's HEAD, plus its uncommitted changes to tracked files (so the test
    checks the tree under test, not only the last commit)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    dst = tmp_path / "clone"
    git("clone", "-q", "--no-hardlinks", str(REPO), str(dst), cwd=tmp_path)
    diff = subprocess.run(["git", "diff", "--binary", "HEAD"], cwd=REPO, check=True,
                          capture_output=True, timeout=120).stdout
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=dst, input=diff, check=True,
                       capture_output=True, timeout=120)
        git("-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-qam",
            "uncommitted changes under test", cwd=dst)
    assert git("status", "--porcelain", "--ignored", cwd=dst) == ""
    return dst


def test_readme_try_it_leaves_the_clone_clean(clone, tmp_path):
    commands = readme_block((clone / "README.md").read_text(), "Try it")
    assert commands[0] == INSTALL, commands
    shim = tmp_path / "bin" / "dpuprof"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{PYTHON}" -m dpuprof "$@"\n')
    shim.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(clone), "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(temp)}
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(commands[1:])], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    # The outputs went where README says: a temporary directory, with the report beside the projection.
    opened = res.stdout.strip().splitlines()[-1]
    assert opened.startswith("open ") and opened.endswith("/report.html")
    report = Path(opened[len("open "):])
    assert report.parent.parent == temp and (report.parent / "recording.proj.json").exists()
    html = report.read_bytes()
    assert html.startswith(b"<!doctype html>") and b'"projection":{"projection_version"' in html  # found it
    # The before/after pair: the after-run held against the before-run's projection (found beside it).
    assert "Projection check: A's projection against B" in res.stdout and "Speedup: measured" in res.stdout
    # ... and nothing inside the clone, not even a git-ignored file.
    assert git("status", "--porcelain", "--ignored", cwd=clone) == ""


# Spelled in pieces so that this file does not match its own search.
OUTSIDE = ("DESIGN" + ".md", ".." + "/shared")
SHIPPED = ("README.md", "pyproject.toml", "dpuprof", "probes", "docs", "scripts", "tests", "examples",
           "fixtures", "benchmarks", "reports/README.md", "reports/Makefile", "reports/templates")


def test_nothing_cites_files_outside_the_repository():
    """What the project relies on is in docs/; sources are public or docs/ files. (reports/example
    is generated from the fixtures: `make -C reports` refreshes it.)"""
    hits = []
    for top in SHIPPED:
        root = REPO / top
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in files:
            if "__pycache__" in path.parts or path.suffix in (".rec", ".png", ".pyc"):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if any(needle in line for needle in OUTSIDE):
                    hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits)


def test_readme_points_to_docs_that_exist():
    readme = (REPO / "README.md").read_text()
    for name in ("architecture.md", "taxonomy.md", "kernel-notes.md", "projection-model.md",
                 "projection-contract.md"):
        assert name in readme and (REPO / "docs" / name).is_file(), name
