"""Root test: short-lived helpers are classified like a long-lived process doing the same work.

A shell starts 20 ``openssl enc -des-ede3-cbc`` processes in turn, each enciphering a 6-MB file
(about 0.3 s here), so every one exits before the recorder's next 1-s drain; a second recording
runs one ``openssl`` over the 20 files' bytes. Each helper's user frames can only be resolved from
the maps read while it ran (record/drain/execs.py): before that capture, 58 % of their samples
had an ``[unknown]`` leaf filed as compute.other and their crypto share was 40 % against 96 %
(95 % against 98 % with it).
What remains between the two is each helper's own start-up and exit (ld.so relocation, page
faults, exit_mmap): real work that a long-lived process does once.
"""

from __future__ import annotations

import sqlite3

import pytest

from conftest import dpuprof

pytestmark = pytest.mark.root
HELPERS = 20
CHUNK = 6 << 20
KEY, IV = "00112233445566778899aabbccddeeff0011223344556677", "0011223344556677"
ENC = f"openssl enc -des-ede3-cbc -K {KEY} -iv {IV} -out /dev/null -in"


def _openssl_samples(rec) -> dict:
    """The workload's ``openssl`` samples: total, crypto, whose leaf user frame has no module
    (``[unknown]`` alone: the maps missed it), and how many processes they came from."""
    with sqlite3.connect(rec) as db:
        rows = db.execute(
            "SELECT ss.pid, ss.category, s.folded, ss.samples FROM v_stack_samples ss "
            "JOIN stacks s USING (stack_id) JOIN processes p ON p.pid = ss.pid "
            "WHERE p.in_workload = 1 AND ss.comm = 'openssl'").fetchall()
    out = {"samples": 0, "crypto": 0, "unresolved": 0, "pids": set()}
    for pid, category, folded, n in rows:
        user = [f for f in folded.split(";") if not f.endswith("_[k]")]
        out["samples"] += n
        out["crypto"] += n if category == "crypto" else 0
        out["unresolved"] += n if user and user[-1] == "[unknown]" else 0
        out["pids"].add(pid)
    return out


def test_helpers_crypto_share_matches_one_long_lived_process(tmp_path):
    chunk = tmp_path / "chunk"
    chunk.write_bytes(bytes(range(256)) * (CHUNK // 256))
    whole = tmp_path / "whole"
    with open(whole, "wb") as fh:
        for _ in range(HELPERS):
            fh.write(chunk.read_bytes())
    runs = {"helpers": f"for i in $(seq {HELPERS}); do {ENC} {chunk}; done", "long": f"{ENC} {whole}"}
    got = {}
    for name, script in runs.items():
        rec = tmp_path / f"{name}.rec"
        proc = dpuprof("record", "-q", "-F", 499, "-o", rec, "--", "sh", "-c", script, timeout=240)
        assert proc.returncode == 0, proc.stderr
        got[name] = _openssl_samples(rec)
    helpers, long = got["helpers"], got["long"]
    assert len(helpers["pids"]) == HELPERS and len(long["pids"]) == 1, (helpers["pids"], long["pids"])
    assert helpers["samples"] > 500 and long["samples"] > 500, (helpers, long)
    share = {k: 100 * v["crypto"] / v["samples"] for k, v in got.items()}
    print(f"crypto % of openssl samples: {share}; unresolved leaf: {helpers['unresolved']}/{helpers['samples']}")
    assert share["long"] > 80, share  # the work is the cipher
    assert abs(share["helpers"] - share["long"]) <= 5, share
    assert helpers["unresolved"] / helpers["samples"] < 0.05, helpers
