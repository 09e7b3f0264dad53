"""The rules docs/architecture.md states about the package, checked on every import statement
(function-level imports included): only dpuprof/record imports bcc, and a stage imports only the
stages before it (record -> recording -> project -> projection -> render)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpuprof"

#: stage -> the stages (dpuprof subpackages) it must not import. The CLI, the public API facade
#: (api.py) and the shared leaf modules (categories, errors, ...) are not stages.
FORBIDDEN = {
    "record": ("project", "projection", "render"),
    "recording": ("record", "project", "projection", "render"),
    "project": ("record", "render"),
    "projection": ("record", "project", "render"),
    "render": ("record", "project"),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``; ``from X import y`` gives X and X.y."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _stage(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] in FORBIDDEN else None


def test_only_the_record_stage_imports_bcc():
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {mod}" for p in _modules() if _stage(p) != "record"
             for line, mod in _imports(p) if mod == "bcc" or mod.startswith("bcc.")]
    assert found == []


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_a_stage_imports_only_the_stages_before_it(stage):
    bad = tuple(f"dpuprof.{s}" for s in FORBIDDEN[stage])
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {mod}" for p in _modules() if _stage(p) == stage
             for line, mod in _imports(p) if mod in bad or mod.startswith(tuple(b + "." for b in bad))]
    assert found == []


def test_the_check_sees_function_level_imports(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    from dpuprof.project import window\n    import bcc\n")
    assert _imports(probe) == [(2, "dpuprof.project"), (2, "dpuprof.project.window"), (3, "bcc")]
