"""The projection check on a real before/after pair: validation cell c_inline_w1 (inline decryption
on the rank thread, crypto removed by ``--emulate crypto=remove``; benchmarks/VALIDATION.md).

It records A (the baseline) and B (the emulated offload) with ``dpuprof record``, projects A with
the one-category ideal profile as the validation harness does, and checks that ``dpuprof report A
B`` makes the check: both runs are timed by their steps, A's projected range lies above 1 and B's
crypto is gone. Whether one pair's speedup lies inside
the cell's bootstrap 95 % interval of the median of many pairs is a timing question, so it is
benchmarks/validate_projection.py's (VALIDATION.md): one 6-s pair (the runs were 6 s then) fell outside it in 2 of 3 full
suite runs on 2026-12-05 (1.802x and 1.267x against 1.271-1.780). Runs are short (3 s of training)
to keep the test near a minute; the shards are written first, outside the recordings.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import PYTHON, REPO, dpuprof

CELL = "c_inline_w1"
TRAIN = [PYTHON, str(REPO / "examples" / "train_ddp.py"), "--variant", "encrypted", "--world-size", "1",
         "--workers", "0", "--shards", "8", "--seed", "0", "--mark-step"]


def _cell() -> dict:
    doc = json.loads((REPO / "benchmarks" / "validation.json").read_text())
    return next(c for c in doc["cells"] if c["id"] == CELL)


@pytest.mark.root
def test_the_check_agrees_with_the_validation_cell(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("cryptography")
    cell = _cell()
    # The cell's verdict moves with its noisy pairs (it passed on 2026-12-06 and at 04:30 on
    # 2026-12-07, and failed at 21:00 on 1.437 measured against the model's unchanged 1.311:
    # benchmarks/validation/ANALYSIS.md); what this test needs of it is a recording that the model
    # projects a speedup for, inline on the rank.
    assert cell["model"]["regime"] == "inline" and cell["model"]["low"] > 1.0, cell["model"]
    data = ["--data-dir", str(tmp_path / "data")]
    for extra in ([], ["--emulate", "crypto=remove"]):  # the ciphertext, and the plaintext B reads
        subprocess.run([*TRAIN, *extra, *data, "--generate-only"], check=True, capture_output=True, timeout=300)
    run = [*data, "--duration", "3", "--warmup-s", "0.5"]
    for name, extra in (("before", []), ("after", ["--emulate", "crypto=remove"])):
        # --wait-duty always: a 3-s run's steady window holds about one second in which the
        # default 1s/4s measures waits; the test is of the check, not of that sample. (Its flips
        # to 1.0002x on 2026-12-07 were the launcher taken for a rank: paths.launchers.)
        dpuprof("record", "--codec-uprobes", "--wait-duty", "always", "-q", "-o", tmp_path / f"{name}.rec", "--",
                *TRAIN, *extra, *run,
                check=True, cwd=tmp_path, timeout=300)
    dpuprof("project", "before.rec", "--dpu", "ideal", "--only", "crypto", check=True, cwd=tmp_path)
    res = dpuprof("report", "before.rec", "after.rec", "--format", "json", "-q", check=True, cwd=tmp_path)
    chk = json.loads(res.stdout)["projection_check"]
    assert chk["made"], chk["cannot"]
    measured, want = chk["speedup"]["measured"], cell["measured"]
    print(f"the check measured {measured:.3f}x; {CELL} in VALIDATION.md: {want['median']:.3f}x "
          f"({want['ci_low']:.3f}-{want['ci_high']:.3f}); its speedup: {chk['speedup']}")
    # Whether B is faster in one short pair is a timing question (under the suite's second worker one
    # pair measured 0.976x in CI on 2026-12-07 against the cell's 1.258-1.354): VALIDATION.md's. The
    # test checks what the check computes: both runs timed by their steps, the measurement inside
    # its own interval, and a projected range above 1 once A's crypto is taken away.
    sp = chk["speedup"]
    assert sp["a_steps"] >= 2 and sp["b_steps"] >= 2, sp
    assert sp["ci95"][0] <= measured <= sp["ci95"][1], sp
    assert sp["projected"]["low"] > 1.0 and sp["projected"]["low"] <= sp["projected"]["expected"], sp
    assert sp["inside"] == (sp["projected"]["low"] <= measured <= sp["projected"]["high"]), sp
    assert chk["by_category"]["crypto"]["measured"] < 0.1 * chk["by_category"]["crypto"]["before"]
