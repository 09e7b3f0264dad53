"""Golden output: every fixture renders the same numbers as when the goldens were stored.

This guards refactors of the renderers ("behaviour unchanged"): for each fixture the test renders,
from a private copy of ``fixtures/NAME/recording.rec``,

- the ``--format json`` summary (numbers compared within rel 1e-6, text exactly);
- the numbers, in order, of the terminal summary's text, and of the HTML report's visible text
  (scripts, styles and tags removed: a layout change that keeps the words and numbers passes);
- for ``GOLDEN_PROJECTED`` fixtures, the projection (``dpuprof project --dpu bluefield``) as JSON
  and the numbers of its terminal tables, and the report JSON with that projection drawn in.

Version strings and paths (the tmp copy's) are left out of the comparison. After a deliberate
change of numbers (a model fix, a re-recorded fixture) regenerate with
``DPUPROF_REGEN_GOLDEN=1 python3 -m pytest -q tests/test_golden.py`` and review the diff of
tests/data/golden/.
"""

from __future__ import annotations

import html.parser
import json
import math
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpuprof.cli.project import project as project_cmd
from dpuprof.render import registry
from dpuprof.render.build import build_report

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden"
NAMES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/recording.rec"))
GOLDEN_PROJECTED = ("ddp-encrypted", "storage-heavy")
REGEN = os.environ.get("DPUPROF_REGEN_GOLDEN") == "1"
REL = 1e-6
#: keys whose values depend on where/when/with which version the output was made, not on the data
IGNORED_KEYS = {"dpuprof_version", "recording", "generated_at"}
_NUM = re.compile(r"-?\d+(?:[.,]\d+)*(?:[eE][+-]?\d+)?")
_PATH = re.compile(r"\S*/\S*")


def numbers(text: str) -> list[str]:
    """The numeric tokens of ``text`` in order, path-like tokens (the tmp copy's) removed first."""
    return _NUM.findall(_PATH.sub(" ", text))


class _Visible(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def visible_text(page: str) -> str:
    parser = _Visible()
    parser.feed(page)
    return " ".join(parser.parts)


def scrub(obj):
    """``obj`` without the IGNORED_KEYS (at any depth)."""
    if isinstance(obj, dict):
        return {k: scrub(v) for k, v in obj.items() if k not in IGNORED_KEYS}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


def differences(got, want, where="$") -> list[str]:
    """Where ``got`` differs from ``want``: numbers beyond rel REL, anything else by equality."""
    if isinstance(want, bool) or want is None or isinstance(want, str):
        return [] if got == want else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, (int, float)):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return [f"{where}: {got!r} is not a number ({want!r})"]
        return [] if math.isclose(got, want, rel_tol=REL, abs_tol=1e-12) else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{where}: {type(got).__name__} != dict"]
        out = [f"{where}: keys {sorted(set(got) ^ set(want))} differ"] if set(got) != set(want) else []
        for k in want:
            if k in got:
                out += differences(got[k], want[k], f"{where}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: list of {len(got) if isinstance(got, list) else got!r} != {len(want)} items"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{where}[{i}]")]
    raise TypeError(f"{where}: unexpected {type(want).__name__} in a golden file")


def render(name: str, rec: Path) -> dict:
    """What the golden file of fixture ``name`` holds, rendered from the copy at ``rec``."""
    out = {}
    rep = build_report([rec])
    out["summary"] = json.loads(registry.get("json")(rep).main)
    out["terminal_numbers"] = numbers(registry.get("terminal")(rep, color=False).main.decode())
    if name in GOLDEN_PROJECTED:
        proj_path = rec.with_name("recording.proj.json")
        runner = CliRunner()
        res = runner.invoke(project_cmd, [str(rec), "--dpu", "bluefield", "--format", "json", "-o", str(proj_path)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
        out["projection"] = json.loads(proj_path.read_text())
        res = runner.invoke(project_cmd, [str(rec), "--dpu", "bluefield", "-o", str(proj_path)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
        out["projection_terminal_numbers"] = numbers(res.output)
        rep = build_report([rec], projection=str(proj_path))
        out["summary_projected"] = json.loads(registry.get("json")(rep).main)
        out["terminal_projected_numbers"] = numbers(registry.get("terminal")(rep, color=False).main.decode())
        out["html_numbers"] = numbers(visible_text(registry.get("html")(rep, stem="report").main.decode()))
    return scrub(out)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_renders_its_golden_numbers(name, fixture_copy, tmp_path):
    run = tmp_path / "run"  # the report names a recording.rec by its folder: make that fixed
    run.mkdir()
    rec = fixture_copy(name, into=run)
    got = render(name, rec)
    path = GOLDEN / f"{name}.json"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    if not path.exists():
        pytest.fail(f"{path} missing: regenerate with DPUPROF_REGEN_GOLDEN=1 (see this module's docstring)")
    want = json.loads(path.read_text())
    diffs = differences(got, want)
    assert not diffs, f"{name}: {len(diffs)} differences from {path.name}:\n" + "\n".join(diffs[:30])


def test_differences_sees_a_change_beyond_tolerance():
    want = {"a": 1.0, "b": [1, "x"], "c": {"d": None}}
    assert differences({"a": 1.0 + 1e-9, "b": [1, "x"], "c": {"d": None}}, want) == []
    assert differences({"a": 1.001, "b": [1, "x"], "c": {"d": None}}, want) == ["$.a: 1.001 != 1.0"]
    assert differences({"a": 1.0, "b": [1, "y"], "c": {"d": None}}, want) == ["$.b[1]: 'y' != 'x'"]
    assert differences({"a": 1.0, "b": [1], "c": {}}, want)[0].startswith("$.b: list")
    assert numbers("host vm · 2 CPUs · 36.3 s in /tmp/x/9.rec 1,234 -0.5 1e-05") == ["2", "36.3", "1,234", "-0.5", "1e-05"]
