"""The projection check's arithmetic and every "cannot check" path, on synthetic run facts and a
hand-built Projection (dpuprof/render/projection_check.py). These are tests of the arithmetic, not
measurements: the numbers are made up to be easy to check by hand."""

from __future__ import annotations

import dataclasses

import pytest

from dpuprof.projection.schema import Projection
from dpuprof.render import projection_check as PC
from dpuprof.render.stats import ratio_of_means_ci

CMD = ("python3", "train.py", "--variant", "encrypted")


def facts(name="a", *, steps=(0.1,) * 20, cpu=None, subcats=None, cmd=CMD, kind="step", window=2.0,
          split=True) -> PC.RunFacts:
    cpu = {"crypto": 1.0, "compute": 3.0} if cpu is None else cpu
    subcats = {"crypto.user": cpu.get("crypto", 0.0)} if subcats is None else subcats
    return PC.RunFacts(name, cmd, split, kind if steps else None, window, "step markers", sum(steps) or window,
                       tuple(steps), cpu, subcats)


def projection(low=1.2, expected=1.3, high=1.4, crypto_after=0.0) -> Projection:
    return Projection.model_validate({
        "projection_version": 2,
        "by_category": {"crypto": {"before_s": 2.0, "after_s": crypto_after, "freed_s": 2.0 - crypto_after},
                        "compute": {"before_s": 6.0, "after_s": 6.0, "freed_s": 0.0}},
        "rows": [{"category": "crypto", "subcategory": "crypto.user", "mechanism": "ktls", "enabled": True,
                  "before_s": 2.0, "after_s": crypto_after}],
        "speedup": {"low": low, "expected": expected, "high": high}})


def test_projected_is_a_measured_times_the_projection_ratio_per_step():
    # A: 20 steps, 1.0 s crypto -> 0.05 s/step; the projection halves crypto (2.0 -> 1.0 s)
    b = facts("b", steps=(0.08,) * 25, cpu={"crypto": 0.5, "compute": 3.0})
    res = PC.check(facts(), b, projection(crypto_after=1.0))
    assert res.made and res.unit == "per_step" and res.unit_text == "CPU s per step"
    crypto = next(c for c in res.categories if c.name == "crypto")
    assert crypto.before == pytest.approx(0.05) and crypto.projected == pytest.approx(0.025)
    assert crypto.measured == pytest.approx(0.5 / 25) and crypto.error == pytest.approx(0.02 - 0.025)
    assert crypto.error_pct == pytest.approx(-20.0)
    compute = next(c for c in res.categories if c.name == "compute")
    assert compute.projected == compute.before == pytest.approx(0.15)  # left alone by the projection
    (mech,) = res.mechanisms
    assert (mech.name, mech.subcategories) == ("ktls", ("crypto.user",))
    assert mech.projected == pytest.approx(0.025) and mech.measured == pytest.approx(0.02)


def test_speedup_is_the_ratio_of_mean_step_times_with_a_bootstrap_interval():
    a = facts(steps=[0.1, 0.12, 0.11, 0.09] * 5)
    b = facts("b", steps=[0.08, 0.085, 0.075] * 7)
    res = PC.check(a, b, projection())
    sp = res.speedup
    assert sp.measured == pytest.approx(0.105 / 0.08)
    assert sp.ci_low < sp.measured < sp.ci_high
    assert sp.a_steps_per_s == pytest.approx(1 / 0.105) and sp.b_steps == 21
    assert sp.inside and sp.verdict == "inside the range" and sp.outside_pct == 0.0
    again = PC.check(a, b, projection()).speedup  # a fixed seed: the same interval
    assert (again.ci_low, again.ci_high) == (sp.ci_low, sp.ci_high)


@pytest.mark.parametrize("b_step, verdict, pct", [(0.05, "above the high bound", 100 * (2.0 / 1.4 - 1)),
                                                  (0.1, "below the low bound", 100 * (1 - 1 / 1.2))])
def test_verdict_outside_says_by_how_much(b_step, verdict, pct):
    res = PC.check(facts(), facts("b", steps=(b_step,) * 20), projection())
    assert not res.speedup.inside
    assert res.speedup.outside_pct == pytest.approx(pct)
    assert res.speedup.verdict == f"outside by {pct:.0f} % ({verdict})"
    assert any(f.startswith("the job ran") and verdict in f for f in res.findings)


def test_a_miss_under_one_percent_is_not_written_as_0():
    # measured 0.1 / 0.0999 = 1.001x against a high bound of 1.0: outside by 0.10 %, not "by 0 %"
    proj = projection()
    proj.speedup.high = 1.0
    proj.speedup.expected = proj.speedup.low = 1.0
    res = PC.check(facts("a", steps=(0.1,) * 20), facts("b", steps=(0.0999,) * 20), proj)
    assert res.speedup.verdict == "outside by 0.10 % (above the high bound)"


def test_unbounded_high_and_exact_bounds_are_inside():
    assert PC.check(facts(), facts("b", steps=(0.01,) * 20), projection(high=None)).speedup.inside
    sp = PC.check(facts(), facts("b", steps=(0.1 / 1.2,) * 20), projection()).speedup
    assert sp.measured == pytest.approx(1.2) and sp.outside_pct == pytest.approx(0.0, abs=1e-9)


def test_findings_name_a_category_that_grew_and_a_mechanism_that_did_not_fall():
    b = facts("b", steps=(0.08,) * 25, cpu={"crypto": 0.9, "compute": 5.0}, subcats={"crypto.user": 0.9})
    res = PC.check(facts(), b, projection())
    text = "\n".join(res.findings)
    assert "ktls (crypto.user): its CPU fell by only 0.014 s per step" in text
    assert "compute used 33 % more CPU than projected: 0.2 s per step against 0.15 (A: 0.15)" in text
    assert "crypto used" not in text  # the mechanism's finding speaks for its category
    assert len(res.findings) == 2


def test_a_category_the_projection_left_alone_that_fell_is_a_finding():
    b = facts("b", steps=(0.08,) * 20, cpu={"crypto": 0.0, "compute": 1.6}, subcats={"crypto.user": 0.0})
    (finding,) = PC.check(facts(), b, projection()).findings
    assert finding == "compute used 47 % less CPU than projected: 0.08 s per step against 0.15 (A: 0.15)"


def test_a_mechanism_whose_cpu_rose_is_said_so():
    b = facts("b", cpu={"crypto": 1.5, "compute": 3.0}, subcats={"crypto.user": 1.5})
    res = PC.check(facts(), b, projection())
    assert any(f.startswith("ktls (crypto.user): its CPU rose 0.025 s per step") for f in res.findings)


def test_small_differences_are_not_findings():
    b = facts("b", steps=(0.08,) * 20, cpu={"crypto": 0.0, "compute": 2.5}, subcats={"crypto.user": 0.0})
    assert PC.check(facts(), b, projection()).findings == []


def test_without_steps_cpu_is_per_second_and_the_speedup_is_not_measured():
    a, b = facts(steps=(), window=4.0), facts("b", steps=(0.1,) * 20)
    res = PC.check(a, b, projection())
    assert res.made and res.unit == "per_second" and res.speedup is None
    assert "A (a) has 0 steps in its steady window" in res.speedup_note
    crypto = next(c for c in res.categories if c.name == "crypto")
    assert crypto.before == pytest.approx(1.0 / 4.0) and crypto.measured == pytest.approx(1.0 / 2.0)
    assert res.as_json()["cpu_unit"] == "CPU s per second of steady window (cores)"


def test_json_carries_units_and_the_verdict():
    js = PC.check(facts(), facts("b", steps=(0.08,) * 20), projection()).as_json()
    assert js["made"] and js["cannot"] == [] and js["cpu_unit"] == "CPU s per step"
    assert js["speedup"]["unit"].startswith("x ") and js["speedup"]["verdict"] == "inside the range"
    assert js["speedup"]["projected"] == {"low": 1.2, "expected": 1.3, "high": 1.4}
    assert set(js["by_category"]["crypto"]) == {"before", "projected", "measured", "error", "error_pct"}
    assert js["by_mechanism"]["ktls"]["subcategories"] == ["crypto.user"]


# ----------------------------------------------------------------------------- cannot check

def test_no_projection_cannot_check():
    res = PC.check(facts(), facts("b"), None)
    assert not res.made and len(res.cannot) == 1 and res.cannot[0].startswith("no projection of A (a)")
    assert res.as_json() == {"a": "a", "b": "b", "made": False, "cannot": res.cannot}


@pytest.mark.parametrize("other", [CMD + ("--batch-size", "32"), ("python3", "other.py"), None])
def test_different_commands_cannot_check(other):
    res = PC.check(facts(), facts("b", cmd=other), projection())
    assert res.cannot == ["the runs do different work: their commands differ (beyond the offload switches "
                          "--emulate)"]


@pytest.mark.parametrize("extra", [("--emulate", "crypto=remove"), ("--emulate=crypto=remove",),
                                   ("--emulate", "crypto=remove", "--emulate", "storage=remove")])
def test_an_offload_switch_is_the_same_work(extra):
    assert PC.same_work(CMD, CMD + extra) and PC.same_work(CMD + extra, CMD)
    assert PC.check(facts(), facts("b", cmd=CMD + extra), projection()).made


def test_two_runs_without_a_command_are_the_same_job():
    assert PC.same_work(None, None) and not PC.same_work(None, CMD)


def test_steps_counted_by_different_markers_cannot_check():
    res = PC.check(facts(), facts("b", kind="ddp_step"), projection())
    assert res.cannot == ["the runs count steps differently (A by step markers, B by ddp_step): their steps "
                          "need not be the same size"]


@pytest.mark.parametrize("side", ["A", "B"])
def test_no_steady_window_cannot_check(side):
    none = dataclasses.replace(facts(side.lower()), window_s=None, window_how="the recording has no intervals")
    a, b = (none, facts("b")) if side == "A" else (facts(), none)
    res = PC.check(a, b, projection())
    assert res.cannot == [f"{side} ({side.lower()}) has no steady window: the recording has no intervals"]


def test_no_category_split_cannot_check():
    res = PC.check(facts(), facts("b", split=False), projection())
    assert len(res.cannot) == 1 and res.cannot[0].startswith("B (b) has no category split (psutil mode)")


def test_every_reason_is_one_line_and_all_are_given():
    bad = dataclasses.replace(facts("b", cmd=("x",), split=False), window_s=None, window_how="none")
    res = PC.check(facts(), bad, None)
    assert len(res.cannot) == 4 and all("\n" not in r for r in res.cannot)


# ----------------------------------------------------------------------------- the bootstrap

def test_ratio_of_means_ci_contains_the_point_and_is_reproducible():
    point, lo, hi = ratio_of_means_ci([2.0, 2.2, 1.8, 2.0], [1.0, 1.1, 0.9, 1.0], seed=3)
    assert point == pytest.approx(2.0) and lo <= point <= hi
    assert ratio_of_means_ci([2.0, 2.2, 1.8, 2.0], [1.0, 1.1, 0.9, 1.0], seed=3) == (point, lo, hi)
    assert ratio_of_means_ci([1.0] * 5, [0.5] * 5) == (2.0, 2.0, 2.0)  # no spread, no width
    with pytest.raises(ValueError):
        ratio_of_means_ci([], [1.0])


# ----------------------------------------------------------------------------- on recordings

def test_two_fixtures_of_different_work_say_why_in_json(fixture_copy, tmp_path):
    import json
    import subprocess

    from conftest import PYTHON

    a, b = fixture_copy("ddp-plain"), fixture_copy("ddp-encrypted")
    res = subprocess.run([PYTHON, "-m", "dpuprof", "report", str(a), str(b), "--compare", "--format", "json", "-q"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    chk = doc["projection_check"]
    assert not chk["made"] and "comparison" in doc  # the plain comparison is still there
    assert chk["cannot"][0].startswith("no projection of A")
    assert any(r.startswith("the runs do different work") for r in chk["cannot"])


# ----------------------------------------------------------------------------- the fixture pair

PAIR = "offload-crypto"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A private copy of fixtures/offload-crypto (before.rec, after.rec and before.proj.json)."""
    import shutil

    from conftest import FIXTURES

    dst = tmp_path_factory.mktemp("pair")
    for name in ("before.rec", "after.rec", "before.proj.json"):
        shutil.copy(FIXTURES / PAIR / name, dst / name)
    return dst


def _report(pair, *args):
    import subprocess

    from conftest import PYTHON

    res = subprocess.run([PYTHON, "-m", "dpuprof", "report", "before.rec", "after.rec", "-q", *args], cwd=pair,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_fixture_pair_is_checked_in_json(pair):
    import json

    chk = json.loads(_report(pair, "--format", "json"))["projection_check"]
    assert chk["made"] and chk["cpu_unit"] == "CPU s per step"
    sp = chk["speedup"]
    assert sp["ci95"][0] <= sp["measured"] <= sp["ci95"][1] and sp["a_steps"] >= PC.MIN_STEPS
    assert sp["verdict"] == "inside the range" or sp["verdict"].startswith("outside by ")
    assert chk["by_category"]["crypto"]["projected"] == 0.0  # ideal --only crypto: all of it
    assert chk["by_mechanism"]["ideal"]["subcategories"] == ["crypto.user"]


def test_the_fixture_pair_is_checked_in_terminal_markdown_and_html(pair):
    from dpuprof.render.check_rows import TITLE

    text = _report(pair)
    assert TITLE in text and "Speedup: measured" in text and "projected low" in text
    markdown = _report(pair, "--format", "markdown")
    assert f"## {TITLE.replace(chr(39), '&#x27;')}" in markdown or "## Projection check" in markdown
    assert "| Workload CPU | A (before) | Projected B | Measured B | Error | Error % |" in markdown
    _report(pair, "-o", "check.html")
    html = (pair / "check.html").read_text()
    assert 'id="projection-check"' in html and 'class="check-chart"' in html
    assert '"projection_check":{"a":"before"' in html  # the page's JSON carries it too


def test_without_the_projection_the_pair_says_so_and_still_compares(pair, tmp_path):
    import shutil

    for name in ("before.rec", "after.rec"):
        shutil.copy(pair / name, tmp_path / name)
    text = _report(tmp_path)
    assert "! projection check not made: no projection of A (before)" in text
    assert "Share of busy CPU, A -> B" in text
