"""Running a cell: the load check, interleaved A/B pairs of examples/train_ddp.py, and the
baseline's recording and one-category projection with this repository's dpuprof."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .cells import Cell

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "train_ddp.py"
IDEAL = ROOT / "dpuprof" / "data" / "dpu" / "ideal.toml"
PYTHON = sys.executable


@dataclass(frozen=True)
class RunOptions:
    """How long each run is and where its scratch goes (a temp dir, never the repository).
    ``shards``, when set, replaces the cells' shard count (--quick: fewer shards to write; each step
    still reads one whole shard, so a step's work is the same)."""

    duration_s: float
    warmup_s: float
    data_dir: Path
    scratch: Path
    shards: int | None = None

    def data_args(self, cell: Cell, side: str) -> list[str]:
        """train_ddp.py's arguments that choose the data: the cell's, then the shard count override
        (argparse keeps the last --shards)."""
        return [*cell.args(side), *(["--shards", str(self.shards)] if self.shards else [])]

    def train_cmd(self, cell: Cell, side: str) -> list[str]:
        return [PYTHON, str(TRAIN), *self.data_args(cell, side), "--json", "--data-dir", str(self.data_dir),
                "--duration", f"{self.duration_s:g}", "--warmup-s", f"{self.warmup_s:g}"]


def env() -> dict:
    """This tree's dpuprof first on the path (the editable install may point at another checkout)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return e


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (/proc/loadavg)."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def last_json(stdout: str) -> dict:
    """The last line of stdout that is a JSON object (train_ddp.py --json prints one)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON result in the output")


def run_train(cmd: list[str], timeout_s: float) -> dict:
    """Run one train_ddp.py command; its JSON result (steady_steps_per_s etc.) plus wall_s.
    Raises RuntimeError with the tail of stderr when it fails or reports no steady window."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env(), cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    res = last_json(proc.stdout)
    if not res.get("steady_steps_per_s"):
        raise RuntimeError(f"no steady window ({res.get('steps')} steps): lengthen --duration")
    res["wall_s"] = round(wall, 3)
    return res


def prepare_data(cell: Cell, opts: RunOptions) -> None:
    """Write (or reuse) the shards both sides of the cell read, outside the timed runs."""
    for side in ("a", "b"):
        cmd = [PYTHON, str(TRAIN), *opts.data_args(cell, side), "--data-dir", str(opts.data_dir), "--generate-only"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env(), cwd=ROOT)
        if proc.returncode != 0:
            raise RuntimeError(f"data generation failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")


def run_pairs(cell: Cell, opts: RunOptions, n_pairs: int, rng: random.Random, say) -> list[dict]:
    """n_pairs interleaved pairs: each pair runs A and B back to back in a random order.

    Returns one dict per pair: a, b (steady steps/s), ratio (b/a), order ("AB" or "BA"), load1
    (1-minute load average before the pair), and each run's JSON result (a_run, b_run)."""
    timeout = opts.duration_s + 300
    pairs = []
    for k in range(n_pairs):
        order = rng.choice(("AB", "BA"))
        load1 = loadavg()[0]
        got = {}
        for side in order.lower():
            got[side] = run_train(opts.train_cmd(cell, side), timeout)
        a, b = got["a"]["steady_steps_per_s"], got["b"]["steady_steps_per_s"]
        pairs.append({"a": a, "b": b, "ratio": b / a, "order": order, "load1": load1,
                      "a_run": got["a"], "b_run": got["b"]})
        say(f"[{cell.id}] pair {k + 1}/{n_pairs} ({order}): A {a:.3f} B {b:.3f} steps/s, "
            f"B/A {b / a:.3f}, load {load1:.2f}")
    return pairs


# ------------------------------------------------------------------ recording and projection

def one_category_profile(category: str, overrides: dict, path: Path) -> Path:
    """Write dpuprof's ideal profile restricted to one category (applies_to = ["CATEGORY.*"]), with
    mechanism fields overridden: mode, L_ns, and n_from/chunk_bytes/host_bytes_per_cpu_s. The text
    edits keep every cited source of the shipped profile."""
    text = IDEAL.read_text()
    lines, out, section, named = text.splitlines(), [], "", False
    for line in lines:
        s = line.strip()
        if s.startswith("["):
            section = s.strip("[]")
        if not named and s.startswith("name ="):
            line, named = f'name = "ideal-{category}"', True
        elif s.startswith("applies_to ="):
            line = f'applies_to = ["{category}.*"]'
        elif s.startswith("n_from =") and "n_from" in overrides:
            line = f'n_from = "{overrides["n_from"]}"'
        elif section == "mechanism.mode" and "mode" in overrides and s.startswith(("value =", "source =")):
            line = (f'value = "{overrides["mode"]}"' if s.startswith("value") else
                    'source = "benchmarks/validation: the emulated engine\'s mode (--emulate crypto=...)"')
        elif section == "mechanism.L_ns" and "L_ns" in overrides and s.startswith(("value =", "source =")):
            line = (f"value = {overrides['L_ns']}" if s.startswith("value") else
                    'source = "benchmarks/validation: the emulated engine\'s wait per MiB record"')
        out.append(line)
    for key in ("chunk_bytes", "host_bytes_per_cpu_s"):
        if key in overrides:
            out += [f"[mechanism.{key}]", f"value = {overrides[key]}",
                    f'source = "{overrides.get(key + "_source", "benchmarks/validation: emulated engine")}"']
    path.write_text("\n".join(out) + "\n")
    return path


def record(cell: Cell, opts: RunOptions) -> dict:
    """Record the baseline once: ``python3 -m dpuprof record -o CELL.rec -q -- <A>``.
    Returns {"command", "rec", "result" (the baseline's JSON under the recorder), "wall_s"}."""
    rec = opts.scratch / f"{cell.id}.rec"
    cmd = [PYTHON, "-m", "dpuprof", "record", "--codec-uprobes", "-o", str(rec), "-q", "--", *opts.train_cmd(cell, "a")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.duration_s + 600, env=env(),
                          cwd=ROOT)
    if proc.returncode != 0 or not rec.exists():
        raise RuntimeError(f"record failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    try:
        result = last_json(proc.stdout)
    except ValueError:
        result = None
    return {"command": cmd, "rec": str(rec), "result": result,
            "wall_s": round(time.perf_counter() - t0, 3)}


def _project_cmd(rec: str, out: Path, dpu: str, only: str | None) -> list[str]:
    cmd = [PYTHON, "-m", "dpuprof", "project", rec, "--dpu", dpu]
    if only:
        cmd += ["--only", only]
    return cmd + ["--format", "json", "-o", str(out)]


def project(cell: Cell, rec: str, opts: RunOptions, overrides: dict | None = None) -> dict:
    """Project the recording with a one-category ideal offload of cell.category.

    Uses ``--dpu ideal --only CATEGORY`` where dpuprof has it; where ``--only`` is rejected, or the
    cell overrides profile fields, a one-category profile written into the scratch dir. Returns
    {"command", "method", "profile" (path or "ideal"), "projection" (the JSON)}."""
    overrides = dict(cell.profile, **(overrides or {}))
    out = opts.scratch / f"{cell.id}.proj.json"
    attempts = []
    if not overrides:
        attempts.append(("--only", _project_cmd(rec, out, "ideal", cell.category)))
    prof = one_category_profile(cell.category, overrides, opts.scratch / f"{cell.id}.dpu.toml")
    attempts.append(("profile file", _project_cmd(rec, out, str(prof), None)))
    errors = []
    for method, cmd in attempts:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env(), cwd=ROOT)
        if proc.returncode == 0:
            return {"command": cmd, "method": method, "profile": "ideal" if method == "--only" else str(prof),
                    "projection": json.loads(out.read_text()), "fallback_reasons": errors}
        errors.append(f"{method}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    raise RuntimeError("projection failed: " + "; ".join(errors))


def speedup_fields(proj: dict) -> dict:
    """The model's numbers from a projection's ``speedup`` block: expected, low, high, regime and the
    old T/(T-F) proxy (``contention_proxy``; where the projection has none yet, ``expected`` is that
    proxy, and regime is None: "n/a")."""
    sp = proj.get("speedup", {})
    proxy = sp.get("contention_proxy")
    has_proxy = proxy is not None
    return {"expected": sp.get("expected"), "low": sp.get("low"), "high": sp.get("high"),
            "regime": sp.get("regime"), "contention_proxy": proxy if has_proxy else sp.get("expected"),
            "proxy_source": "speedup.contention_proxy" if has_proxy else "speedup.expected (no contention_proxy)"}
