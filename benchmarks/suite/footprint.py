"""Sections 3-5, what dpuprof leaves behind and how fast it starts: output size against perf.data
and the recorder's memory over one long run, start-up to the child's exec, and report time."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from dpuprof.recording import load

from .config import BENCH, PERF_RECORD, PYTHON, ROOT, Config, log
from .losses import missed_events, recursion_shares, stack_loss_minutes
from .runner import BackgroundPerf, bpf_stats, record_cmd, run_cmd, summarize
from .stats import median, rss_trend
from .workloads import ddp_workload, iperf3_workload


def rec_composition(path: Path) -> list[tuple[str, int]]:
    """Bytes per table and index of a recording (SQLite's dbstat), largest first."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
        con.close()
        return [(name, int(size)) for name, size in rows]
    except sqlite3.Error:
        return []


def rec_rows(path: Path) -> tuple[int, dict]:
    """A recording's distinct stacks, and its row counts: cpu_category (all, and the workload's),
    stack_samples, intervals, processes seen and the workload's processes."""
    loaded = load(path)
    cat_rows = loaded.table("cpu_category")
    wl_pids = set(loaded.workload_pids)
    return len(loaded.table("stacks")), {
        "cpu_category_rows": len(cat_rows),
        "cpu_category_rows_workload": int(cat_rows["pid"].isin(wl_pids).sum()),
        "stack_samples_rows": len(loaded.table("stack_samples")),
        "intervals": len(loaded.table("intervals")),
        "processes_seen": len(loaded.table("processes")), "workload_processes": len(wl_pids)}


def bench_long(cfg: Config, scratch: Path, data: Path) -> dict:
    """One run under `dpuprof record` (defaults) with `perf record -a -g -F 99` over the same time:
    the recorder's RSS and CPU over time, and both output sizes per minute. DDP training in the full
    suite; iperf3 in --quick (a smoke run has no time for the training's start-up)."""
    work = Path(tempfile.mkdtemp(prefix="long-", dir=scratch))
    rec, perf_data = work / "long.rec", work / "perf.data"
    if cfg.quick:
        workload = iperf3_workload(cfg.long_s)
    else:
        workload = ddp_workload(cfg.long_s, data, cfg)
    cmd, parse = workload.make(work)
    log(f"long run: {workload.name} for {cfg.long_s} s under dpuprof record and perf record -a -g together")
    perf = BackgroundPerf(perf_data)
    t0 = time.time()
    try:
        with bpf_stats() as enabled:
            res, sampler = run_cmd(record_cmd(rec, cmd), timeout=cfg.long_s + 600, rss=True, bpf=enabled,
                                   smaps_every=30.0)
    finally:
        dp_wall = time.time() - t0
        perf_wall = perf.stop()
    if res.returncode != 0:
        raise RuntimeError(f"long run failed ({res.returncode}): {res.stderr[-600:]}")
    rec_bytes = sum(p.stat().st_size for p in work.glob("long.rec*"))
    perf_bytes = perf_data.stat().st_size
    summary = summarize(rec)
    composition = rec_composition(rec)
    n_stacks, rows_info = rec_rows(rec)
    s = sampler.samples
    trend = rss_trend(s)
    metric, _units = parse(res.stdout)
    losses = long_losses(rec, sampler.bpf_programs())
    shutil.rmtree(work, ignore_errors=True)
    step = max(1, len(s) // 24)
    return {
        "workload": workload.name, "metric": metric, "unit": workload.unit,
        "duration_s": dp_wall, "perf_duration_s": perf_wall,
        "rec_bytes": rec_bytes, "perf_bytes": perf_bytes,
        "rec_mb_per_min": rec_bytes / 1e6 / (dp_wall / 60), "perf_mb_per_min": perf_bytes / 1e6 / (perf_wall / 60),
        "size_ratio": (perf_bytes / perf_wall) / (rec_bytes / dp_wall),
        "rec_composition": composition[:6], "stacks": n_stacks, "rows": rows_info,
        "lost_samples": summary["lost_samples"],
        "rss_peak_hwm_mb": trend["rss_peak_hwm_mb"], "rss_steady_max_mb": trend["rss_steady_max_mb"],
        "rss_slope_mb_per_min": trend["rss_slope_mb_per_min"],
        "rss_10min_estimate_mb": trend["rss_10min_estimate_mb"], "recorder_cpu_pct": sampler.cpu_pct_while_child(),
        "recorder_cpu_pct_second_half": trend["recorder_cpu_pct_second_half"], "bpf": sampler.bpf_cost(),
        "rss_file_mb_last": s[-1][5], "smaps_top": [(name, round(mb, 1)) for name, mb in sampler.smaps],
        "rss_series": [(round(x[0], 1), round(x[1], 1)) for x in s[::step]] + [(round(s[-1][0], 1), round(s[-1][1], 1))],
        **losses,
    }


def long_losses(rec: Path, programs: dict) -> dict:
    """The long run's ``stack_loss`` (losses.stack_loss_minutes), ``recursion`` (per program:
    losses.recursion_shares) and ``bpf_programs`` (``programs``: RssSampler.bpf_programs, with the
    kernel's own recursion_misses count per program). A section that cannot be read is
    ``{"error": why}``, so the rest of the run's results survive."""
    out: dict = {"bpf_programs": programs}
    for key, measure in (("stack_loss", lambda: stack_loss_minutes(rec)),
                         ("recursion", lambda: recursion_shares(missed_events(rec), programs))):
        try:
            out[key] = measure()
        except Exception as exc:  # noqa: BLE001 -- reported in results.json, judged "not measured"
            out[key] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _compiling() -> dict[str, str]:
    """This environment with the probe cache off (docs/probe-cache.md): every start compiles."""
    return os.environ | {"DPUPROF_PROBE_CACHE": "off"}


def bench_startup(cfg: Config, scratch: Path) -> dict:
    """Time from launching `dpuprof record -- date +%s.%N` to the moment `date` runs (it prints the
    time at its exec), against the same for a bare `date` and for `perf record -a -g`."""
    work = Path(tempfile.mkdtemp(prefix="startup-", dir=scratch))
    child = ["date", "+%s.%N"]
    conds = {"bare": child, "dpuprof": record_cmd(work / "s.rec", child),
             "dpuprof_compiled": record_cmd(work / "c.rec", child),
             "perf": [*PERF_RECORD, "-q", "-o", str(work / "perf.data"), "--", *child]}
    # By default the probes load from the entry an earlier start kept (docs/probe-cache.md; here a
    # cache of this run's, filled by one start before the timed ones); with the cache off every
    # start compiles.
    cached = os.environ | {"DPUPROF_PROBE_CACHE": str(work / "cache")}
    envs = {c: cached for c in conds} | {"dpuprof_compiled": _compiling()}
    run_cmd(conds["dpuprof"], timeout=120, env=cached)
    times = {c: [] for c in conds}
    for r in range(cfg.startup_reps):
        for cond, cmd in conds.items():
            t0 = time.time()
            res, _ = run_cmd(cmd, timeout=120, env=envs[cond])
            if res.returncode != 0:
                raise RuntimeError(f"start-up run under {cond} failed: {res.stderr[-400:]}")
            times[cond].append(float(res.stdout.strip().splitlines()[-1]) - t0)
    shutil.rmtree(work, ignore_errors=True)
    log("start-up: " + ", ".join(f"{c} {median(v):.3f} s" for c, v in times.items()))
    out = {c: {"values": v, "median_s": median(v), "max_s": max(v)} for c, v in times.items()}
    out["parts"] = startup_parts(max(1, min(3, cfg.startup_reps)))
    return out


_PARTS = """
import time, sys
t0 = float(sys.argv[1])
t1 = time.time()
from dpuprof.record.load.bcc_loader import import_bcc
bcc = import_bcc()
t2 = time.time()
from dpuprof.record.load import probes
bpf, used, _ = probes.load(bcc.BPF, list(probes.PROBE_NAMES))
t3 = time.time()
bpf.cleanup()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def startup_parts(reps: int) -> dict:
    """Where the start-up goes: the interpreter's start, importing bcc, compiling and loading the
    probes (bcc runs clang; never from a probe cache), medians of ``reps`` runs."""
    parts = {"python_start_s": [], "import_bcc_s": [], "compile_load_s": []}
    for _ in range(reps):
        res, _ = run_cmd([PYTHON, "-c", _PARTS, repr(time.time())], timeout=120, env=_compiling())
        if res.returncode != 0:
            return {}
        for key, val in zip(parts, res.stdout.split()):
            parts[key].append(float(val))
    return {k: median(v) for k, v in parts.items()}


# ---------------------------------------------------------------------------------------- 5. report time
def bench_report(cfg: Config) -> dict:
    """Section 5: benchmarks/bench_report.py's JSON on fixtures/long (else the largest fixture), or
    ``{"skipped": why}``."""
    script = BENCH / "bench_report.py"
    if not script.is_file():
        return {"skipped": "benchmarks/bench_report.py is absent"}
    fixture = ROOT / "fixtures" / "long" / "recording.rec"
    note = None
    if not fixture.is_file():
        others = sorted(ROOT.glob("fixtures/*/recording.rec"), key=lambda p: p.stat().st_size)
        if not others:
            return {"skipped": "no fixtures/long/recording.rec and no other fixture"}
        fixture = others[-1]
        note = (f"fixtures/long/recording.rec is absent; timed on the largest fixture present, "
                f"{fixture.relative_to(ROOT)}")
    cmd = [PYTHON, str(script), "--json", "--runs", str(cfg.report_runs), "--fixture", str(fixture)]
    log(f"report time: {' '.join(cmd[1:])}")
    res, _ = run_cmd(cmd, timeout=900)
    if res.returncode != 0:
        return {"skipped": f"bench_report.py failed ({res.returncode}): {res.stderr.strip()[-300:]}"}
    out = json.loads(res.stdout)
    out["note"] = note
    out["fixture_bytes"] = fixture.stat().st_size
    out["command"] = "python3 " + " ".join(str(Path(c).relative_to(ROOT)) if c.startswith(str(ROOT)) else c
                                           for c in cmd[1:])
    return out

