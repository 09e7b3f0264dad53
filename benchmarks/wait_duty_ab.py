#!/usr/bin/env python3
"""Does sampling the waits (``record --wait-duty``, issue 32) change the projection? An A/B on the
baselines of a kept validation run (benchmarks/validate_projection.py).

For each cell of VALIDATION_JSON that was recorded and measured, record its baseline (the run's own
``dpuprof record`` command) with ``--wait-duty always`` (or the record options of ``--against``)
and with the defaults, interleaved (the order swapped every rep), ``--reps`` times each, project
each recording with the run's own ``dpuprof project`` command, and print a markdown table: the
model's expected [low, high] and regime per recording, beside the run's measured speedup.
Recordings and projections go to a temp dir that is removed at the end. The cells' data
(train_ddp.py's shards) must still be where the run left them: run validate_projection.py with
--keep-scratch.

    sudo python3 benchmarks/validate_projection.py --engine-cells --keep-scratch --out /tmp/val
    sudo python3 benchmarks/wait_duty_ab.py /tmp/val/validation.json --reps 2 --cells b_loader_bound,g_network
    sudo python3 benchmarks/wait_duty_ab.py /tmp/val/validation.json --against "--interval 1 --wait-duty 1s/4s"

``--beside OTHER_JSON`` records nothing: it prints the two validation runs' cells side by side
(measured, the model's expected [low, high] and regime, pass), for a run with each setting.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGAINST = "--wait-duty always"  # the record options compared with the defaults, unless --against


def _setting(doc: dict) -> str:
    """A validation run's label: the --wait-duty of its record command, else its dpuprof commit
    (whose default it used)."""
    cmd = next((c["record"]["command"] for c in doc["cells"] if "record" in c), [])
    return cmd[cmd.index("--wait-duty") + 1] if "--wait-duty" in cmd else doc["machine"]["commit"]


def _swap(cmd: list[str], old: str, new: str) -> list[str]:
    return [new if a == old else a for a in cmd]


def run_cell(cell: dict, reps: int, tmp: Path, modes: dict[str, list[str]]) -> dict[str, list[dict]]:
    """{mode: [the projection's speedup block per rep]} for one validation cell, recorded with each
    of ``modes`` {label: extra record options}."""
    rec_cmd, proj_cmd = cell["record"]["command"], cell["projections"][0]["command"]
    rec0 = rec_cmd[rec_cmd.index("-o") + 1]
    out0 = proj_cmd[proj_cmd.index("-o") + 1]
    got: dict[str, list[dict]] = {mode: [] for mode in modes}
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for rep in range(reps):
        for i, mode in enumerate(modes if rep % 2 == 0 else reversed(list(modes))):
            rec, proj = tmp / f"{cell['id']}.{i}.{rep}.rec", tmp / f"{cell['id']}.{i}.{rep}.json"
            at = rec_cmd.index("--")  # the option goes before the command
            cmd = _swap(rec_cmd[:at], rec0, str(rec)) + modes[mode] + rec_cmd[at:]
            subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=True)
            subprocess.run(_swap(_swap(proj_cmd, rec0, str(rec)), out0, str(proj)), capture_output=True,
                           text=True, env=env, cwd=REPO, check=True)
            got[mode].append(json.loads(proj.read_text())["speedup"])
    return got


def beside(docs: list[tuple[str, dict]]) -> list[str]:
    """Markdown rows: each cell of the first run beside the same cell of the others."""
    head = " | ".join(f"{name}: measured (95 % CI) | {name}: expected [low, high], regime | pass" for name, _ in docs)
    lines = [f"| cell | {head} |", "|---|" + "---|---|---|" * len(docs)]
    by_id = [{c["id"]: c for c in doc["cells"]} for _, doc in docs]
    for cid, first in by_id[0].items():
        if "measured" not in first:
            continue
        cells = []
        for cells_of in by_id:
            c = cells_of.get(cid)
            if c is None or "measured" not in c:
                cells.append("- | - | -")
                continue
            m, mo = c["measured"], c["model"]
            cells.append(f"{m['median']:.3f} ({m['ci_low']:.3f}-{m['ci_high']:.3f}) | {mo['expected']:.3f} "
                         f"[{mo['low']:.3f}, {mo['high']:.3f}] {mo['regime'] or 'n/a'} | "
                         f"{'PASS' if c['judged']['passed'] else 'fail'}")
        lines.append(f"| {cid} | " + " | ".join(cells) + " |")
    for name, doc in docs:
        judged = [c for c in doc["cells"] if "judged" in c]
        lines.append(f"\n{name} (started {doc['started']}): "
                     f"{sum(c['judged']['passed'] for c in judged)} of {len(judged)} cells pass.")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("validation_json")
    p.add_argument("--reps", type=int, default=2, help="recordings per mode and cell (default 2)")
    p.add_argument("--cells", default=None, help="comma-separated cell ids (default: every measured cell)")
    p.add_argument("--against", default=AGAINST, metavar="OPTIONS",
                   help=f"record options compared with the defaults (default: {AGAINST!r})")
    p.add_argument("--beside", default=None, metavar="OTHER_JSON",
                   help="print the two runs side by side instead of recording")
    args = p.parse_args(argv)
    doc = json.loads(Path(args.validation_json).read_text())
    if args.beside:
        other = json.loads(Path(args.beside).read_text())
        print("\n".join(beside([(_setting(doc), doc), (_setting(other), other)])))
        return 0
    wanted = set(args.cells.split(",")) if args.cells else None
    modes = {args.against: shlex.split(args.against), "defaults": []}
    tmp = Path(tempfile.mkdtemp(prefix="dpuprof-waitduty-"))
    print("| cell | measured B/A (95 % CI) | record options | expected [low, high], regime, per recording |")
    print("|---|---|---|---|")
    try:
        for cell in doc["cells"]:
            if "record" not in cell or "measured" not in cell or (wanted and cell["id"] not in wanted):
                continue
            m = cell["measured"]
            for mode, blocks in run_cell(cell, args.reps, tmp, modes).items():
                shown = "; ".join(f"{b['expected']:.3f} [{b['low']:.3f}, {b['high']:.3f}] {b['regime']}"
                                  for b in blocks)
                print(f"| {cell['id']} | {m['median']:.3f} ({m['ci_low']:.3f}-{m['ci_high']:.3f}) | {mode} | {shown} |",
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
