"""The report's tables as plain rows of text; each renderer lays them out (and escapes them).

``vendor_rows`` is the vendor-style table made honest: Metric | Measured | Projected with DPU |
Change, each row with its range and the assumptions behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE
from dpuprof.render import offload_modes
from dpuprof.render.view import RunView
from dpuprof.render.stats import count_ci, scaled_share_ci

if TYPE_CHECKING:  # annotations only: pydantic is imported when a projection file is read
    from dpuprof.projection.schema import Projection, Speedup

#: The BlueField solution brief's figures (docs/projection-model.md, "The claim under test"), shown
#: beside the measurement.
VENDOR = {"cores_for_ai": "~70 % → >95 %",
          "infra_share": ">30 % of CPU cycles",
          "allreduce": "~500 µs → ~180 µs (256 GPUs)",
          "storage": "~12 GB/s → ~40 GB/s IO throughput"}
DASH = "—"


@dataclass
class Row:
    metric: str
    measured: str
    projected: str = DASH
    change: str = DASH
    range: str = DASH
    assumptions: list[str] = field(default_factory=list)
    vendor: str = DASH  # what the vendor brief claims for this metric

    def cells(self) -> list[str]:
        return [self.metric, self.measured, self.projected, self.change, self.range, self.vendor,
                "; ".join(self.assumptions) or DASH]


HEADER = ["Metric", "Measured", "Projected with DPU", "Change", "Range (95 % interval; speedup: model bounds)", "Vendor brief", "Assumptions"]


# ----------------------------------------------------------------------------- formatting

def fmt_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def fmt_rate(n: float) -> str:
    return fmt_bytes(n) + "/s"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x:.{digits}f} %"


def fmt_pp(x: float | None) -> str:
    return DASH if x is None else f"{x:+.1f} pp"


def fmt_num(x: float) -> str:
    """Two decimals, or three significant digits below 0.1 (so small CPU does not read as 0.00)."""
    x = float(x)
    if x == 0 or abs(x) >= 0.1:
        return f"{x:.2f}"
    return f"{x:.2g}" if abs(x) >= 1e-3 else ("<0.001" if x > 0 else ">-0.001")


def fmt_cores(x: float | None) -> str:
    return DASH if x is None else f"{fmt_num(x)} cores"


def fmt_rel(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return DASH
    if before == 0:
        return "±0 %" if after == 0 else "new"
    return f"{100.0 * (after - before) / before:+.0f} %"


# ----------------------------------------------------------------------------- vendor table

def _mechanisms(proj: Projection | None, category: str) -> list[str]:
    """'mechanism (requires ...)' for each projection row of ``category`` that frees CPU."""
    if proj is None:
        return []
    out = []
    for r in proj.rows:
        if r.category != category:
            continue
        text = f"{r.mechanism or '?'}" + (f" (needs {r.requires})" if r.requires else "")
        if r.capacity_limited:
            text += " [capacity-limited]"
        out.append(text)
    return list(dict.fromkeys(out))


def vendor_rows(v: RunView) -> list[Row]:
    """The vendor table's rows: cores for AI, infrastructure share, each infrastructure category,
    bytes and IOPS, the modelled all-reduce and the job speedup, measured beside projected."""
    proj, rows = v.projection, []
    for add in (_cores_row, _infra_row, _category_rows, _bytes_rows, _allreduce_row, _speedup_row):
        add(v, proj, rows)
    return rows


def _cores_row(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """CPU cores available for AI, before and after."""
    split = v.category_split
    cfa = proj.cores_for_ai if proj is not None else None
    before = cfa.before_pct if cfa is not None and cfa.before_pct is not None else v.cores_for_ai_pct
    after = cfa.after_pct if cfa is not None else None
    rng = DASH
    hz = v.meta.sample_freq_hz
    if split and hz and v.capacity_s:
        lo, hi = scaled_share_ci(v.infra_s / v.capacity_s, v.infra_samples, v.capacity_s * hz)
        rng = f"{100 * (1 - hi):.1f}–{100 * (1 - lo):.1f} % (sampling)"
    measured = DASH if before is None else f"{before:.1f} % ({v.cpu_count * before / 100:.2f} of {v.cpu_count:g})"
    projected = DASH if after is None else f"{after:.1f} % ({v.cpu_count * after / 100:.2f} of {v.cpu_count:g})"
    rows.append(Row("CPU cores available for AI", measured, projected,
                    fmt_pp(after - before) if after is not None and before is not None else DASH, rng,
                    (cfa.assumptions if cfa is not None else []) or
                    ["100 % minus network, storage, crypto and compression CPU, of all cores x duration"],
                    VENDOR["cores_for_ai"]))


def _infra_row(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """The infrastructure share of busy host CPU."""
    split = v.category_split
    if split and v.busy_s:
        share = 100 * v.infra_s / v.busy_s
        lo, hi = scaled_share_ci(v.infra_s / v.busy_s, v.infra_samples, v.busy_samples)
        proj_share = None
        if proj is not None:
            after_all = sum(v.projected_s(c) for c in CATEGORIES)
            after_inf = sum(v.projected_s(c) for c in INFRASTRUCTURE)
            proj_share = 100 * after_inf / after_all if after_all else 0.0
        rows.append(Row("Infrastructure share of host CPU",
                        f"{share:.1f} % of busy CPU ({100 * v.infra_s / v.capacity_s:.1f} % of capacity)"
                        if v.capacity_s else f"{share:.1f} % of busy CPU",
                        fmt_pct(proj_share), fmt_pp(proj_share - share) if proj_share is not None else DASH,
                        f"{100 * lo:.1f}–{100 * hi:.1f} % (sampling)",
                        ["busy = non-idle samples, host-wide"], VENDOR["infra_share"]))
    else:
        rows.append(Row("Infrastructure share of host CPU", "n/a (no category split)"))


def _category_rows(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """One row per infrastructure category: cores, projected cores, sampling range."""
    split, dur, hz = v.category_split, v.duration_s or 1.0, v.meta.sample_freq_hz
    for c in INFRASTRUCTURE:
        if not split:
            rows.append(Row(f"{c.capitalize()} CPU", "n/a (no category split)"))
            continue
        cpu_s, k = float(v.cats.loc[c, "cpu_s"]), float(v.cats.loc[c, "samples"])
        after_s = v.projected_s(c)
        rng = DASH
        if hz:
            # cpu_s may be scaled to exact on-CPU time: the samples give the relative error
            per_sample = cpu_s / k if k else 1 / hz
            lo, hi = count_ci(k)
            rng = f"{fmt_num(lo * per_sample / dur)}–{fmt_num(hi * per_sample / dur)} cores (sampling)"
        rows.append(Row(f"{c.capitalize()} CPU", f"{fmt_cores(cpu_s / dur)} ({fmt_num(cpu_s)} CPU s)",
                        DASH if after_s is None else fmt_cores(after_s / dur),
                        fmt_rel(cpu_s, after_s), rng, _mechanisms(proj, c)))


def _bytes_rows(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """Network bytes, storage bytes and IOPS: a DPU moves the same ones."""
    dur = v.duration_s or 1.0
    s = v.summary
    tx, rx = float(s.tx_bytes), float(s.rx_bytes)
    rows.append(Row("Network bytes moved", f"{fmt_bytes(tx + rx)} (tx {fmt_bytes(tx)}, rx {fmt_bytes(rx)}; "
                    f"{fmt_rate((tx + rx) / dur)})", "same bytes", "±0 %",
                    f"peak {fmt_rate(float((v.io['net_tx'] + v.io['net_rx']).max() or 0))}" if not v.io.empty else DASH,
                    [f"counted by {s.net_source}; a DPU moves the same bytes and changes who "
                     "spends the CPU on them"]))
    rd, wr = float(s.read_bytes), float(s.write_bytes)
    rows.append(Row("Storage bytes moved", f"{fmt_bytes(rd + wr)} (read {fmt_bytes(rd)}, write {fmt_bytes(wr)}; "
                    f"{fmt_rate((rd + wr) / dur)})", "same bytes", "±0 %",
                    f"peak {fmt_rate(float((v.io['disk_read'] + v.io['disk_write']).max() or 0))}"
                    if not v.io.empty else DASH,
                    [f"counted by {s.io_source}"], VENDOR["storage"]))
    ios = float(s.ios)
    rows.append(Row("IOPS", f"{ios / dur:,.0f} IO/s ({ios:,.0f} IOs)", "same IOs", "±0 %",
                    f"peak {float((v.io['read_iops'] + v.io['write_iops']).max() or 0):,.0f} IO/s"
                    if not v.io.empty else DASH, ["block-layer completions, all devices"]))


def _allreduce_row(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """The modelled all-reduce time per step, only when the projection models it."""
    ar = proj.allreduce if proj is not None else None
    if ar is not None:
        tcp, rdma = ar.tcp_us, ar.rdma_us
        scale = f"{ar.nodes} nodes x {ar.gpus_per_node} GPUs"
        rows.append(Row(f"All-reduce time per step ({scale})",
                        DASH if tcp is None else f"{tcp:,.0f} µs (TCP, modelled)",
                        DASH if rdma is None else f"{rdma:,.0f} µs (RDMA, modelled)",
                        fmt_rel(tcp, rdma), DASH,
                        ["ring all-reduce, alpha-beta model"] + ar.assumptions,
                        VENDOR["allreduce"]))


def _speedup_row(v: RunView, proj: Projection | None, rows: list[Row]) -> None:
    """The job speedup, or why there is none."""
    if proj is not None:  # expected and high may be null: unbounded (the job's CPU time would vanish)
        sp = proj.speedup
        low, exp, high, pays = sp.low, sp.expected, sp.high, sp.pays
        beside = offload_modes.headline(sp, proj.mode_override, ".2f", "x")
        rows.append(Row("Job speedup", "1.00x (baseline)",
                        (f"{exp:.2f}x expected" if exp is not None else "unbounded") + (f" ({beside})" if beside else ""),
                        f"{100 * (exp - 1):+.0f} %" if exp is not None else DASH,
                        f"model bounds {low:.2f}x–{'∞' if high is None else f'{high:.2f}x'} (not a CI)"
                        if low is not None else DASH,
                        [f"pays: {'yes' if pays else 'no'}"] + offload_modes.details(sp, ".2f")
                        + _regime_lines(sp) + sp.assumptions))
    else:
        rows.append(Row("Job speedup", "1.00x (baseline)", DASH, DASH, DASH,
                        ["no projection: run dpuprof project on this recording"]))


def _regime_lines(sp: Speedup) -> list[str]:
    """The regime the speedup model found, its window and the CPU-contention proxy beside it."""
    out = []
    if sp.regime is not None:
        out.append(f"regime: {sp.regime}" + (f" ({sp.regime_why})" if sp.regime_why else ""))
    if sp.contention_proxy is not None:
        out.append(f"CPU-contention proxy T/(T-F): {sp.contention_proxy:.2f}x")
    if sp.window is not None:
        out.append(f"window: {sp.window.how}")
    return out


# ----------------------------------------------------------------------------- other tables

def category_rows(v: RunView) -> list[list[str]]:
    """Category | CPU s | cores | share of busy | workload CPU s | projected cores."""
    out = []
    dur = v.duration_s or 1.0
    busy = v.busy_s or 1.0
    for c in CATEGORIES:
        s = float(v.cats.loc[c, "cpu_s"])
        after = v.projected_s(c)
        out.append([c, fmt_num(s), fmt_num(s / dur), f"{100 * s / busy:.1f} %",
                    fmt_num(float(v.wl_cats.loc[c, "cpu_s"])), DASH if after is None else fmt_num(after / dur)])
    return out


CATEGORY_HEADER = ["Category", "CPU s", "Cores", "Share of busy", "Workload CPU s", "Projected cores"]


def subcategory_rows(v: RunView, limit: int = 12) -> list[list[str]]:
    busy = v.busy_s or 1.0
    return [[str(sub), f"{s:.2f}", f"{100 * s / busy:.1f} %"] for sub, s in v.subcats.head(limit).items()]


SUBCATEGORY_HEADER = ["Subcategory", "CPU s", "Share of busy"]


def process_rows(v: RunView, limit: int = 10) -> list[list[str]]:
    out = []
    for p in v.summary.processes[:limit]:
        name = f"{p.node}: {p.comm}" if p.node else p.comm
        out.append([str(p.pid), name, f"{p.cpu_s:.2f}", DASH if p.infra_s is None else f"{p.infra_s:.2f}"])
    return out


PROCESS_HEADER = ["PID", "Process", "CPU s", "Infrastructure CPU s"]


def node_rows(nodes: list[RunView], total: RunView) -> list[list[str]]:
    """Node | host | CPUs | duration | infra share | cores for AI | one column per infra category | net | disk."""
    out = []
    for v in list(nodes) + [total]:
        dur = v.duration_s or 1.0
        host = v.host_text or DASH
        share = fmt_pct(100 * v.infra_s / v.busy_s) if v.category_split and v.busy_s else DASH
        out.append([v.name, host if v is not total else "all", f"{v.cpu_count:g}", f"{v.duration_s:.1f} s",
                    share, fmt_pct(v.cores_for_ai_pct)]
                   + [fmt_num(float(v.cats.loc[c, "cpu_s"]) / dur) for c in INFRASTRUCTURE]
                   + [fmt_bytes(float(v.summary.net_bytes)), fmt_bytes(float(v.summary.disk_bytes))])
    return out


NODE_HEADER = ["Node", "Host", "CPUs", "Duration", "Infra share of busy", "Cores for AI"] + \
    [f"{c} cores" for c in INFRASTRUCTURE] + ["Net bytes", "Disk bytes"]


def compare_rows(cmp, a: RunView, b: RunView) -> list[list[str]]:
    """Category | A share | B share | change (pp) | A cores | B cores | z | p | significant."""
    out = []
    for cat, r in cmp.iterrows():
        z = DASH if r["z"] != r["z"] else f"{r['z']:+.2f}"
        p = DASH if r["p"] != r["p"] else (f"{r['p']:.3g}" if r["p"] >= 1e-4 else "<1e-4")
        out.append([cat, f"{100 * r['a_share']:.1f} %", f"{100 * r['b_share']:.1f} %", f"{r['diff_pp']:+.1f} pp",
                    f"{r['a_cores']:.2f}", f"{r['b_cores']:.2f}", z, p, "yes" if r["significant"] else "no"])
    return out


def compare_header(a: RunView, b: RunView) -> list[str]:
    return ["Category", f"A share ({a.name})", f"B share ({b.name})", "Change", "A cores", "B cores", "z", "p",
            "Significant"]


def assumptions(v: RunView) -> list[str]:
    """Projection-wide assumptions, for the methods section."""
    proj = v.projection
    if proj is None:
        return []
    dpu, out = proj.dpu, []
    if dpu.name is not None:
        out.append(f"DPU profile: {dpu.name}" + (f" — {dpu.description}" if dpu.description else ""))
    out += proj.assumptions
    for c in proj.capacity:
        if c.bottleneck:
            out.append(f"capacity: {c.resource} demand {c.demand} exceeds limit {c.limit}")
    for rows, what in ((proj.rejected, "not offloaded (costs more than it frees)"),
                       (proj.left_on_host, "left on the host")):
        for r in rows:
            if r.before_s is None or r.before_s < 0.005:
                continue
            why = r.label or r.notes
            mech = f" / {r.mechanism}" if r.mechanism is not None else ""
            out.append(f"{what}: {r.subcategory}{mech}, {r.before_s:.2f} CPU s" + (f" — {why}" if why else ""))
    return out
