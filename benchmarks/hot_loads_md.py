"""The Markdown report of benchmarks/hot_loads.py (issue 32): cost, counts, BPF programs, targets."""

from __future__ import annotations


def _f(x, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _thr(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def render(summary: dict, meta: dict) -> str:
    """The Markdown report of ``summary`` (hot_loads.summarize) and ``meta`` (machine, trees, loads,
    options; ``counted``: {load: what the recording counts of it})."""
    L = ["# Recording cost on hot loads (issue 32)", "",
         f"{meta.get('rounds')} round(s) of {meta.get('duration_s')} s per load and condition; "
         f"{meta.get('cpus')} CPUs, kernel {meta.get('kernel')}; load average "
         f"{_f(meta.get('load_before'))} before, {_f(meta.get('load_after'))} after. Medians over rounds.", ""]
    if meta.get("command"):
        L[-1:-1] = ["", f"Measured on {meta.get('date_utc')} by `{meta['command']}`."]
    for label, tree in (meta.get("trees") or {}).items():
        L.append(f"- `dpuprof:{label}`: {tree}")
    for name, what in (meta.get("commands") or {}).items():
        L.append(f"- {name}: `{what}`")
    L += _cost(summary, meta) + _counts(summary, meta) + _programs(summary)
    L += ["", "## Targets", "", "| target | condition | value | met |", "|---|---|---:|---|"]
    for v in summary["verdicts"]:
        met = "not measured" if v["met"] is None else ("yes" if v["met"] else "**no**")
        L.append(f"| {v['target']} | {v['condition']} | {_f(v['value'], '{:.5g}')} | {met} |")
    return "\n".join(L) + "\n"


def _cost(summary: dict, meta: dict) -> list[str]:
    L = ["", "## Cost", "",
         "CPU seconds per run. Cost = (BPF + recorder) / (workload - BPF) for dpuprof; perf's own CPU / "
         "workload for perf (its in-kernel sampling is not in it). On fio the denominator is the "
         "machine's busy CPU over the run instead (busy s: /proc/stat, every CPU, first tool's start to "
         "last one's end), less the recorder's (perf's) CPU in that window, the script's own and BPF: "
         "fio's reads are served by the loop device's kernel workers, CPU charged to no fio process. "
         "Tail: the part of the recorder's (perf's) CPU after the command ended (final drain and write), "
         "in the cost. Start-up: its CPU before the command started, not in the cost.", "",
         "| load | condition | throughput | vs bare | workload CPU s | busy s | BPF s | recorder / perf s "
         "| tail s | cost % | start-up s | MB/min |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for load, per_cond in summary["loads"].items():
        unit = (meta.get("units") or {}).get(load, "")
        for cond, c in per_cond.items():
            L.append(f"| {load} | {cond} | {_thr(c['throughput'])} {unit} | {_f(c['vs_bare'], '{:.3f}')} "
                     f"| {_f(c['workload_cpu_s'])} | {_f(c.get('host_busy_s'))} | {_f(c['bpf_s'], '{:.3f}')} "
                     f"| {_f(c['profiler_s'], '{:.3f}')} | {_f(c['tail_s'], '{:.3f}')} | {_f(c['cost_pct'])} "
                     f"| {_f(c['startup_s'])} | {_f(c['mb_per_min'], '{:.3f}')} |")
    return L


def _counts(summary: dict, meta: dict) -> list[str]:
    counted = meta.get("counted") or {}
    rows = [(load, cond, c) for load, per_cond in summary["loads"].items() for cond, c in per_cond.items()
            if cond.startswith("dpuprof") and c.get("tool_count") is not None]
    if not rows:
        return []
    L = ["", "## Counts", "",
         "What the recording counted of the load against the tool's own count (iperf3: bytes its client "
         "sent, the omitted first second included, against `lo` rx bytes, headers and the control "
         "connection included; fio: its jobs[0].read.total_ios against block_io reads on the loop "
         "device). Medians over rounds.", "",
         "| load | condition | counted | recording | tool's | recording / tool's |", "|---|---|---|---:|---:|---:|"]
    for load, cond, c in rows:
        L.append(f"| {load} | {cond} | {counted.get(load, '-')} | {_thr(c.get('recorded_count'))} "
                 f"| {_thr(c.get('tool_count'))} | {_f(c.get('count_ratio'), '{:.4f}')} |")
    return L


def _programs(summary: dict) -> list[str]:
    L = ["", "## BPF programs", "",
         "Per program, while the command ran: ns per event and events per second (the numbers the "
         "probes' header comments quote), % of one core. Programs that did not run are left out "
         "(they are in the JSON).", "",
         "| load | condition | program | type | events/s | ns/event | % of a core |",
         "|---|---|---|---|---:|---:|---:|"]
    for load, per_cond in summary["loads"].items():
        for cond, c in per_cond.items():
            progs = [(n, p) for n, p in c.get("programs", {}).items() if p["events_per_s"]]
            for name, p in sorted(progs, key=lambda kv: -(kv[1]["core_pct"] or 0)):
                L.append(f"| {load} | {cond} | {name} | {p['type']} | {_thr(p['events_per_s'])} "
                         f"| {_f(p['ns_per_event'], '{:.0f}')} | {_f(p['core_pct'])} |")
    return L
