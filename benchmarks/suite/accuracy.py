"""Section 1, accuracy: each single-purpose tool under `dpuprof record` with `perf record -a -g` over
the same run, against the kernel's own accounting of the tool (wait4), and where the samples that
missed the tool's category went."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from perfclass import classify_perf

from dpuprof.categories import CATEGORIES, top_level
from dpuprof.record.stacks.classify import Classifier, split_folded
from dpuprof.recording import load

from .config import TOGETHER, Config, log
from .runner import BackgroundPerf, record_cmd, run_cmd, summarize
from .stats import shares, worst_difference
from .workloads import Tool, accuracy_tools, free_port


def tool_pids(summary: dict, roots: set[int]) -> set[int]:
    """``roots`` and every process of the recording descended from one of them."""
    parent = {p["pid"]: p["ppid"] for p in summary["processes"]}
    out = set()
    for pid in parent:
        seen, p = set(), pid
        while p is not None and p not in seen:
            if p in roots:
                out.add(pid)
                break
            seen.add(p)
            p = parent.get(p)
    return out | roots


def outside_category(rec: Path, pids: set[int], category: str, top: int = 3) -> list[dict]:
    """Where a tool's samples outside its own category went: grouped by the frame whose rule
    decided them, with whether a frame of the tool's category sat further up the same stack (the
    leaf-most-rule principle then hid it). Shares are of the tool's samples."""
    r = load(rec)
    ss = r.table("stack_samples")
    ss = ss[ss["pid"].isin(pids)].groupby("stack_id")["samples"].sum()
    stacks = r.table("stacks").set_index("stack_id")
    total = float(ss.sum()) or 1.0
    c = Classifier()
    groups: dict[tuple, float] = {}
    for sid, n in ss.items():
        if stacks.loc[sid, "category"] == category:
            continue
        kframes, uframes = split_folded(stacks.loc[sid, "folded"])
        frames = [(f, c._kernel) for f in reversed(kframes)] if kframes else [(f, c._user) for f in reversed(uframes)]
        decider, under = _unmatched(kframes, uframes), False
        for i, (f, match) in enumerate(frames):
            if match(f) is not None:
                decider = f
                under = any((m := match(g)) is not None and top_level(m) == category for g, _ in frames[i + 1:])
                break
        key = (stacks.loc[sid, "subcategory"], decider, under)
        groups[key] = groups.get(key, 0.0) + float(n)
    rows = [{"subcategory": k[0], "frame": k[1], "under_own_category": k[2], "share": v / total}
            for k, v in sorted(groups.items(), key=lambda kv: -kv[1])]
    under = [x for x in rows if x["under_own_category"]]
    return {"top": rows[:top], "outside_share": sum(x["share"] for x in rows),
            "under_own_share": sum(x["share"] for x in under), "under_top": under[:top]}


def _unmatched(kframes: list[str], uframes: list[str]) -> str:
    """A name for a stack no rule matched: its system call, else its leaf frame."""
    for f in kframes:
        if f.startswith(("__x64_sys_", "__ia32_sys_")):
            return f"no rule; in {f}"
    leaf = (kframes or uframes or ["?"])[-1]
    return f"no rule; leaf {leaf}"


def accuracy_run(kind: str, tools: list[Tool], T: int, scratch: Path, rep: int) -> list[dict]:
    """One `dpuprof record` of ``tools`` started together, with `perf record -a -g` on the same run:
    one row per tool (ground-truth, dpuprof and perf seconds and shares, their ratios)."""
    work = Path(tempfile.mkdtemp(prefix="acc-", dir=scratch))
    spec = {"tools": []}
    for tool in tools:
        for p in tool.procs:
            spec["tools"].append(dict(p, tool=tool.name))
    # Servers first, clients (with a delay) last.
    spec["tools"].sort(key=lambda p: p.get("delay_s", 0))
    (work / "spec.json").write_text(json.dumps(spec))
    rec, perf_data = work / "acc.rec", work / "perf.data"
    cmd = record_cmd(rec, [*TOGETHER, str(work / "spec.json"), str(work / "truth.json")])
    perf = BackgroundPerf(perf_data)
    try:
        res, _ = run_cmd(cmd, timeout=120 + 4 * T)
    finally:
        perf.stop()
    if res.returncode != 0:
        raise RuntimeError(f"accuracy run failed ({res.returncode}): {res.stderr[-500:]}")
    truth = json.loads((work / "truth.json").read_text())["tools"]
    summary = summarize(rec)
    per_pid_perf = classify_perf(str(perf_data))
    by_name = {p["name"]: p["tool"] for p in spec["tools"]}
    rows = []
    for tool in tools:
        mine = [t for t in truth if by_name[t["name"]] == tool.name]
        row = {"kind": kind, "rep": rep, **tool_row(tool, mine, summary, per_pid_perf)}
        row["outside"] = outside_category(rec, set(row["pids"]), tool.category)
        rows.append(row)
    shutil.rmtree(work, ignore_errors=True)
    return rows


def tool_row(tool: Tool, mine: list[dict], summary: dict, per_pid_perf: dict) -> dict:
    """One tool's accuracy in one run: ``mine`` are together.py's truth records of its processes
    (utime_s, stime_s from wait4), ``summary`` dpuprof's summary, ``per_pid_perf`` perf's samples by
    pid and category. Seconds are CPU seconds; shares are fractions of the tool's CPU."""
    pids = tool_pids(summary, {t["pid"] for t in mine})
    procs = [p for p in summary["processes"] if p["pid"] in pids]
    dp_cat = {c: sum(p["by_category"][c] for p in procs) for c in CATEGORIES}
    dp_total = sum(dp_cat.values())
    perf_cat = {c: sum(per_pid_perf.get(pid, {}).get(c, 0) for pid in pids) for c in CATEGORIES}
    perf_n = sum(perf_cat.values())
    utime, stime = sum(t["utime_s"] for t in mine), sum(t["stime_s"] for t in mine)
    gt_cpu, gt_cat = utime + stime, (utime if tool.truth == "utime" else stime)
    dp_share, perf_share = shares(dp_cat), shares(perf_cat)
    pp, worst = worst_difference(dp_share, perf_share)
    return {
        "tool": tool.name, "category": tool.category, "truth": tool.truth,
        "pids": sorted(pids), "rc": [t["rc"] for t in mine],
        "utime_s": utime, "stime_s": stime, "gt_cpu_s": gt_cpu, "gt_cat_s": gt_cat,
        "dp_total_s": dp_total, "dp_cat_s": dp_cat[tool.category], "dp_by_category": dp_cat,
        "ratio_cat": dp_cat[tool.category] / gt_cat if gt_cat else None,
        "ratio_total": dp_total / gt_cpu if gt_cpu else None,
        "dp_share": dp_share, "perf_share": perf_share, "perf_samples": perf_n,
        "gt_share": gt_cat / gt_cpu if gt_cpu else None,
        "pp_vs_perf": pp, "pp_vs_perf_category": worst,
        "pp_cat_vs_perf": 100 * (dp_share[tool.category] - perf_share[tool.category]),
    }


def bench_accuracy(cfg: Config, scratch: Path) -> dict:
    """Section 1: each tool alone (full suite), then all at once, ``cfg.acc_reps`` times; ``runs``
    has every row, ``table`` the repetitions pooled."""
    runs = []
    for rep in range(cfg.acc_reps):
        if cfg.acc_alone:
            for tool in accuracy_tools(cfg.acc_alone_s, free_port(), scratch):
                log(f"accuracy: {tool.name} alone (rep {rep + 1}/{cfg.acc_reps})")
                runs += accuracy_run("alone", [tool], cfg.acc_alone_s, scratch, rep)
        log(f"accuracy: all tools at once (rep {rep + 1}/{cfg.acc_reps})")
        runs += accuracy_run("together", accuracy_tools(cfg.acc_together_s, free_port(), scratch),
                             cfg.acc_together_s, scratch, rep)
    return {"runs": runs, "table": accuracy_table(runs, accuracy_tools(1, 0, scratch))}


def accuracy_table(runs: list[dict], tools: list[Tool]) -> list[dict]:
    """Per (run kind, tool): the repetitions pooled (seconds and samples summed, as one longer run),
    which is less noisy than a median of short runs; the per-repetition values stay in ``runs``."""
    table = []
    for kind in ("alone", "together"):
        for tool in tools:
            rs = [r for r in runs if r["kind"] == kind and r["tool"] == tool.name]
            if not rs:
                continue
            dp = {c: sum(r["dp_by_category"][c] for r in rs) for c in CATEGORIES}
            pc = {c: sum(r["perf_share"][c] * r["perf_samples"] for r in rs) for c in CATEGORIES}
            dp_total, perf_n = sum(dp.values()), sum(pc.values())
            gt_cpu, gt_cat = sum(r["gt_cpu_s"] for r in rs), sum(r["gt_cat_s"] for r in rs)
            dp_share, perf_share = shares(dp), shares(pc)
            pp, worst = worst_difference(dp_share, perf_share)
            typical = sorted(rs, key=lambda r: r["ratio_cat"] or 0)[len(rs) // 2]
            table.append({
                "kind": kind, "tool": tool.name, "category": tool.category, "truth": tool.truth,
                "why": tool.why, "reps": len(rs),
                "gt_cpu_s": gt_cpu, "gt_cat_s": gt_cat, "dp_cat_s": dp[tool.category], "dp_total_s": dp_total,
                "ratio_cat": dp[tool.category] / gt_cat if gt_cat else None,
                "ratio_total": dp_total / gt_cpu if gt_cpu else None,
                "ratio_cat_range": [min(r["ratio_cat"] or 0 for r in rs), max(r["ratio_cat"] or 0 for r in rs)],
                "gt_share": gt_cat / gt_cpu if gt_cpu else None,
                "dp_share_cat": dp_share[tool.category], "perf_share_cat": perf_share[tool.category],
                "pp_vs_perf": pp, "pp_vs_perf_category": worst, "perf_samples": perf_n,
                "dp_share": dp_share, "perf_share": perf_share,
                "outside": typical["outside"],  # the repetition with the median ratio
            })
    return table

