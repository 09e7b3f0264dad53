"""Why a target missed, in prose built from the run's own diagnostics (where the samples outside a
tool's category went, per-probe BPF costs, the recorder's CPU, the recording's bytes per table), and
what would close it. Each function takes results.json's section and returns Markdown text."""

from __future__ import annotations

import math

from .fmt import num, pct
from .stats import cpu_estimate


def why_accuracy(bad: list[dict]) -> str:
    """Per tool that missed ±10 %: dpuprof against truth and perf, where its other samples went, and
    the rule or accounting change that would close it."""
    parts = []
    by_tool: dict[str, list] = {}
    for r in bad:
        by_tool.setdefault(r["tool"], []).append(r)
    for tool, rs in by_tool.items():
        r = rs[0]
        also = [x for x in rs[1:]]
        out = r.get("outside") or {}
        tops = out.get("top", [])
        desc = "; ".join(f"{t['frame']} → {t['subcategory']} {pct(t['share'])}" for t in tops)
        text = (f"**{r['tool']}** ({r['kind']}): dpuprof gives {r['category']} {num(r['dp_cat_s'])} s against "
                f"{num(r['gt_cat_s'])} s of {r['truth']} ({num(r['ratio_cat'], 3)}×"
                + "".join(f"; {x['kind']}: {num(x['ratio_cat'], 3)}×" for x in also) + "); perf, same rules, gives "
                f"{r['category']} {pct(r['perf_share_cat'])} of the tool's samples against dpuprof's "
                f"{pct(r['dp_share_cat'])}, "
                + ("so the two samplers agree and the gap is in the rules or in the ground truth. "
                   if abs(r["perf_share_cat"] - r["dp_share_cat"]) <= 0.05 else
                   "so part of the gap is between the samplers. ")
                + f"Samples outside {r['category']}: {pct(out.get('outside_share'))}; the largest: {desc}.")
        leaf_mods = [t["frame"] for t in tops if t["frame"].startswith("no rule; leaf [unknown] (")]
        if r["dp_share_cat"] < 0.05 and leaf_mods:
            mod = leaf_mods[0].split("(", 1)[1].rstrip(")")
            text += (f" The tool's own executable `{mod}` carries the {r['category']} code (statically "
                     f"linked and stripped), and the rules match {r['category']} by library module name "
                     f"only. To close: add the executable to the {r['category']} module list in "
                     f"dpuprof/data/rules.toml (for example `\"{mod}\"`), or symbolise stripped static "
                     f"binaries through their .gnu_debuglink debug files where installed.")
        if out.get("under_own_share", 0) > 0.005:
            text += _under_own_text(r, out)
        if r.get("ratio_total") is not None and abs(r["ratio_total"] - 1) > 0.03:
            text += (f" Part of the gap is the total: dpuprof charged the tool {num(r['ratio_total'], 3)}× the CPU "
                     f"the kernel accounted to it (wait4), and the category inherits that error.")
        text += _truth_overcount_text(r, tops)
        parts.append(text)
    return " ".join(parts)


# Decisions the [[context]] rules of dpuprof/data/rules.toml move to a network or storage frame above.
CONTEXT_ELIGIBLE = ("kernel_other.mm", "kernel_other.sched", "kernel_other.syscall")


def _under_own_text(r: dict, out: dict) -> str:
    """The samples that sat under a frame of the tool's category but stayed outside it, and why the
    context rules did not move them."""
    under = out.get("under_top") or []
    eligible = [t for t in under if t["subcategory"] in CONTEXT_ELIGIBLE]
    other = [t for t in under if t["subcategory"] not in CONTEXT_ELIGIBLE]
    listed = lambda ts: ", ".join(f"{t['frame']} → {t['subcategory']} {pct(t['share'])}" for t in ts)  # noqa: E731
    text = (f" {pct(out['under_own_share'])} of the tool's samples sat under a {r['category']} frame but "
            f"stayed outside {r['category']}.")
    if eligible:
        text += (f" Of those, {listed(eligible)} are mm, sched or syscall-entry work, the kind the context "
                 f"rules ([[context]] in dpuprof/data/rules.toml) give to a network or storage frame above "
                 f"it; a context walk stops at an interrupt or softirq entry ([[boundary]]: what an interrupt "
                 f"does is not work of the code it interrupted) and at a frame of another category (IPC, "
                 f"crypto), and such a stop keeps the sample in its leaf's category.")
    if other:
        text += f" Decided by a leaf rule of a kind the context rules leave alone: {listed(other)}."
    return text


# System calls that wait for file descriptors: an event loop's time in them is not network or storage work.
WAIT_SYSCALLS = ("select", "pselect6", "poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2")


def _syscall(frame: str) -> str:
    """The system-call entry frame of an outside_category decider ("no rule; in __x64_sys_X" in
    recordings before syscall entry had a rule, "__x64_sys_X" after), else ""."""
    name = frame.split("in ", 1)[1] if frame.startswith("no rule; in ") else frame
    return name if name.startswith(("__x64_sys_", "__ia32_sys_")) else ""


def _truth_overcount_text(r: dict, tops: list[dict]) -> str:
    """Where the ground truth counts kernel time that no rule calls the tool's category (an event
    loop's select/poll): those seconds, and the ratio against the truth without them."""
    sys_parts = [(_syscall(t["frame"]), t) for t in tops]
    sys_parts = [(name, t) for name, t in sys_parts if name.split("_sys_", 1)[-1] in WAIT_SYSCALLS]
    if not sys_parts or r["truth"] != "stime" or not r.get("dp_share_cat"):
        return ""
    share = sum(t["share"] for _, t in sys_parts)
    tool_s = r["dp_cat_s"] / r["dp_share_cat"]  # all of the tool's CPU, as dpuprof measured it
    over_s = share * tool_s
    calls = ", ".join(f"{name} → {t['subcategory']} ({pct(t['share'])})" for name, t in sys_parts)
    rest = r["gt_cat_s"] - over_s
    return (f" The ground truth over-counts: it takes all of the tool's stime as {r['category']}, but "
            f"{pct(share)} of its samples are in system calls that wait for file descriptors, which no "
            f"rule counts as {r['category']}: {calls}, an event loop waiting, not moving data; that is about "
            f"{num(over_s)} s of the tool's {num(tool_s)} s. Against the {num(rest)} s of stime left, "
            f"dpuprof's {num(r['dp_cat_s'])} s is {num(r['dp_cat_s'] / rest, 3) if rest > 0 else 'n/a'}×.")


def why_pp(bad: list[dict]) -> str:
    """Per tool beyond 5 pp of perf: the sampling error of perf's count, and why the two weigh differently."""
    parts = []
    for r in bad:
        n = r.get("perf_samples") or 1
        p = r["perf_share"][r["pp_vs_perf_category"]]
        sigma = 100 * math.sqrt(max(p * (1 - p), 1e-9) / n)
        parts.append(f"**{r['tool']}** ({r['kind']}): {r['pp_vs_perf_category']} differs by "
                     f"{num(r['pp_vs_perf'], 1)} pp; perf had {int(n)} samples of the tool, so its own sampling "
                     f"error is ±{num(sigma, 1)} pp (1 σ), and dpuprof's, sampling at the same rate, is "
                     f"similar, so a difference of twice that is noise. Beyond noise, dpuprof scales each "
                     f"process's sampled mix to its exact CPU time (sched_switch and /proc), while perf's "
                     f"weights are sample counts, which the timer under-counts where it is held off "
                     f"(interrupts disabled, VM exits); a tool of several processes then mixes differently. "
                     f"To close: longer runs or a higher frequency (-F 499) shrink the noise.")
    return " ".join(parts)


def why_cost(res: dict, wl: str) -> str:
    """Why a CPU-cost target on ``wl`` (ddp: share of the machine; iperf3: share of the workload's
    CPU) missed: where the CPU goes (BPF runs, the recorder), each probe's cost, what would cut them."""
    ov = res["overhead"]
    est = cpu_estimate(res, wl)
    text = _cpu_cost_text(res, wl, est) if est else ""
    row = ((ov.get("bpf_cost") or {}).get(wl) or {}).get("dpuprof") or {}
    if wl == "iperf3" and row.get("workload_pct") is not None:
        text += (f"Against the workload's own {num(row['workload_core_pct'], 1, ' %')} of one core in that run "
                 f"({num(row['workload_cpu_s'], 2, ' s')}: wait4 of the recorder's tree, less the recorder's "
                 f"own CPU and less the BPF time), the cost is {num(row['workload_pct'], 2, ' %')}. ")
    text += _probe_costs_text(ov)
    rec = est["recorder_core_pct"] if est else ov[wl]["conditions"]["dpuprof"].get("recorder_cpu_pct")
    return text + (f"What would close it: the recorder's own {num(rec, 1, ' %')} of a core goes to draining, "
                   f"symbolising and writing every interval (benchmarks/HOT_LOADS.md breaks it down): a longer "
                   f"interval or less work per drain divides it.")


def _cpu_cost_text(res: dict, wl: str, est: dict) -> str:
    """The CPU cost (cpu_estimate's ``est``) in words."""
    text = (f"What dpuprof costs in CPU (kernel.bpf_stats_enabled and the recorder's own /proc CPU"
            f"{', over the long run' if wl == 'ddp' else ''}): its BPF programs ran "
            f"{est['runs_per_s']:,.0f} times a second at {num(est['ns_per_run'], 0)} ns each, "
            f"{num(est['bpf_core_pct'], 2, ' %')} of one core, and the recorder used "
            f"{num(est['recorder_core_pct'], 2, ' %')} of one core: {num(est['machine_pct'], 2, ' %')} of the "
            f"machine's CPU, the slowdown to expect for a workload that keeps every core busy. ")
    text += (f"The BPF time is host-wide (the programs run for every process's events, other work on a "
             f"shared machine included), and the recorder's {num(est['recorder_core_pct'], 1, ' %')} of one "
             f"core is a fixed cost per host: {num(est['recorder_core_pct'] / (res['machine']['cpus'] or 1), 2, ' %')} "
             f"of this {res['machine']['cpus']}-core machine, {num(est['recorder_core_pct'] / 32, 2, ' %')} of a "
             f"32-core training host. ")
    return text


def _probe_costs_text(ov: dict) -> str:
    """Each per-event probe's BPF time over cpu_sample+proc_tree, largest first; empty without
    per-probe rows. Those probes are opt-in (issue 32: ``--probes ...,softirq`` and the like), so
    their time is not in the default recorder's cost judged here; it tells a user what naming one
    would add."""
    rows = (ov.get("bpf_cost") or {})
    parts, bases = [], []
    for w, conds in rows.items():
        for cond, row in conds.items():
            if not (cond.startswith("probes:") and row.get("bpf")):
                continue
            probe = cond.split(":", 1)[1]
            if "incremental_core_pct" in row:
                parts.append((row["incremental_core_pct"], probe.rsplit(",", 1)[1], w))
            else:
                bases.append((row["bpf"]["core_pct"], w))
    if not parts:
        return ""
    parts.sort(key=lambda x: -x[0])
    return ("The per-event probes are opt-in and not in this cost; each adds, over cpu_sample+proc_tree ("
            + ", ".join(f"{num(c, 2, ' %')} of a core on {w}" for c, w in bases) + "): "
            + ", ".join(f"{p} +{num(c, 2, ' %')} ({w})" for c, p, w in parts) + ". ")


def why_stack_loss(sl: dict, bad: list[str], target: float) -> str:
    """Which minutes of the long run lost more than ``target`` % of their samples' stacks, by kind
    (``bad``: stack_loss.COLUMNS names), whether the loss grows over the run, and where it comes from."""
    wins = sl["windows"]
    parts = []
    for k in bad:
        over = [w for w in wins if (w.get(k + "_pct") or 0) > target]
        parts.append(f"{k}: " + ", ".join(f"minute {w['window']} {num(w[k + '_pct'], 2, ' %')} ({w[k]:,} of "
                                          f"{w['samples']:,} samples)" for w in over[:6])
                     + (f" and {len(over) - 6} more" if len(over) > 6 else ""))
        full = [w for w in wins if w.get(k + "_pct") is not None]
        if len(full) >= 2:
            parts[-1] += (f"; first minute {num(full[0][k + '_pct'], 2, ' %')}, last "
                          f"{num(full[-1][k + '_pct'], 2, ' %')}")
    return ("Minutes over the target: " + "; ".join(parts) + ". Map loss is a failed bpf_get_stackid: a "
            "hash collision in the stack map (kernel_stack_collision, user_stack_collision) or a full map "
            "(*_stack_map_full); a loss that grows over the run means the stack maps are not emptied "
            "between intervals. Next step: check that the drain (dpuprof/record/drain/maps.py) clears both "
            "stack maps every interval, and size them for one interval's distinct stacks.")


def why_recursion(lg: dict, bad: list[str], unknown: list[str], target: float) -> str:
    """The programs whose skipped events exceed ``target`` % (``bad``) or whose runs are unknown
    (``unknown``), with their hooks, and what would bring the misses down."""
    rc, progs = lg["recursion"], lg.get("bpf_programs") or {}
    hook = lambda n: "/".join(progs.get(n, {}).get("types") or ["?"])  # noqa: E731
    text = ""
    if bad:
        text += ("Over the target: " + ", ".join(
            f"{n} ({hook(n)}) {num(100 * rc[n]['share'], 3, ' %')}, {rc[n]['missed']:,} of "
            f"{rc[n]['runs'] + rc[n]['missed']:,} events" for n in bad) + ". ")
        if any("tracepoint" in (progs.get(n, {}).get("types") or []) for n in bad):
            text += ("A classic tracepoint program is skipped whenever another BPF program is running on "
                     "the same CPU (the kernel's bpf_prog_active guard), e.g. when the event fires in an "
                     "interrupt taken while the sampler or another probe runs; a raw tracepoint program "
                     "(RAW_TRACEPOINT_PROBE) is skipped only when it would recurse into itself. Next step: "
                     "move these events to raw tracepoints, or count them in a program that is not nested. ")
    if unknown:
        text += (f"Runs unknown for {', '.join(unknown)}: no loaded program of that name was seen "
                 f"(bpftool), so the share of its events that was skipped is not known. ")
    return text.strip()


def why_startup(st: dict) -> str:
    """Where the start-up went (interpreter, bcc import, probe compile) and what would cut it."""
    p = st.get("parts") or {}
    text = (f"Of the {num(st['dpuprof']['median_s'], 2, ' s')}, compiling and loading the probes took "
            f"{num(p.get('compile_load_s'), 2, ' s')} (bcc runs clang on the C source at every start), "
            f"importing bcc {num(p.get('import_bcc_s'), 2, ' s')} and the interpreter's start "
            f"{num(p.get('python_start_s'), 2, ' s')}; the rest is the recorder's own set-up (metadata, the "
            f"recording file, attaching the sampler on every CPU). ")
    return text + ("To close: ship the probes precompiled (libbpf CO-RE objects built once, as BTF is "
                   "present) or cache bcc's compiled object per kernel, which removes the compile; the "
                   "machine's load also stretches a CPU-bound compile.")


TABLE_FIX = {
    # schema v3 (docs/recording.md); the v1/v2 names for files recorded before it
    "cpu_counts": "packed (pid, subcategory id, samples, ns) per interval: fold the rows of processes "
                  "outside the workload into one per interval, or keep them at 10-s resolution",
    "stack_counts": "packed (stack, samples) per process and interval, 10-s buckets after the first "
                    "minute: coarser buckets (60 s) after ten minutes, or one total per stack for "
                    "processes outside the workload",
    "stack_list": "distinct stacks as packed frame ids: share common prefixes (a frame tree)",
    "frames": "distinct frame names: store library and symbol apart, so a library path is kept once",
    "cpu_category": "one row per process, subcategory and 1-s interval (schema v1/v2)",
    "stack_samples": "one row per process, stack and 1-s interval (schema v1/v2)",
    "stacks": "distinct stacks as text (schema v1/v2)",
}


def why_size(lg: dict) -> str:
    """The recording's bytes by table and rows per interval, and what would shrink the largest tables."""
    comp = lg.get("rec_composition") or []
    total = sum(b for _, b in comp) or 1
    minutes = lg["duration_s"] / 60
    text = (f"Over {num(minutes, 1)} min the recording grew to {lg['rec_bytes']:,} bytes with "
            f"{lg.get('stacks')} distinct stacks; by table: "
            + ", ".join(f"{name} {pct(b / total, 0)}" for name, b in comp[:4]) + ". ")
    rows = lg.get("rows") or {}
    if rows.get("intervals"):
        other = 1 - rows["cpu_category_rows_workload"] / max(1, rows["cpu_category_rows"])
        text += (f"Per {lg['duration_s'] / rows['intervals']:.0f}-s interval: "
                 f"{rows['cpu_category_rows'] / rows['intervals']:.0f} cpu_category rows "
                 f"({pct(other, 0)} of them for the {rows['processes_seen'] - rows['workload_processes']} "
                 f"processes outside the workload that ran on the host) and "
                 f"{rows['stack_samples_rows'] / rows['intervals']:.0f} stack_samples rows. ")
    fixes = [f"{name}: {TABLE_FIX[name]}" for name, b in comp[:3] if name in TABLE_FIX and b / total > 0.1]
    if fixes:
        text += "What would close it: " + "; ".join(fixes) + ". "
    return text + ("Both files grow with time, so the ratio is per minute of the same run; perf.data "
                   "holds every sample, the recording per-interval aggregates, whose rows grow with the "
                   "number of processes and stacks alive in each interval.")


def why_rss(lg: dict) -> str:
    """Where the recorder's RSS lives (compile, LLVM pages, heap) and what would cut it."""
    from_compile = lg["rss_peak_hwm_mb"] - lg["rss_steady_max_mb"]
    text = (f"Peak VmHWM {num(lg['rss_peak_hwm_mb'], 0, ' MB')}; the highest RSS while the command ran "
            f"{num(lg['rss_steady_max_mb'], 0, ' MB')}, growing {num(lg['rss_slope_mb_per_min'], 2, ' MB/min')}. ")
    if from_compile > 10:
        text += (f"The {num(from_compile, 0, ' MB')} above that is the probes' compile at start-up (clang/LLVM "
                 f"inside the recorder). ")
    smaps = dict(lg.get("smaps_top") or [])
    llvm = sum(mb for name, mb in smaps.items() if "LLVM" in name or "clang" in name)
    if llvm:
        text += (f"While recording, {num(llvm, 0, ' MB')} of the RSS is the code of libLLVM and libclang-cpp "
                 f"touched by that compile (file-backed pages, {num(lg.get('rss_file_mb_last'), 0, ' MB')} of "
                 f"file-backed RSS in all), which stays mapped because libbcc links them; the heap is "
                 f"{num(smaps.get('[heap]'), 0, ' MB')}. ")
    return text + ("What would close it: compile the probes in a short-lived child process (or ship "
                   "precompiled CO-RE objects loaded with libbpf), so the recorder never maps LLVM; and bound "
                   "the per-process symbol caches, which are what grows during a run.")


# ---------------------------------------------------------------------------------------- markdown
