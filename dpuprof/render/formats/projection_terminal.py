"""The terminal tables of a projection (``dpuprof project``'s default output): host core-seconds
before/after/freed per category, the offloads that pay and those that do not, capacity, cores for
AI, the job's speedup range, all-reduce extrapolation and a sweep, then assumptions and warnings.

Input is the typed Projection (dpuprof.projection.schema; a dict of docs/projection-contract.md is
validated into one). Tables are laid out by rich (dpuprof.render.console); plain text unless
``color``."""

from __future__ import annotations

from dpuprof.projection.schema import Projection
from dpuprof.projection.store import validate
from dpuprof.render import offload_modes
from dpuprof.render.console import clean, styled, table, to_text


def _f(x, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def render_terminal(proj: Projection | dict, color: bool = False) -> str:
    """The projection's tables and notes as terminal text (ANSI styles only when ``color``).
    ValueError (one line) when a dict does not fit the Projection schema."""
    if not isinstance(proj, Projection):
        proj = validate(proj)
    parts: list = []
    for section in (_header, _categories, _offloads, _capacity, _speedup, _allreduce, _sweep, _notes):
        parts += section(proj)
    return to_text(parts, color).rstrip("\n")


def _header(proj: Projection) -> list:
    dpu, host, mode = proj.dpu, proj.host, proj.mode_override
    return [styled(f"Projection of {proj.recording} on {dpu.name}: {dpu.description}", "bold"),
            clean(f"Host: {host.cpu_count} CPUs x {host.duration_s:.1f} s = {host.host_capacity_s:.1f} CPU-seconds"
                  + (f"; every mechanism forced to {mode}" if mode else "")), ""]


def _categories(proj: Projection) -> list:
    dur = proj.host.duration_s
    rows = [[cat, f"{v.before_s:.2f}", f"{v.after_s:.2f}", f"{v.freed_s:.2f}", f"{(v.freed_s / dur if dur else 0):.3f}"]
            for cat, v in proj.by_category.items()]
    t = proj.totals
    rows.append(["total busy", f"{t.before_s:.2f}", f"{t.after_s:.2f}", f"{t.freed_s:.2f}",
                 f"{(t.freed_s / dur if dur else 0):.3f}"])
    return [table(["Category", "before s", "after s", "freed s", "freed cores"], rows, right=(1, 2, 3, 4), indent=0),
            ""]


def _offloads(proj: Projection) -> list:
    out: list = []
    rows = [r for r in proj.rows if (r.before_s or 0) >= 0.0005]
    tiny = len(proj.rows) - len(rows)
    if rows:
        out.append("Offloads that pay (slice of the subcategory each mechanism covers):")
        out.append(table(["subcategory", "mechanism", "mode", "alpha", "n", "before s", "after s", "S", ""],
                         [[r.subcategory, r.mechanism, r.mode, _f(r.alpha), _f(r.n, ".0f"), _f(r.before_s),
                           _f(r.after_s), _f(r.speedup, ".2f", "inf"), "[capacity-limited]" if r.capacity_limited else ""]
                          for r in rows],
                         right=(3, 4, 5, 6, 7), max_w=21))
        if tiny:
            out.append(f"  ({tiny} slice{'s' if tiny > 1 else ''} under 0.5 ms of CPU not shown; see --format json)")
        out.append("  Needs:")
        out += [clean(f"    {mech}: {req}") for mech, req in dict.fromkeys((r.mechanism, r.requires) for r in rows)]
        out.append("")
    rejected = [r for r in proj.rejected if (r.before_s or 0) > 0]
    if rejected:  # alpha_profile: the profile's alpha, an extra key of rejected rows
        out.append("Offloads that do not pay or free nothing here (left on the host):")
        out.append(table([], [[r.subcategory, r.mechanism, f"S = {_f(r.speedup, '.3f', 'inf')}",
                               f"({_f(r.before_s)} s; alpha {_f(getattr(r, 'alpha_profile', None))})"]
                              for r in rejected]))
        out.append("")
    left = [r for r in proj.left_on_host if (r.before_s or 0) > 0.0005]
    if left:
        out += [clean("No mechanism of this device covers: " +
                      ", ".join(f"{r.subcategory} {r.before_s:.2f} s" for r in left)), ""]
    return out


def _capacity(proj: Projection) -> list:
    caps = proj.capacity
    if not caps:
        return []
    rows = [[c.resource, f"demand {_f(c.demand, '.3g')} / limit {_f(c.limit, '.3g')} {c.unit}",
             "BOTTLENECK: " + c.action if c.bottleneck else "ok"] for c in caps]
    return ["Capacity:", table([], rows, max_w=120), ""]


def _speedup(proj: Projection) -> list:
    cfa, sp, cpu = proj.cores_for_ai, proj.speedup, proj.host.cpu_count
    beside = offload_modes.headline(sp, proj.mode_override)
    out = [f"Host cores available for AI: {_f(cfa.before_pct, '.1f')} % ({_f(cfa.before_cores)} "
           f"of {cpu}) -> {_f(cfa.after_pct, '.1f')} % ({_f(cfa.after_cores)} of {cpu})",
           styled(f"Speedup of the recorded job: low {_f(sp.low, '.3f', 'unbounded')}   "
                  f"expected {_f(sp.expected, '.3f', 'unbounded')}   high {_f(sp.high, '.3f', 'unbounded')}"
                  + (f"   ({beside})" if beside else ""), "bold")]
    out += [clean(f"  {line}") for line in offload_modes.details(sp)]
    if sp.regime:
        out.append(clean(f"  regime: {sp.regime}: {sp.regime_why}"))
    if sp.contention_proxy is not None:
        out.append(f"  CPU-contention proxy T/(T-F): {sp.contention_proxy:.3f}"
                   "   ([low, high] are model bounds, not a confidence interval)")
    if sp.window is not None and sp.window.how:
        out.append(clean(f"  window: {sp.window.how}"))
    if not sp.pays:
        out.append("  Offload does not pay on this recording: no mechanism frees host CPU.")
    return out


def _allreduce(proj: Projection) -> list:
    ar = proj.allreduce
    if ar is None:
        return []
    alg = ar.algorithm
    out = ["", f"All-reduce at {ar.nodes} nodes x {ar.gpus_per_node} GPUs ({_f(ar.ranks, 'd', '?')} ranks), "
               f"{_f(ar.bytes_per_step and ar.bytes_per_step / 1e6, '.3f', '?')} MB per operation:"]
    if ar.method:
        out.append(clean(f"  operations: {ar.method}"))
    out.append(table([], [["TCP", _f(ar.tcp_us, ".1f"), f"us per operation ({alg.get('tcp', 'ring')})"],
                          ["RDMA", _f(ar.rdma_us, ".1f"), f"us per operation ({alg.get('rdma', 'ring')})"]],
                     right=(1,)))
    out.append(f"  over the recorded {_f(ar.ops_recorded, '.0f')} operations: TCP {_f(ar.tcp_total_s, '.3f')} s, "
               f"RDMA {_f(ar.rdma_total_s, '.3f')} s (recording lasted {_f(ar.recorded_duration_s, '.1f')} s)")
    if ar.measured_us_per_op is not None:
        out.append(f"  measured on the recording: {ar.measured_us_per_op:.1f} us per operation "
                   f"({ar.recorded_ranks} ranks)")
    vc = ar.vendor_comparison
    if vc:
        out.append(clean(f"  vendor brief {vc.vendor}; modelled at {vc.nodes} x {vc.gpus_per_node}: " +
                         "; ".join(f"{r.message_bytes:,} B TCP {r.tcp_us:.1f} us -> RDMA {r.rdma_us:.1f} us"
                                   for r in vc.sizes)))
    return out


def _sweep(proj: Projection) -> list:
    sw = proj.sweep
    if not sw:
        return []
    out = ["", clean(f"Sweep of {sw.param} ({sw.unit}) on {sw.mechanism or 'every mechanism'}"
                     + (f"; enters {'; '.join(sw.enters)}" if sw.enters else "") + ":")]
    rows = [[f"{p.value:.4g}", _f(p.low, ".3f"), _f(p.expected, ".3f", "inf"), _f(p.high, ".3f", "inf"),
             f"{p.freed_s:.2f}", _f(p.after_pct, ".1f")] for p in sw.points]
    out.append(table(["value", "low", "expected", "high", "freed s", "cores for AI %"], rows, right=range(6)))
    if sw.flat:
        out.append(clean(f"  Flat: {sw.flat_reason}"))
    elif sw.speedup_flat and sw.flat_reason:
        out.append(clean(f"  Speedup flat: {sw.flat_reason}"))
    return out


def _notes(proj: Projection) -> list:
    out = ["", "Assumptions:"] + [clean(f"  - {a}") for a in proj.assumptions + proj.speedup.assumptions]
    if proj.warnings:
        out.append("Warnings:")
        out += [styled(f"  ! {w}", "yellow") for w in proj.warnings]
    return out
