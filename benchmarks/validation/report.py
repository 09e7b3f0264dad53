"""Judging each cell against issue 10's targets, and writing VALIDATION.md and validation.json."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from pathlib import Path

TOL_REL = 0.05  # |expected - measured| <= max(5 % of measured, CI half-width)


def judge(measured: float, ci: dict, model: dict, placebo: bool = False) -> dict:
    """Pass/fail of one cell.

    - in_range: low <= measured <= high (high None = unbounded). For the A/A placebo, whose model is
      exactly 1.0, the point test is replaced by "the CI contains 1.0".
    - close: |expected - measured| <= tol, tol = max(5 % of measured, the CI half-width).
    - proxy_close: the same test for the old T/(T-F) proxy (False = the proxy fails here).
    - passed: in_range and close. Missing model numbers give None (not judged)."""
    tol = max(TOL_REL * measured, ci["ci_half_width"])
    exp, low, high, proxy = (model.get(k) for k in ("expected", "low", "high", "contention_proxy"))
    if placebo:
        in_range = ci["ci_low"] <= 1.0 <= ci["ci_high"]
    elif low is None:
        in_range = None
    else:
        in_range = low <= measured <= (math.inf if high is None else high)
    close = None if exp is None else abs(exp - measured) <= tol
    proxy_close = None if proxy is None else abs(proxy - measured) <= tol
    passed = None if in_range is None or close is None else bool(in_range and close)
    return {"tolerance": tol, "in_range": in_range, "close": close, "proxy_close": proxy_close,
            "passed": passed, "error_pct": None if exp is None else 100.0 * (exp - measured) / measured,
            "proxy_error_pct": None if proxy is None else 100.0 * (proxy - measured) / measured}


def _f(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def _yn(x, yes="yes", no="**no**"):
    return "-" if x is None else (yes if x else no)


_SCRATCH = {"dir": None}


def _cmd(cmd: list[str]) -> str:
    """A command as the user would type it: python3, paths inside the repository relative to it, and
    the run's temp dir as $SCRATCH (validation.json keeps the exact argv)."""
    root = str(Path(__file__).resolve().parents[2]) + os.sep
    words = []
    for k, c in enumerate(cmd):
        if c == sys.executable and (k == 0 or cmd[k - 1] == "--"):
            c = "python3"
        c = c.replace(root, "")
        if _SCRATCH["dir"]:
            c = c.replace(_SCRATCH["dir"], "$SCRATCH")
        words.append(c if c.startswith("$SCRATCH") and " " not in c else shlex.quote(c))
    return " ".join(words)


def summary_table(cells: list[dict]) -> list[str]:
    head = ("| cell | measured B/A (95 % CI) | expected | low | high | old T/(T-F) proxy | regime (model) "
            "| in [low, high] | \\|exp - meas\\| <= tol | pass | proxy |")
    rows = [head, "|" + "---|" * 11]
    for c in cells:
        if "measured" not in c:
            rows.append(f"| {c['id']} | failed: {c.get('error', '?').splitlines()[0][:80]} |" + " - |" * 9)
            continue
        m = ci = c["measured"]
        mod, j = c.get("model", {}), c.get("judged", {})
        proxy = _f(mod.get("contention_proxy"))
        if j.get("proxy_close") is False:
            proxy += " (fails)"
        rows.append(
            f"| {c['id']} | {m['median']:.3f} ({ci['ci_low']:.3f}-{ci['ci_high']:.3f}) | "
            f"{_f(mod.get('expected'))} | {_f(mod.get('low'))} | {_f(mod.get('high'))} | {proxy} | "
            f"{mod.get('regime') or 'n/a'} | {_yn(j.get('in_range'))} | {_yn(j.get('close'))} | "
            f"{_yn(j.get('passed'), 'PASS', '**FAIL**')} | {_yn(j.get('proxy_close'), 'ok', 'fails')} |")
    return rows


def cell_section(c: dict) -> list[str]:
    note = c.get("note", "")
    note = note[:1].upper() + note[1:] + ("." if note and not note.endswith(".") else "")
    out = [f"### {c['id']}: {c['title']}", "", f"Built to exercise: {c['regime']}. {note}".rstrip(), ""]
    out += [f"- A: `{_cmd(c['commands']['a'])}`", f"- B: `{_cmd(c['commands']['b'])}`"]
    if c.get("record"):
        out.append(f"- record: `{_cmd(c['record']['command'])}`")
        base = (c["record"].get("result") or {}).get("steady_steps_per_s")
        if base:
            out.append(f"  (the baseline ran at {base:.3f} steady steps/s under the recorder)")
    for p in c.get("projections", []):
        out.append(f"- project ({p['method']}): `{_cmd(p['command'])}`")
        for why in p.get("fallback_reasons", []):
            out.append(f"  (fallback: {why})")
    for note in c.get("notes", []):
        out.append(f"- {note}")
    if c.get("error"):
        out += ["", "```", c["error"][-1500:], "```"]
    if c.get("pairs"):
        out += ["", "| pair | order | A steps/s | B steps/s | B/A | load 1 min |", "|---|---|---:|---:|---:|---:|"]
        for k, p in enumerate(c["pairs"], 1):
            out.append(f"| {k} | {p['order']} | {p['a']:.3f} | {p['b']:.3f} | {p['ratio']:.3f} | {p['load1']:.2f} |")
    return out + [""]


def markdown(doc: dict) -> str:
    m = doc["machine"]
    _SCRATCH["dir"] = doc.get("scratch")
    lines = ["# Validation of `dpuprof project` against emulated offloads", "",
             "Generated by `benchmarks/validate_projection.py` (issue 10, section 3); every number below "
             "comes from this run (validation.json holds the per-pair raw numbers).", "",
             "## Machine and run", "",
             f"- date (UTC): {doc['started']} to {doc['finished']}",
             f"- host: {m['node']}, {m['cpu_model']}, {m['cpus']} CPUs, {m['mem_gib']:.1f} GiB; kernel {m['kernel']}",
             f"- python {m['python']}, torch {m.get('torch', '?')}, dpuprof commit {m['commit']}",
             f"- load average before: {doc['load_before']}, after: {doc['load_after']} "
             f"(threshold {doc['settings']['max_load']}; {doc['load_verdict']})",
             f"- command: `{doc['command']}`; $SCRATCH below is its temp dir ({doc.get('scratch')}, removed "
             "at the end)",
             *([f"- model re-evaluated on the same baseline recordings at {doc['reprojected']['at']} with "
                f"dpuprof commit {doc['reprojected']['commit']} (`--reproject`): the measurements are the "
                "run's own; the first run's model numbers are under \"Model revisions\" below"]
               if doc.get("reprojected") else []),
             f"- settings: {doc['settings']['pairs']} interleaved pairs per cell (random order per pair, "
             f"seed {doc['settings']['seed']}), runs of {doc['settings']['duration_s']:g} s with the first "
             f"{doc['settings']['warmup_s']:g} s excluded (steady steps/s), bootstrap 95 % CI of the median "
             f"of per-pair ratios ({doc['settings']['n_boot']} resamples)", "",
             "## Targets", "",
             "- the measured speedup inside the model's [low, high] (placebo: the CI contains 1.0);",
             "- |expected - measured| <= max(5 % of measured, CI half-width);",
             "- the old CPU-contention proxy T/(T-F) is shown failing where it misses by more than the "
             "same tolerance. Where the projection has no `contention_proxy` yet, the proxy column is "
             "its `expected` (the old formula) and the regime is n/a.", "",
             "## Results", ""]
    lines += summary_table(doc["cells"])
    n = [c for c in doc["cells"] if c.get("judged", {}).get("passed") is not None]
    lines += ["", f"{sum(c['judged']['passed'] for c in n)} of {len(n)} judged cells pass; "
              f"the proxy misses in {sum(c['judged']['proxy_close'] is False for c in n)}.", "",
              "## Cells", ""]
    for c in doc["cells"]:
        lines += cell_section(c)
    lines += revisions(doc["cells"])
    analysis = Path(__file__).with_name("ANALYSIS.md")  # the hand-written analysis of the last run
    if analysis.exists():
        lines += ["", analysis.read_text().rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def revisions(cells: list[dict]) -> list[str]:
    """The model's numbers at the first run beside the re-evaluated ones, for cells that have both."""
    rows = [c for c in cells if c.get("model_first_run")]
    if not rows:
        return []
    out = ["## Model revisions", "",
           "The model as it projected during the run, and as re-evaluated on the same recordings:", "",
           "| cell | measured | first-run expected [low, high] | re-evaluated expected [low, high] |",
           "|---|---:|---:|---:|"]
    for c in rows:
        a, b = c["model_first_run"], c["model"]
        out.append(f"| {c['id']} | {_f(c['measured']['median'])} | {_f(a.get('expected'))} "
                   f"[{_f(a.get('low'))}, {_f(a.get('high'))}] | {_f(b.get('expected'))} "
                   f"[{_f(b.get('low'))}, {_f(b.get('high'))}] |")
    return out + [""]


def write(doc: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write VALIDATION.md and validation.json into out_dir (atomically: temp file, then rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "VALIDATION.md", out_dir / "validation.json"
    for path, text in ((js, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"),
                       (md, markdown(doc))):
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return md, js
