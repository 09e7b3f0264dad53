"""The terminal tables of a projection (``dpuprof project``'s default output): host core-seconds
before/after/freed per category, the offloads that pay and those that do not, capacity, cores for
AI, the job's speedup range, all-reduce extrapolation and a sweep, then assumptions and warnings.

Input is the projection dict of docs/projection-contract.md (``Projection.as_json()``)."""

from __future__ import annotations


def _f(x, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_terminal(proj: dict) -> str:
    """Plain-text tables of a projection dict (no colour, fits 100 columns)."""
    out = []
    dpu = proj.get("dpu") or {}
    host = proj.get("host") or {}
    out.append(f"Projection of {proj.get('recording')} on {dpu.get('name')}: {dpu.get('description', '')}")
    mode = proj.get("mode_override")
    out.append(f"Host: {host.get('cpu_count')} CPUs x {_f(host.get('duration_s'), '.1f')} s = "
               f"{_f(host.get('host_capacity_s'), '.1f')} CPU-seconds"
               + (f"; every mechanism forced to {mode}" if mode else ""))
    out.append("")
    out.append(f"{'Category':<14}{'before s':>11}{'after s':>11}{'freed s':>11}{'freed cores':>13}")
    dur = host.get("duration_s") or 0
    for cat, v in (proj.get("by_category") or {}).items():
        cores = v["freed_s"] / dur if dur else 0.0
        out.append(f"{cat:<14}{v['before_s']:>11.2f}{v['after_s']:>11.2f}{v['freed_s']:>11.2f}{cores:>13.3f}")
    t = proj.get("totals") or {}
    out.append(f"{'total busy':<14}{t.get('before_s', 0):>11.2f}{t.get('after_s', 0):>11.2f}"
               f"{t.get('freed_s', 0):>11.2f}{(t.get('freed_s', 0) / dur if dur else 0):>13.3f}")
    out.append("")

    rows = [r for r in proj.get("rows") or [] if (r.get("before_s") or 0) >= 0.0005]
    tiny = len(proj.get("rows") or []) - len(rows)
    if rows:
        out.append("Offloads that pay (slice of the subcategory each mechanism covers):")
        out.append(f"  {'subcategory':<20}{'mechanism':<22}{'mode':<8}{'alpha':>6}{'n':>11}"
                   f"{'before s':>10}{'after s':>9}{'S':>8}")
        for r in rows:
            flag = " [capacity-limited]" if r.get("capacity_limited") else ""
            out.append(f"  {_short(r['subcategory'], 19):<20}{_short(r['mechanism'], 21):<22}{r['mode']:<8}"
                       f"{_f(r['alpha']):>6}{_f(r['n'], '.0f'):>11}{_f(r['before_s']):>10}{_f(r['after_s']):>9}"
                       f"{_f(r['speedup'], '.2f', 'inf'):>8}{flag}")
        if tiny:
            out.append(f"  ({tiny} slice{'s' if tiny > 1 else ''} under 0.5 ms of CPU not shown; see --format json)")
        out.append("  Needs:")
        for mech, req in dict.fromkeys((r["mechanism"], r["requires"]) for r in rows):
            out.append(f"    {mech}: {req}")
        out.append("")
    rejected = [r for r in proj.get("rejected") or [] if (r.get("before_s") or 0) > 0]
    if rejected:
        out.append("Offloads that do not pay or free nothing here (left on the host):")
        for r in rejected:
            out.append(f"  {r['subcategory']:<20}{r['mechanism']:<22}S = {_f(r['speedup'], '.3f', 'inf')}  "
                       f"({_f(r['before_s'])} s; alpha {_f(r['alpha_profile'])})")
        out.append("")
    left = [r for r in proj.get("left_on_host") or [] if (r.get("before_s") or 0) > 0.0005]
    if left:
        out.append("No mechanism of this device covers: " +
                   ", ".join(f"{r['subcategory']} {r['before_s']:.2f} s" for r in left))
        out.append("")

    caps = proj.get("capacity") or []
    if caps:
        out.append("Capacity:")
        for c in caps:
            state = "BOTTLENECK: " + c["action"] if c["bottleneck"] else "ok"
            out.append(f"  {c['resource']:<32} demand {c['demand']:.3g} / limit {c['limit']:.3g} {c['unit']}  {state}")
        out.append("")

    cfa = proj.get("cores_for_ai") or {}
    cpu = host.get("cpu_count")
    out.append(f"Host cores available for AI: {_f(cfa.get('before_pct'), '.1f')} % ({_f(cfa.get('before_cores'))} "
               f"of {cpu}) -> {_f(cfa.get('after_pct'), '.1f')} % ({_f(cfa.get('after_cores'))} of {cpu})")
    sp = proj.get("speedup") or {}
    out.append(f"Speedup of the recorded job: low {_f(sp.get('low'), '.3f', 'unbounded')}   "
               f"expected {_f(sp.get('expected'), '.3f', 'unbounded')}   high {_f(sp.get('high'), '.3f', 'unbounded')}")
    if sp.get("regime"):
        out.append(f"  regime: {sp['regime']}: {sp.get('regime_why') or ''}")
    if sp.get("contention_proxy") is not None:
        out.append(f"  CPU-contention proxy T/(T-F): {_f(sp.get('contention_proxy'), '.3f', 'unbounded')}"
                   "   ([low, high] are model bounds, not a confidence interval)")
    if (sp.get("window") or {}).get("how"):
        out.append(f"  window: {sp['window']['how']}")
    if not sp.get("pays"):
        out.append("  Offload does not pay on this recording: no mechanism frees host CPU.")
    ar = proj.get("allreduce")
    if ar:
        out.append("")
        alg = ar.get("algorithm") or {}
        out.append(f"All-reduce at {ar['nodes']} nodes x {ar['gpus_per_node']} GPUs ({ar['ranks']} ranks), "
                   f"{ar['bytes_per_step'] / 1e6:.3f} MB per operation:")
        if ar.get("method"):
            out.append(f"  operations: {ar['method']}")
        out.append(f"  TCP  {ar['tcp_us']:>12.1f} us per operation ({alg.get('tcp', 'ring')})")
        out.append(f"  RDMA {ar['rdma_us']:>12.1f} us per operation ({alg.get('rdma', 'ring')})")
        out.append(f"  over the recorded {ar['ops_recorded']:.0f} operations: TCP {ar['tcp_total_s']:.3f} s, "
                   f"RDMA {ar['rdma_total_s']:.3f} s (recording lasted {ar['recorded_duration_s']:.1f} s)")
        if ar.get("measured_us_per_op") is not None:
            out.append(f"  measured on the recording: {ar['measured_us_per_op']:.1f} us per operation "
                       f"({ar['recorded_ranks']} ranks)")
        vc = ar.get("vendor_comparison")
        if vc:
            out.append(f"  vendor brief {vc['vendor']}; modelled at {vc['nodes']} x {vc['gpus_per_node']}: " +
                       "; ".join(f"{r['message_bytes']:,} B TCP {r['tcp_us']:.1f} us -> RDMA {r['rdma_us']:.1f} us"
                                 for r in vc["sizes"]))
    sw = proj.get("sweep")
    if sw:
        out.append("")
        out.append(f"Sweep of {sw['param']} ({sw['unit']}) on {sw.get('mechanism') or 'every mechanism'}"
                   + (f"; enters {'; '.join(sw['enters'])}" if sw.get("enters") else "") + ":")
        out.append(f"  {'value':>12}{'low':>9}{'expected':>10}{'high':>9}{'freed s':>10}{'cores for AI %':>16}")
        for p in sw["points"]:
            out.append(f"  {p['value']:>12.4g}{_f(p['low'], '.3f'):>9}{_f(p['expected'], '.3f', 'inf'):>10}"
                       f"{_f(p['high'], '.3f', 'inf'):>9}{p['freed_s']:>10.2f}{p['after_pct']:>16.1f}")
        if sw.get("flat"):
            out.append(f"  Flat: {sw.get('flat_reason')}")
    out.append("")
    out.append("Assumptions:")
    for a in (proj.get("assumptions") or []) + (sp.get("assumptions") or []):
        out.append(f"  - {a}")
    warns = proj.get("warnings") or []
    if warns:
        out.append("Warnings:")
        for w in warns:
            out.append(f"  ! {w}")
    return "\n".join(out)
