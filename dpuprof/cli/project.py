"""``dpuprof project``: project what a DPU would free on a recording, and store the projection in
the current directory (``dir/RUN.rec`` -> ``./RUN.proj.json``) where ``dpuprof report`` finds it.

The current directory, as perf (``perf.data``) and Nsight Systems (``report1.nsys-rep``) write there:
the recording's own folder may be read-only, someone else's, or a fixture inside a checkout."""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  dpuprof project --dpu bluefield                  # newest *.rec here, BlueField-3
  dpuprof project run.rec --dpu bluefield-2 --format json
  dpuprof project run.rec --dpu ./my-dpu.toml --nodes 32 --gpus-per-node 8
  dpuprof project run.rec --sweep arm_offload.A=0.25:2   # Arm core speed (enters Arm-core capacity)
  dpuprof project run.rec --sweep rdma.o0=0:5000        # one mechanism's dispatch cost, ns
  dpuprof project run.rec --set virtio_fs.mode=async    # a what-if on one mechanism
  dpuprof project run.rec --dpu ideal -o ideal.proj.json
  dpuprof project run.rec --mode sync              # what if every offload were synchronous
  dpuprof project run.rec --dpu ideal --only crypto # an ideal crypto-only offload
  dpuprof project run.rec --time 30:90             # job speedup read from seconds 30-90
"""

#: --mode words: the profile's (sync_os) and the command line's (sync-os) spelling.
MODES = ("sync", "sync-os", "sync_os", "async")
FORMATS = ("terminal", "json")


def projection_path(recording):
    """``dir/RUN.rec`` -> ``RUN.proj.json`` in the current directory (dpuprof.projection.store)."""
    from dpuprof.projection.store import default_output

    return default_output(recording)


@click.command(epilog=EPILOG)
@click.argument("recording", required=False)
@click.option("--dpu", default="bluefield", show_default=True, metavar="NAME|PATH",
              help="DPU profile: bluefield (= bluefield-3), bluefield-2, connectx-7, ideal, "
                   "or the path of your own .toml profile.")
@click.option("--format", "fmt", default="terminal", show_default=True, type=click.Choice(FORMATS),
              help="Output format on stdout.")
@click.option("-o", "--output", metavar="PATH",
              help="Where to store the projection (default: RUN.proj.json in the current directory, "
                   "where dpuprof report RUN.rec looks for it).")
@click.option("--nodes", metavar="N", type=click.IntRange(1, 1_000_000),
              help="Extrapolate all-reduce time to N nodes (ring, TCP vs RDMA).")
@click.option("--gpus-per-node", metavar="G", type=click.IntRange(1, 4096),
              help="Ranks per node for --nodes (default 1).")
@click.option("--sweep", "sweep_spec", metavar="MECH.PARAM=lo:hi[:points]",
              help="Speedup against one parameter of one mechanism: alpha, A, o0, L, Q, o1 (ns). A bare "
                   "PARAM works only where exactly one mechanism uses it.")
@click.option("--set", "set_specs", multiple=True, metavar="MECH.PARAM=value",
              help="Set one mechanism's parameter (alpha, A, o0, L, Q, o1, mode) for a what-if; repeatable.")
@click.option("--mode", metavar="sync|sync-os|async", type=click.Choice(MODES),
              help="Override every mechanism's execution mode (default: each mechanism's own).")
@click.option("--only", "only", metavar="CATEGORY[,CATEGORY]",
              help="Offload only these categories (network, storage, crypto, compression).")
@click.option("--time", "time_range", default="steady", show_default=True, metavar="START:END|steady",
              help="Window the job speedup is read from: seconds from the start, or 'steady' "
                   "(after warm-up, from step markers or the data).")
def project(recording, dpu, fmt, output, nodes, gpus_per_node, sweep_spec, set_specs, mode, only, time_range):
    """Project what a DPU would free on RECORDING (default: the newest *.rec here).

    For each infrastructure subcategory (network, storage, crypto, compression) and each offload
    mechanism of the DPU, applies the Accelerometer model (ASPLOS 2020) to the measured host CPU,
    with offload counts from the recorded packets, I/Os and socket calls, and the card's capacity
    (line rate, crypto Gb/s, Arm cores). Prints host core-seconds before, after and freed per
    category, host cores available for AI before and after, and a speedup range for the job.
    Every number is traceable to the DPU profile's cited sources.
    """
    from dpuprof.errors import UserError

    # cheap checks first, before pandas is imported (click has checked each option's type and range)
    mode = mode.replace("-", "_") if mode else None
    if gpus_per_node is not None and nodes is None:
        raise UserError("--gpus-per-node needs --nodes")
    from dpuprof.categories import INFRASTRUCTURE
    from dpuprof.project.window import parse_range

    only_cats = None
    if only is not None:
        only_cats = tuple(c.strip() for c in only.split(",") if c.strip())
        bad = [c for c in only_cats if c not in INFRASTRUCTURE]
        if bad or not only_cats:
            raise UserError(f"--only {only!r}: use categories from {', '.join(INFRASTRUCTURE)}")
    window = parse_range(time_range)

    from pathlib import Path

    from dpuprof.cli.common import echo_json, resolve_recording
    from dpuprof.project import from_recording, load_profile
    from dpuprof.project import build_projection as run_projection
    from dpuprof.project import sweep as sweep_mod
    from dpuprof.projection import store as projection_store
    from dpuprof.recording import load

    sweep_args = sweep_mod.parse(sweep_spec) if sweep_spec else None

    profile = sweep_mod.apply_sets(load_profile(dpu), set_specs)
    if sweep_args:  # an ambiguous or unknown target fails before the recording is read
        sweep_mod.resolve(profile.with_overrides(mode=mode) if mode else profile, sweep_args[0])
    path = resolve_recording(recording)
    rec = load(path)
    inp = from_recording(rec)
    proj = run_projection(inp, profile, nodes=nodes, gpus_per_node=gpus_per_node or 1, mode=mode, only=only_cats,
                          window=window)
    if sweep_args:
        proj["sweep"] = sweep_mod.sweep(inp, profile, *sweep_args, mode=mode, only=only_cats, window=window)

    proj["set"] = list(set_specs) or None
    proj["recording"] = str(recording) if recording else str(path)
    proj["recording_sha256"] = projection_store.sha256(path)
    proj = projection_store.validate(proj).as_json()

    target = projection_path(path) if output is None else Path(output)
    stored = None
    try:
        stored = projection_store.write(proj, target)
    except OSError as err:
        why = err.strerror or str(err)
        if output is not None:
            raise UserError(f"cannot write {target}: {why}") from None
        click.echo(f"dpuprof: warning: cannot store the projection as {target} ({why}); "
                   "use -o PATH so dpuprof report can find it", err=True)

    if fmt == "json":
        echo_json(proj)
        if stored:
            click.echo(f"dpuprof: projection stored in {stored}", err=True)
    else:
        click.echo(render_terminal(proj))
        if stored and output is None:
            click.echo(f"\nStored in {stored} (dpuprof report {path} draws it).")
        elif stored:
            click.echo(f"\nStored in {stored} (draw it with: dpuprof report {path} --projection {stored}).")


# ------------------------------------------------------------------------------ terminal table

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
