"""One validation run: the machine's description and each cell's pairs, recording, projection and
verdict, gathered into the document that report.write renders."""

from __future__ import annotations

import os
import platform
import random
import subprocess
import traceback

from . import runner, stats
from .cells import Cell
from .report import judge

RECORD_BYTES = 1 << 20  # examples/train_ddp.py: one AES-GCM record per MiB of a shard


def machine() -> dict:
    """Host, CPU model, CPU count, memory, kernel, python and the repository's commit."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", str(runner.ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "?"
    return {"node": platform.node(), "cpu_model": model, "cpus": os.cpu_count(),
            "mem_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            "kernel": platform.release(), "python": platform.python_version(), "commit": commit}


def engine_overrides(base_proj: dict, rec_result: dict | None) -> dict | None:
    """For the engine-latency cells: count one offload per 1 MiB record (n_from = cpu_chunks), at the
    host's decryption rate measured on the baseline recording: bytes the job decrypted (steps x
    file bytes per step per rank x ranks, from its own --json result) / the recording's crypto CPU
    seconds. None when either is missing."""
    crypto_s = base_proj.get("by_category", {}).get("crypto", {}).get("before_s")
    if not rec_result or not crypto_s:
        return None
    decrypted = rec_result["steps"] * rec_result["file_bytes_per_step_per_rank"] * rec_result["world_size"]
    rate = decrypted / crypto_s
    return {"n_from": "cpu_chunks", "chunk_bytes": RECORD_BYTES, "host_bytes_per_cpu_s": round(rate),
            "host_bytes_per_cpu_s_source": "measured by benchmarks/validate_projection.py on the "
            "baseline recording: bytes decrypted / crypto CPU seconds"}


def _model(cell: Cell, out: dict, opts: runner.RunOptions) -> dict:
    """Record the baseline and project it; the model's numbers (placebo: 1.0 by construction)."""
    if cell.category is None:
        out["notes"].append("placebo: no offload, so the model is 1.0 (low = expected = high)")
        return {"expected": 1.0, "low": 1.0, "high": 1.0, "regime": "n/a (placebo)",
                "contention_proxy": 1.0, "proxy_source": "none (placebo)"}
    if os.geteuid() != 0:
        out["notes"].append("not root: the baseline was not recorded, the model is not judged")
        return {}
    out["record"] = runner.record(cell, opts)
    return project_recorded(cell, out, opts)


def project_recorded(cell: Cell, out: dict, opts: runner.RunOptions) -> dict:
    """Project the baseline recording ``out["record"]["rec"]`` (appending to ``out["projections"]``)
    and return the model's numbers."""
    first = runner.project(cell, out["record"]["rec"], opts)
    out["projections"].append(first)
    proj = first["projection"]
    if cell.profile:
        extra = engine_overrides(proj, out["record"].get("result"))
        if extra is None:
            out["notes"].append("engine cell: no crypto CPU or no baseline result; n = 0 offloads")
        else:
            second = runner.project(cell, out["record"]["rec"], opts, extra)
            out["projections"].append(second)
            proj = second["projection"]
            out["notes"].append(f"engine cell: n = one offload per MiB at a measured "
                                f"{extra['host_bytes_per_cpu_s'] / 1e9:.2f} GB per crypto CPU-second")
    fields = runner.speedup_fields(proj)
    if fields["regime"] is None:
        out["notes"].append("the projection names no regime yet (n/a); the proxy column is its expected")
    return fields


def run_cell(cell: Cell, opts: runner.RunOptions, n_pairs: int, rng: random.Random, seed: int,
             say) -> dict:
    """Pairs, statistics, the baseline's recording and projection, and the verdict of one cell.
    A failure is kept in the cell's "error" (with the traceback's tail) so later cells still run."""
    out = {"id": cell.id, "title": cell.title, "regime": cell.regime, "note": cell.note,
           "category": cell.category, "notes": [], "projections": [],
           "commands": {"a": opts.train_cmd(cell, "a"), "b": opts.train_cmd(cell, "b")},
           "load_before": runner.loadavg()}
    try:
        runner.prepare_data(cell, opts)
        out["pairs"] = runner.run_pairs(cell, opts, n_pairs, rng, say)
        out["measured"] = stats.median_ci(stats.ratios(out["pairs"]), seed=seed)
        out["model"] = _model(cell, out, opts)
        out["judged"] = judge(out["measured"]["median"], out["measured"], out["model"],
                              placebo=cell.category is None)
        j, m = out["judged"], out["measured"]
        say(f"[{cell.id}] measured {m['median']:.3f} ({m['ci_low']:.3f}-{m['ci_high']:.3f}), "
            f"expected {out['model'].get('expected')}, pass {j['passed']}")
    except Exception as err:  # noqa: BLE001 - one failed cell must not lose the others
        out["error"] = f"{type(err).__name__}: {err}\n{traceback.format_exc()[-1500:]}"
        say(f"[{cell.id}] FAILED: {err}")
    out["load_after"] = runner.loadavg()
    return out


def reproject(cell: Cell, out: dict, opts: runner.RunOptions, seed: int) -> None:
    """Re-evaluate the model of an already measured cell on its kept baseline recording, with the
    dpuprof of this checkout: the measurement is unchanged, the first run's model numbers are kept in
    ``model_first_run``."""
    if "record" not in out or "measured" not in out:
        return
    out.setdefault("model_first_run", out.get("model"))
    out["projections"] = []
    out["notes"] = [n for n in out["notes"] if not n.startswith("engine cell:")]
    out["model"] = project_recorded(cell, out, opts)
    out["judged"] = judge(out["measured"]["median"], out["measured"], out["model"], placebo=cell.category is None)
