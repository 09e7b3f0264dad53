"""RESULTS.md: the Markdown text rendered from results.json's measurements and the verdicts
(``targets``). Every number comes from the measurements; the text around them only explains what
they mean."""

from __future__ import annotations

from dpuprof.categories import CATEGORIES

from .fmt import num, pct, spread, unit_word


def render(res: dict) -> str:
    """RESULTS.md's text from results.json's content (with ``targets`` from verdicts.evaluate)."""
    m = res["machine"]
    quick = res["mode"] == "quick"
    L = []
    add = L.append
    add("# dpuprof benchmark results")
    add("")
    add(f"Produced by `{res['command']}` ({res['mode']} mode, {num(res['wall_s'] / 60, 1)} min) on "
        f"{m['date_utc']}. Every number below is measured by that run (written to results.json beside "
        f"this file, and rendered here by benchmarks/results_md.py); rerun the same command to reproduce.")
    if quick:
        add("")
        add("**Quick (smoke) run**: single short runs check that the harness works; its timings are not "
            "measurements and no timing target is judged. Run without `--quick` for the numbers.")
    add("")
    _render_machine(res, add)
    _render_targets(res, add)
    _render_accuracy(res, add)
    _render_overhead(res, add)
    _render_long(res, add)
    _render_startup(res, add)
    _render_report(res, add)
    _render_short_helpers(res, add)
    _render_agent_soak(res, add)
    _render_commands(res, add)
    return "\n".join(L)


def _render_agent_soak(res: dict, add) -> None:
    """Section 7: the agent soak (benchmarks/agent_soak.py, a run of its own: results.json's
    ``agent_soak`` holds its command, date and Markdown as that script printed it); nothing without it."""
    soak = res.get("agent_soak")
    if not soak:
        return
    add("## 7. Agent soak")
    add("")
    tree = f", the agent from {soak['tree']}" if soak.get("tree") else ""
    add(f"Measured on {soak['date_utc']} by `{soak['command']}`{tree} (a run of its own, not part of run.py's; "
        f"its windows as the script printed them):")
    add("")
    for line in soak["markdown"].splitlines():
        add(line.replace("## dpuprof agent soak", "### dpuprof agent soak"))
    add("")


def _render_machine(res: dict, add) -> None:
    """The machine table, versions, and a note when it was busy at the start."""
    m = res["machine"]
    add("## Machine")
    add("")
    add("| host | kernel | CPU | cores | memory | load average (1/5/15 min) before → after | busy before start |")
    add("|---|---|---|---|---|---|---|")
    add(f"| {m['host']} | {m['kernel']} | {m['cpu_model']} | {m['cpus']} | {m['memory_gib']} GiB | "
        f"{' / '.join(map(str, m['load_before']))} → {' / '.join(map(str, m.get('load_after', [])))} | "
        f"{pct(m['busy_before'])} |")
    add("")
    add(f"dpuprof {m['dpuprof_version']} (git {m['git_commit']}{', with uncommitted changes' if m['git_dirty'] else ''}), "
        f"Python {m['python']}; " + ", ".join(f"{v}" for v in m["tool_versions"].values()) + ".")
    if m["busy_before"] > 0.2 or m["load_before"][0] > 1.0:
        add("")
        add(f"The machine was not idle when the suite started (load {m['load_before'][0]}, "
            f"{pct(m['busy_before'])} busy): other work shared its {m['cpus']} cores, so the timed "
            f"comparisons (overhead, start-up) are noisier than on a quiet machine. The accuracy ratios are "
            f"ratios of CPU seconds and do not depend on load.")
    add("")


def _render_targets(res: dict, add) -> None:
    """The targets table with verdicts, and why each missed or unresolved target missed."""
    add("## Targets")
    add("")
    add("Verdicts: accuracy from the repetitions pooled. The recorder's cost is judged by its CPU: the BPF "
        "programs' run time (kernel.bpf_stats_enabled) plus the recorder's own CPU, as a share of the machine "
        "on DDP training (over the long run) and as a share of the workload's own CPU on an iperf3 flood (a "
        "run with BPF statistics; section 2); other load hardly moves either. The interleaved rounds' "
        "throughput slowdowns are reported beside them, not judged. Stack loss, recursion misses, output "
        "size and memory come from the long run (section 3: 10 minutes of DDP training in the full suite).")
    add("")
    add("| target | goal | dpuprof | perf record -a -g -F 99 | met |")
    add("|---|---|---|---|---|")
    for t in res["targets"]:
        met = t.get("verdict") or {True: "yes", False: "**no**", None: "—"}[t["met"]]
        add(f"| {t['name']} | {t['target']} | {t['measured']} | {t['perf']} | {met} |")
    missed = [t for t in res["targets"] if t.get("why") and (t["met"] is False or t.get("verdict", "yes") != "yes")]
    if missed:
        add("")
        add("### Why the missed (or unresolved) targets missed, and what would close them")
        add("")
        for t in missed:
            add(f"- **{t['name']}**: {t['why']}")
    add("")


def _render_short_helpers(res: dict, add) -> None:
    """Section 6: short-lived helpers, dpuprof and perf on one run (benchmarks/short_helpers.py)."""
    sh = res.get("short_helpers")
    if not sh:
        return
    add("## 6. Short-lived helpers")
    add("")
    when = (f"measured on {sh['measured_utc']} by `{sh['command']}`, a separate run merged into results.json"
            if sh.get("measured_utc") else "measured by this run")
    add("A WebDataset-style loader fetches each HTTPS shard (a local `openssl s_server -WWW`) with one `curl`, "
        "each living a fraction of a second; dpuprof records it while `perf record -a -g -F 499` records the "
        "same run, and perf's samples of the same curl processes are classified with dpuprof's rules. "
        f"Unresolved: samples whose leaf user frame names no module. {when[0].upper() + when[1:]}.")
    add("")
    for line in short_helpers_table(sh):
        add(line)
    add("")


def short_helpers_table(res: dict) -> list[str]:
    """benchmarks/short_helpers.py's ``measure`` result as Markdown lines (section 6, and what that
    script prints)."""
    out = [f"{res['shards']} shards x {res['epochs']} epochs, {res['shard_mib']} MiB each, one curl per shard, "
           "499 Hz", "", "| run | tool | curl processes | curl samples | crypto % | unresolved % | wall s |",
           "|---|---|---:|---:|---:|---:|---:|"]
    out += [f"| {r['run']} | {r['tool']} | {r['processes']} | {r['samples']} | {r['crypto_pct']:.1f} "
            f"| {r['unresolved_pct']:.1f} | {r['wall_s']:.1f} |" for r in res["rows"]]
    return out


def _render_commands(res: dict, add) -> None:
    """The exact command of each benchmark."""
    add("## Commands")
    add("")
    add(f"Everything above: `{res['command']}` (as root; `--out DIR` writes elsewhere). Per benchmark:")
    add("")
    c = res["commands"]
    add("- accuracy, each tool (alone, and all at once under one recording):")
    for name, cmds in c["accuracy_tools"].items():
        add(f"  - {name}: " + "; ".join(f"`{x}`" for x in cmds))
    add(f"- accuracy wrapper: `{c['accuracy_wrapper']}`")
    add(f"- perf classification: `{c['perf_classify']}`")
    add(f"- overhead, iperf3: `{c['overhead_iperf3']}`")
    add(f"- overhead, fio: `{c['overhead_fio']}` under the same conditions")
    add(f"- overhead, training: `{c['overhead_ddp']}` under the same conditions")
    add(f"- size and memory: `{c['long']}`")
    add(f"- start-up: `{c['startup']}`")
    if "command" in res["report"]:
        add(f"- report time: `{res['report']['command']}`")
    add("")
    add("Durations in `--quick` are shorter; `results.json` beside this file has every individual run.")
    add("")


def _render_accuracy(res: dict, add) -> None:
    acc = res["accuracy"]
    cfg = res["config"]
    add("## 1. Accuracy against ground truth and against perf")
    add("")
    by_truth = {truth: ", ".join(dict.fromkeys(r["tool"] for r in acc["table"] if r["truth"] == truth))
                for truth in ("stime", "utime")}  # the tools in the run's order, each once
    add("Each tool does one thing, so its own CPU accounting says how much of it is that thing. The ground "
        "truth is the kernel's accounting of the tool's processes, read with `wait4()` when each exits "
        "(the utime and stime that /proc/PID/stat shows): for a tool whose work is in the kernel "
        f"({by_truth['stime']}) its system time is its category, for one whose work is in a "
        f"user-space library ({by_truth['utime']}) its user time. dpuprof's number is the category's CPU "
        "seconds for the tool's processes in `dpuprof record`'s summary; the total is all categories "
        "together (dpuprof scales each live "
        "process's sampled mix to the CPU time /proc reports, so the total ratio checks that no process of "
        "the tool was missed or counted twice; the category ratio is the real test). `perf record -a -g -F 99` "
        "ran over the same run, and its samples of the same processes were classified with dpuprof's own "
        "rules (`benchmarks/perfclass.py`).")
    add("")
    add(f"Runs: each tool alone for {cfg['acc_alone_s']} s" if cfg["acc_alone"] else "Runs: (alone runs skipped in quick mode)")
    add(f"and all {len({r['tool'] for r in acc['table']})} at once for {cfg['acc_together_s']} s under one "
        f"recording (two cores shared by all); {cfg['acc_reps']} repetition(s) pooled (seconds and samples "
        f"summed, as one longer run; the ratio's range over the repetitions in brackets; each repetition is "
        f"in results.json); dpuprof at its default 99 Hz.")
    add("")
    add("| run | tool | category | ground truth | truth s | dpuprof s | ratio | total ratio | share: truth / dpuprof / perf | worst Δ vs perf |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for r in acc["table"]:
        add(f"| {r['kind']} | {r['tool']} | {r['category']} | {r['truth']} | {num(r['gt_cat_s'])} | "
            f"{num(r['dp_cat_s'])} | {num(r['ratio_cat'], 3)}"
            + (f" [{num(r['ratio_cat_range'][0], 3)}–{num(r['ratio_cat_range'][1], 3)}]" if r.get("reps", 1) > 1 and r.get("ratio_cat_range") else "")
            + f" | {num(r['ratio_total'], 3)} | "
            f"{pct(r['gt_share'])} / {pct(r['dp_share_cat'])} / {pct(r['perf_share_cat'])} | "
            f"{num(r['pp_vs_perf'], 1)} pp ({r['pp_vs_perf_category']}) |")
    add("")
    add("Category shares of each tool's CPU, dpuprof / perf (pooled):")
    add("")
    add("| run | tool | " + " | ".join(CATEGORIES) + " | perf samples |")
    add("|---|---|" + "---|" * len(CATEGORIES) + "---|")
    for r in acc["table"]:
        add(f"| {r['kind']} | {r['tool']} | " + " | ".join(
            f"{num(100 * r['dp_share'][c], 1)} / {num(100 * r['perf_share'][c], 1)}" for c in CATEGORIES)
            + f" | {int(r['perf_samples'] or 0)} |")
    add("")
    add("Notes: " + " ".join(f"{r['tool']}: {r['why']}." for r in acc["table"] if r["kind"] == acc["table"][0]["kind"]))
    add("")


def _render_overhead(res: dict, add) -> None:
    ov = res["overhead"]
    add("## 2. Overhead")
    add("")
    add("Throughput of each workload bare, under `dpuprof record` (all probes, 99 Hz), under "
        "`perf record -a -g -F 99`, and under dpuprof with chosen probes. Each round runs every condition "
        "once, in an order rotated each round; the slowdown is 1 − the median over rounds of "
        "(condition ÷ the same round's bare run). The range is the smallest and largest per-round slowdown. "
        "Recorder CPU is the recording process's own CPU time (dpuprof's or perf's, from /proc/PID/stat) "
        "as a share of one core while the command ran (start-up excluded).")
    add("")
    names = {"ddp": "DDP training (train_ddp.py --variant plain)", "iperf3": "iperf3 -c 127.0.0.1",
             "fio": "fio 4 KiB O_DIRECT randread (psync)"}
    add("| workload | condition | median | slowdown | range | incremental over cpu_sample+proc_tree | "
        "CPU per unit of work | its change | recorder CPU |")
    add("|---|---|---|---|---|---|---|---|---|")
    for wl in ("ddp", "iperf3", "fio"):
        d = ov[wl]
        for cond, v in d["conditions"].items():
            label = cond.replace("probes:", "dpuprof --probes ")
            inc = num(v.get("incremental_pct"), 1, " %") if "incremental_pct" in v else ""
            cost = (f"{num(v['cpu_per_unit'], 3)} s/{unit_word(v['work_unit'])}"
                    if v.get("cpu_per_unit") is not None else "n/a")
            add(f"| {names[wl]} ({d['rounds']} rounds) | {label} | {num(v['median'], 3)} {d['unit']} | "
                f"{'—' if cond == 'bare' else num(v['slowdown_pct'], 1, ' %')} | "
                f"{'' if cond == 'bare' else spread(v)} | {inc} | {cost} | "
                f"{'—' if cond == 'bare' else num(v.get('cpu_cost_pct'), 1, ' %', sign=True)} | "
                f"{'—' if cond == 'bare' else num(v.get('recorder_cpu_pct'), 1, ' %')} |")
    add("")
    add("CPU per unit of work is the `wait4` CPU time of the launched command and everything it reaped "
        "(the workload's whole process tree, plus the profiler when there is one, less the profiler's "
        "own start-up before the command began: compiling the probes happens once per recording), divided "
        "by the work done (GB moved, IOs, optimizer steps; the training's own start-up is included in "
        "every condition alike). It counts what the profiler costs in CPU (its BPF programs run in the "
        "workload's context and are charged to it) and is less sensitive to other load than throughput, "
        "though not immune: a contended loopback pair batches differently, which moves its CPU per GB.")
    add("")
    add("Each probe is measured on the workload whose events it handles (softirq, net_dev and sock_io on "
        "iperf3's packets and calls; block_io on fio's IOs); `cpu_sample` and `proc_tree` are always loaded, "
        "so their cost is the `--probes cpu_sample,proc_tree` row.")
    add("")
    _render_bpf_cost(res, add, names)


def _render_bpf_cost(res: dict, add, names: dict) -> None:
    """What each probe costs in CPU (BPF run time and the recorder's CPU), where measured."""
    bc = res["overhead"].get("bpf_cost") or {}
    if not bc:
        return
    add("### What each probe costs in CPU")
    add("")
    add("One more run per condition with `kernel.bpf_stats_enabled=1` (the kernel then times every BPF "
        "program run; restored afterwards), reading the recorder's programs from /proc/PID/fdinfo and the "
        "recorder's own CPU from /proc/PID/stat, both over the time the command ran. These are CPU "
        "times, so other load on the machine barely moves them (the timing itself adds a few tens of ns "
        "per run). 'Machine' divides by all cores: the slowdown to expect for a workload that keeps "
        "every core busy. BPF time is host-wide: the programs run for every process's events, other "
        "work on a shared machine included. The workload's own CPU is the `wait4` CPU of the recorder's "
        "tree less the recorder's own CPU and less the BPF time (charged mostly to the workload's tasks; "
        "taking all of it out is the conservative side), over the time the command ran.")
    add("")
    add("| workload | condition | BPF runs/s | ns per run | BPF, % of a core | increment over cpu_sample+proc_tree | "
        "sampler (perf_event) % of a core | recorder, % of a core | BPF + recorder, % of the machine | "
        "workload's own CPU, % of a core | BPF + recorder, % of the workload's CPU |")
    add("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [(wl, cond, row) for wl, conds in bc.items() for cond, row in conds.items()]
    lg = res.get("long") or {}
    if lg.get("bpf"):
        rows.append(("ddp" if lg.get("workload") == "ddp" else lg.get("workload"), "dpuprof (long run)",
                     {"bpf": lg["bpf"], "recorder_cpu_pct": lg.get("recorder_cpu_pct"),
                      "machine_pct": (lg["bpf"]["core_pct"] + (lg.get("recorder_cpu_pct") or 0))
                      / (res["machine"]["cpus"] or 1)}))
    for wl, cond, row in rows:
        b = row.get("bpf") or {}
        pe = (b.get("by_type") or {}).get("perf_event", {})
        add(f"| {names.get(wl, wl)} | {cond.replace('probes:', '--probes ')} | "
            f"{b.get('runs_per_s', 0):,.0f} | {num(b.get('ns_per_run'), 0)} | {num(b.get('core_pct'), 2, ' %')} | "
            f"{num(row.get('incremental_core_pct'), 2, ' %') if 'incremental_core_pct' in row else ''} | "
            f"{num(pe.get('core_pct'), 2, ' %')} | {num(row.get('recorder_cpu_pct'), 2, ' %')} | "
            f"{num(row.get('machine_pct'), 2, ' %')} | {num(row.get('workload_core_pct'), 1, ' %')} | "
            f"{num(row.get('workload_pct'), 2, ' %')} |")
    add("")


def _render_long(res: dict, add) -> None:
    lg = res["long"]
    add("## 3. Output size, and 4b. recorder memory")
    add("")
    what = ("DDP training (train_ddp.py --variant plain)" if lg["workload"] == "ddp" else
            f"{lg['workload']} (quick mode)")
    add(f"One run of {what}, {num(lg['duration_s'] / 60, 1)} min under `dpuprof record` (defaults) while "
        f"`perf record -a -g -F 99` recorded the same span ({num(lg['metric'], 2)} {lg['unit']}).")
    add("")
    add("| output | bytes | MB per minute |")
    add("|---|---|---|")
    add(f"| dpuprof recording (.rec) | {lg['rec_bytes']:,} | {num(lg['rec_mb_per_min'], 3)} |")
    add(f"| perf.data | {lg['perf_bytes']:,} | {num(lg['perf_mb_per_min'], 3)} |")
    add(f"| perf.data ÷ recording | | {num(lg['size_ratio'], 1)}× |")
    add("")
    comp = lg.get("rec_composition") or []
    if comp:
        add(f"The recording's bytes by table or index (SQLite dbstat), {lg.get('stacks')} distinct stacks: "
            + ", ".join(f"{name} {b:,}" for name, b in comp) + ".")
        add("")
    add(f"Recorder RSS (from /proc/PID/status every 0.5 s): peak VmHWM {num(lg['rss_peak_hwm_mb'], 1, ' MB')} "
        f"(it includes the probes' compile at start-up), highest VmRSS while the command ran "
        f"{num(lg['rss_steady_max_mb'], 1, ' MB')}, growth over the second half "
        f"{num(lg['rss_slope_mb_per_min'], 2, ' MB/min')}; continuing at that rate, a 10-minute run peaks at "
        f"{num(lg['rss_10min_estimate_mb'], 1, ' MB')}. The recorder's own CPU while the command ran: "
        f"{num(lg.get('recorder_cpu_pct'), 1, ' %')} of one core ({num(lg.get('recorder_cpu_pct_second_half'), 1, ' %')} "
        f"over the second half). Lost samples: {lg['lost_samples']}.")
    if lg.get("smaps_top"):
        add("")
        add("Where the recorder's RSS lived near the end (/proc/PID/smaps, by mapping): "
            + ", ".join(f"{name} {num(mb, 1, ' MB')}" for name, mb in lg["smaps_top"])
            + f"; file-backed (shared-library pages) {num(lg.get('rss_file_mb_last'), 1, ' MB')} in all.")
    series = lg.get("rss_series", [])
    if series:
        add("")
        add("RSS over time (seconds since launch: MB): " + ", ".join(f"{t:g}: {r:g}" for t, r in series))
    add("")
    _render_stack_loss(lg, add)
    _render_recursion(lg, add)


def _render_stack_loss(lg: dict, add) -> None:
    """The long run's stack loss per minute, by kind (benchmarks/stack_loss.py), where measured."""
    wins = (lg.get("stack_loss") or {}).get("windows")
    if not wins:
        return
    labels = {"kernel_map": "kernel map", "user_map": "user map", "stack_error": "walk errors",
              "user_unwalkable": "unwalkable user", "kernel_old": "kernel (lumped)", "user_old": "user (lumped)"}
    kinds = [k for k in labels if k in wins[0]]
    add("### Stack loss per minute")
    add("")
    add("Stacks lost per minute of the same run (the `lost` table, read with `benchmarks/stack_loss.py`'s "
        "loss_windows), as a share of the host's CPU samples in that minute. Map loss (a collision in, or "
        "a full, stack map) is counted apart from unwalkable user stacks (code without frame pointers), "
        "so that one never masks the other.")
    add("")
    add("| minute | start s | samples | " + " | ".join(f"{labels[k]} lost" for k in kinds) + " |")
    add("|---:|---:|---:|" + "---:|" * len(kinds))
    for w in wins:
        add(f"| {w['window']} | {w['start_s']:.0f} | {w['samples']:,} | "
            + " | ".join(f"{w[k]:,} ({num(w[k + '_pct'], 2, ' %')})" for k in kinds) + " |")
    add("")


def _render_recursion(lg: dict, add) -> None:
    """Per BPF program: its events (run_cnt) and those the kernel skipped, where measured."""
    rc = lg.get("recursion")
    if not rc or "error" in rc:
        return
    progs = lg.get("bpf_programs") or {}
    add("### Recursion misses per program")
    add("")
    add("Events each BPF program handled (its run count, kernel.bpf_stats_enabled, from when the recorder "
        "started to the end) and those the kernel skipped under its recursion protection (the recording's "
        "`missed_<program>` rows, or the kernel's own count per program where larger); share = missed ÷ "
        "(runs + missed).")
    add("")
    add("| program | hook | runs | missed | share |")
    add("|---|---|---:|---:|---:|")
    for name, r in rc.items():
        share = "n/a" if r["share"] is None else num(100 * r["share"], 3, " %")
        runs = "unknown" if r["runs"] is None else f"{r['runs']:,}"
        add(f"| {name} | {'/'.join(progs.get(name, {}).get('types') or ['?'])} | {runs} | {r['missed']:,} | {share} |")
    add("")


def _render_startup(res: dict, add) -> None:
    st = res["startup"]
    add("## 4a. Start-up")
    add("")
    add("Time from launching the command to the moment the child (`date +%s.%N`) runs: the child prints the "
        "time at its exec, compared with the launch time.")
    add("")
    add("| launcher | median | max | runs |")
    add("|---|---|---|---|")
    for cond, label in (("bare", "bare `date`"), ("dpuprof", "`dpuprof record -- date`"),
                        ("dpuprof_cached", "the same, probes from the cache (`DPUPROF_PROBE_CACHE`)"),
                        ("dpuprof_compiled", "the same, compiling (`DPUPROF_PROBE_CACHE=off`)"),
                        ("perf", "`perf record -a -g -F 99 -- date`")):
        v = st.get(cond)
        if v is None:  # a run from before the probe cache
            continue
        add(f"| {label} | {num(v['median_s'], 3, ' s')} | {num(v['max_s'], 3, ' s')} | {len(v['values'])} |")
    p = st.get("parts") or {}
    if p:
        add("")
        add(f"Its parts, measured separately (median): the interpreter's start {num(p['python_start_s'], 3, ' s')}, "
            f"importing bcc {num(p['import_bcc_s'], 3, ' s')}, compiling and loading all probes "
            f"{num(p['compile_load_s'], 3, ' s')}.")
    add("")


def _render_report(res: dict, add) -> None:
    rep = res["report"]
    add("## 5. Report time")
    add("")
    if "skipped" in rep:
        add(f"Not measured: {rep['skipped']}.")
    else:
        if rep.get("note"):
            add(rep["note"] + ".")
            add("")
        add("| command | runs | median | min | max | target |")
        add("|---|---|---|---|---|---|")
        for r in rep["results"]:
            add(f"| `{r['command']}` | {r['runs']} | {num(r['median_s'], 3, ' s')} | {num(r['min_s'], 3, ' s')} | "
                f"{num(r['max_s'], 3, ' s')} | < {r['target_s']:g} s |")
    add("")


