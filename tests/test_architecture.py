"""The rules docs/architecture.md states about the package, checked on every import statement
(function-level imports included): only dpuprof/record imports bcc, a stage imports only the
stages before it (record -> recording -> project -> projection -> render), no module of dpuprof/
or benchmarks/ takes part in an import cycle, and no module of dpuprof/ imports another's
underscore-prefixed (private) name. Imports are at the top of modules (ruff's PLC0415, configured
in pyproject.toml), except those kept in a function with a reason."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dpuprof"
BENCHMARKS = REPO / "benchmarks"  # on sys.path when its scripts run, so its modules are top-level names

#: Import cycles (strongly connected components of the module graph) left, each with why. The
#: test fails when one of these is gone too, so that its entry goes with it.
KNOWN_CYCLES: set[frozenset[str]] = set()

#: (importing module, imported private name) left, each with why.
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str]] = set()

#: stage -> the stages (dpuprof subpackages) it must not import. The CLI, the public API facade
#: (api.py) and the shared leaf modules (categories, errors, ...) are not stages.
FORBIDDEN = {
    "record": ("project", "projection", "render"),
    "recording": ("record", "project", "projection", "render"),
    "project": ("record", "render"),
    "projection": ("record", "project", "render"),
    "render": ("record", "project"),
}


#: record/'s subpackages -> the others each may import (docs/architecture.md): loading the probes
#: and stacks and symbols stand alone, the workload reads only the kernel's symbols (privilege.py:
#: whether kernel addresses are visible), and the drains read everything below them. recorder.py,
#: sources.py and the other modules of record/ itself sit above all four.
RECORD_LAYERS = {"load": (), "stacks": (), "workload": ("stacks",), "drain": ("load", "stacks", "workload")}


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


def test_bccs_internals_are_used_in_one_module():
    """libbcc and bcc's private helpers only through record/load/libbcc.py; nothing subclasses
    bcc's BPF (the loaded probes are record/load/loaded.py's LoadedProbes, maps by fd)."""
    one = PACKAGE / "record" / "load" / "libbcc.py"
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {mod}" for p in _modules() if p != one
             for line, mod in _imports(p) if mod.startswith(("bcc.libbcc", "bcc.utils", "bcc.table"))]
    private = [f"{p.relative_to(PACKAGE.parent)} uses BPF.{m}" for p in _modules() if p != one
               for m in ("_decode_table_type", "_check_path_symbol") if f"BPF.{m}" in p.read_text()]
    subclasses = [f"{p.relative_to(PACKAGE.parent)}:{node.lineno} class {node.name}" for p in _modules()
                  for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ClassDef)
                  and any(ast.unparse(base).split(".")[-1] == "BPF" for base in node.bases)]
    assert found == private == subclasses == []


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_a_stage_imports_only_the_stages_before_it(stage):
    bad = tuple(f"dpuprof.{s}" for s in FORBIDDEN[stage])
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {mod}" for p in _modules() if _stage(p) == stage
             for line, mod in _imports(p) if mod in bad or mod.startswith(tuple(b + "." for b in bad))]
    assert found == []


@pytest.mark.parametrize("layer", sorted(RECORD_LAYERS))
def test_a_part_of_record_imports_only_the_parts_below_it(layer):
    bad = tuple(f"dpuprof.record.{other}" for other in RECORD_LAYERS if other != layer and other not in RECORD_LAYERS[layer])
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {mod}" for p in sorted((PACKAGE / "record" / layer).rglob("*.py"))
             for line, mod in _imports(p) if mod in bad or mod.startswith(tuple(b + "." for b in bad))]
    assert found == []


def test_the_check_sees_function_level_imports(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    from dpuprof.project import window\n    import bcc\n")
    assert _imports(probe) == [(2, "dpuprof.project"), (2, "dpuprof.project.window"), (3, "bcc")]


def _module_names(roots: list[tuple[Path, str]]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under each (directory, name prefix) of ``roots``
    (a package's __init__.py is the package's name)."""
    out = {}
    for root, prefix in roots:
        for path in sorted(root.rglob("*.py")):
            parts = [prefix] * bool(prefix) + list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolved_imports(name: str, path: Path, known) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name or None) of each import in ``path`` (module ``name``), with
    relative imports made absolute; ``from pkg import sub`` gives pkg.sub when that is a module
    of ``known``, else pkg with the name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + [base] * bool(base))
            out += [(node.lineno, f"{base}.{a.name}", None) if f"{base}.{a.name}" in known
                    else (node.lineno, base, a.name) for a in node.names]
    return out


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports anywhere (function-level imports too)."""
    return {name: {mod for _, mod, _ in _resolved_imports(name, path, modules) if mod in modules} - {name}
            for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while not comp or member != node:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.add(member)
                    if len(comp) > 1:
                        found.add(frozenset(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycle_in_the_package_or_the_benchmarks():
    graph = _import_graph(_module_names([(PACKAGE, "dpuprof"), (BENCHMARKS, "")]))
    assert len(graph) > 100  # both trees were read
    assert _cycles(graph) == KNOWN_CYCLES


def test_no_private_name_is_imported_across_modules():
    modules = _module_names([(PACKAGE, "dpuprof")])
    found = {(name, f"{mod}.{imported}") for name, path in modules.items()
             for _, mod, imported in _resolved_imports(name, path, modules)
             if mod.startswith("dpuprof") and imported and imported.startswith("_") and not imported.startswith("__")}
    assert found == PRIVATE_IMPORTS_ALLOWED


def test_the_cycle_check_follows_from_package_import_submodule(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\nfrom pkg.b import _x\n")
    (pkg / "d.py").write_text("from pkg import a\n")
    modules = _module_names([(pkg, "pkg")])
    graph = _import_graph(modules)
    assert graph["pkg.d"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert _cycles(graph) == {frozenset({"pkg.a", "pkg.b", "pkg.c"})}
    assert (2, "pkg.b", "_x") in _resolved_imports("pkg.c", pkg / "c.py", modules)


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``ruff check`` with the repository's configuration (ruff comes with the test extra);
    --no-cache: nothing is written in the checkout."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "--config", str(REPO / "pyproject.toml"), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_imports_are_at_the_top_of_modules():
    """Every function-level import of dpuprof/ and benchmarks/ has its reason (pyproject.toml's
    [tool.ruff]: a noqa with the reason, a per-file entry, or a module banned at module level)."""
    proc = _ruff(cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_ruff_check_flags_a_function_level_import(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    import json\n    from bcc.libbcc import lib\n    import zlib  # noqa: PLC0415\n"
                     "    return json, lib, zlib\n")
    proc = _ruff("m.py", cwd=tmp_path)
    found = [line.split(" ", 2)[:2] for line in proc.stdout.splitlines() if line.startswith("m.py")]
    assert proc.returncode == 1 and found == [["m.py:2:5:", "PLC0415"]], proc.stdout + proc.stderr
