"""Report charts: each function takes DataFrames and returns a matplotlib Figure (Agg backend).

Figures are built with ``matplotlib.figure.Figure`` rather than pyplot, so nothing global is kept
and nothing needs closing. ``to_png`` turns a figure into PNG bytes.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from dpuprof.render.palette import color  # noqa: E402

SIZE = (7.0, 3.6)
DPI = 100
VENDOR_CORES_FOR_AI = (70.0, 95.0)  # the solution brief's "~70 %" and ">95 %"


def _figure(size=SIZE) -> Figure:
    """A stand-alone chart. Margins are set by hand (``_margins``): a layout engine would cost
    about 40 % of the drawing time, and the report draws several charts."""
    return Figure(figsize=size, dpi=DPI)


def _margins(fig, left=0.09, right=0.97, top=0.9, bottom=0.13, **kw) -> None:
    """Fixed margins for a stand-alone figure; inside the one-page dashboard the layout engine of
    the parent figure places the axes instead."""
    if fig.get_layout_engine() is None:
        fig.subplots_adjust(left=left, right=right, top=top, bottom=bottom, **kw)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def _style(ax) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)


def to_png(fig: Figure, dpi: int = DPI) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def category_bars(frame: pd.DataFrame, capacity: float | None = None,
                  title: str = "Host CPU by category", fig=None) -> Figure:
    """Stacked bars: one bar per row of ``frame`` (e.g. Measured / Projected with DPU, or nodes),
    one segment per column (category), values in cores. ``capacity``: a dashed line at all cores.

    Every chart function draws into ``fig`` (a Figure or SubFigure) when given, else a new Figure.
    """
    fig = fig if fig is not None else _figure()
    ax = fig.add_subplot()
    if frame.empty or not frame.to_numpy().any():
        _empty(ax, "no classified CPU samples")
        ax.set_title(title, loc="left")
        return fig
    bottom = pd.Series(0.0, index=frame.index)
    labels = [str(i) for i in frame.index]
    for col in frame.columns:
        vals = frame[col].astype(float)
        if not vals.any():
            continue
        ax.bar(labels, vals, bottom=bottom, label=str(col), color=color(str(col)), width=0.6)
        bottom += vals
    for x, total in enumerate(bottom):
        ax.text(x, total, f"{total:.2f}", ha="center", va="bottom", fontsize=8)
    if capacity:
        ax.axhline(capacity, color="#444444", linestyle="--", linewidth=1)
        ax.text(0.995, capacity, f"all {capacity:g} cores", va="bottom", ha="right", fontsize=8, color="#444444",
                transform=blended_transform_factory(ax.transAxes, ax.transData))
        ax.set_ylim(0, max(capacity, float(bottom.max())) * 1.12)
    ax.set_ylabel("cores (CPU s / s)")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    rotate = len(labels) > 4 or max(len(lbl) for lbl in labels) > 24
    if rotate:
        ax.tick_params(axis="x", labelrotation=20)
        for t in ax.get_xticklabels():
            t.set_ha("right")
    _margins(fig, right=0.8, bottom=0.28 if rotate else 0.1)
    _style(ax)
    return fig


def timeline(df: pd.DataFrame, title: str = "Host CPU by category over time", fig=None,
             ymax: float | None = None) -> Figure:
    """Stacked areas over time: index t_s (seconds), one column per category, values in cores.
    ``ymax``: a fixed y range, so that two runs side by side share a scale."""
    fig = fig if fig is not None else _figure()
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    cols = [c for c in df.columns if df[c].any()]
    if df.empty or not cols:
        _empty(ax, "no CPU data over time")
        return fig
    x = df.index.to_numpy(dtype=float)
    step = float(pd.Series(x).diff().median()) if len(x) > 1 else 1.0
    x = list(x) + [x[-1] + step]  # the last interval ends one step after it starts
    ax.stackplot(x, [list(df[c].to_numpy(dtype=float)) + [float(df[c].iloc[-1])] for c in cols],
                 labels=[str(c) for c in cols], colors=[color(str(c)) for c in cols], step="post", alpha=0.9)
    x = pd.Series(x)
    ax.set_xlim(x.min(), x.max() if x.max() > x.min() else x.min() + 1)
    if ymax:
        ax.set_ylim(0, ymax)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("cores")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    _margins(fig, right=0.8)
    _style(ax)
    return fig


def cores_for_ai(frame: pd.DataFrame, title: str = "CPU cores available for AI", fig=None) -> Figure:
    """Horizontal bars of ``frame['pct']`` (share of all cores not spent on infrastructure), with the
    vendor's claims as reference lines; ``frame['cores']`` is printed on each bar."""
    fig = fig if fig is not None else _figure((7.0, 1.35 + 0.5 * max(len(frame), 1)))
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    frame = frame.dropna(subset=["pct"])
    if frame.empty:
        _empty(ax, "needs classified CPU samples")
        return fig
    labels = [str(i) for i in frame.index][::-1]
    pct = frame["pct"].astype(float).to_numpy()[::-1]
    cores = frame["cores"].astype(float).to_numpy()[::-1]
    ax.barh(labels, pct, color=["#2ca02c" if "DPU" in lbl else "#4c72b0" for lbl in labels], height=0.55)
    for y, (p, c) in enumerate(zip(pct, cores)):
        ax.text(min(p, 100) - 1, y, f"{p:.1f} % ({c:.2f} cores)", va="center", ha="right", color="white",
                fontsize=8, fontweight="bold")
    for ref in VENDOR_CORES_FOR_AI:
        ax.axvline(ref, color="#b22222", linestyle=":", linewidth=1.2)
        ax.text(ref, 1.0, f"{ref:.0f} %", color="#b22222", fontsize=7, ha="center", va="bottom",
                transform=blended_transform_factory(ax.transData, ax.transAxes))
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of all cores x duration\n(dotted: the vendor brief's ~70 % today, >95 % with a DPU)",
                  fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    if isinstance(fig, Figure):  # stand-alone; a SubFigure is placed by the dashboard's layout
        height = fig.get_size_inches()[1]
        _margins(fig, left=min(0.45, 0.04 + 0.0125 * max(len(lbl) for lbl in labels)), right=0.96,
                 top=1 - 0.45 / height, bottom=0.8 / height)
    return fig


def waterfall(steps: pd.DataFrame, start: float, title: str = "Infrastructure CPU saved, by category and mechanism",
              fig=None) -> Figure:
    """From ``start`` (infrastructure cores measured) down by ``steps['freed']`` (cores freed, one
    row per category x mechanism, labelled by the index) to what stays on the host."""
    fig = fig if fig is not None else _figure((7.0, 3.8))
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    if steps.empty:
        _empty(ax, "no projection: run dpuprof project first")
        return fig
    labels = ["measured"] + [str(i).replace(" / ", " /\n") for i in steps.index] + ["with DPU"]
    level = start
    ax.bar(0, start, color="#555555", width=0.6)
    for x, (_, row) in enumerate(steps.iterrows(), start=1):
        freed = float(row["freed"])
        ax.bar(x, -freed, bottom=level, color=color(str(row.get("category", ""))), width=0.6)
        ax.text(x, level, f"-{freed:.2f}", ha="center", va="bottom", fontsize=7)
        level -= freed
    ax.bar(len(labels) - 1, level, color="#2ca02c", width=0.6)
    ax.text(0, start, f"{start:.2f}", ha="center", va="bottom", fontsize=8)
    ax.text(len(labels) - 1, level, f"{level:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, start * 1.15 if start > 0 else 1)
    ax.set_ylabel("infrastructure cores")
    _margins(fig, left=0.1, bottom=0.32)
    _style(ax)
    return fig


def throughput(io_df: pd.DataFrame, title: str = "Network and storage throughput", fig=None) -> Figure:
    """Two panels over time: network tx/rx and disk read/write in MB/s, IOPS on a second axis."""
    fig = fig if fig is not None else _figure((7.0, 4.2))
    net_ax, disk_ax = fig.subplots(2, 1, sharex=True)
    net_ax.set_title(title, loc="left")
    if io_df.empty:
        _empty(net_ax, "no IO data")
        _empty(disk_ax, "")
        return fig
    x = io_df.index.to_numpy(dtype=float)
    step = float(pd.Series(x).diff().median()) if len(x) > 1 else 1.0
    x = list(x) + [x[-1] + step]

    def series(col):
        vals = io_df[col].to_numpy(dtype=float)
        return list(vals) + [vals[-1]]

    for ax, cols, label, colour in ((net_ax, ("net_tx", "net_rx"), "network MB/s", "#1f77b4"),
                                    (disk_ax, ("disk_read", "disk_write"), "disk MB/s", "#ff7f0e")):
        top = 0.0
        for col, style in zip(cols, ("-", "--")):
            vals = [v / 1e6 for v in series(col)]
            top = max(top, max(vals))
            ax.step(x, vals, where="post", linestyle=style, label=col.split("_", 1)[1], color=colour)
        ax.set_ylabel(label)
        ax.set_ylim(0, top * 1.35 if top > 0 else 1)
        _style(ax)
    handles, labels = disk_ax.get_legend_handles_labels()
    iops = [r + w for r, w in zip(series("read_iops"), series("write_iops"))]
    if any(iops):
        twin = disk_ax.twinx()
        line = twin.step(x, iops, where="post", color="#9a9a9a", linewidth=0.8, linestyle=":", label="IOPS")
        twin.set_ylabel("IOPS", color="#7f7f7f")
        twin.set_ylim(0, max(iops) * 1.35)
        twin.spines[["top"]].set_visible(False)
        handles, labels = handles + line, labels + ["IOPS"]
    net_ax.legend(fontsize=8, frameon=False, loc="upper left", ncols=2)
    disk_ax.legend(handles, labels, fontsize=8, frameon=False, loc="upper left", ncols=3)
    disk_ax.set_xlabel("time since start (s)")
    disk_ax.set_xlim(x[0], x[-1])
    _margins(fig, left=0.1, right=0.9, top=0.92, bottom=0.11, hspace=0.15)
    return fig


def compare_shares(cmp: pd.DataFrame, a_name: str, b_name: str,
                   title: str = "Share of busy CPU by category, A vs B", fig=None) -> Figure:
    """Grouped bars of a_share/b_share (0..1) per category; '*' marks a significant change."""
    fig = fig if fig is not None else _figure()
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    x = range(len(cmp))
    a = 100 * cmp["a_share"].astype(float)
    b = 100 * cmp["b_share"].astype(float)
    ax.bar([i - 0.2 for i in x], a, width=0.4, label=f"A: {a_name}", color="#9ecae1")
    ax.bar([i + 0.2 for i in x], b, width=0.4, label=f"B: {b_name}", color="#3182bd")
    for i, (hi, sig) in enumerate(zip(pd.concat([a, b], axis=1).max(axis=1), cmp["significant"])):
        if sig:
            ax.text(i, hi, "*", ha="center", va="bottom", fontsize=12, color="#b22222")
    ax.set_xticks(list(x), [str(c) for c in cmp.index], fontsize=8)
    ax.set_ylabel("% of busy CPU samples")
    ax.legend(fontsize=8, frameon=False)
    _margins(fig, bottom=0.1)
    _style(ax)
    return fig


def dashboard(panels: list, title: str) -> Figure:
    """Several charts on one page, two per row: ``panels`` are callables taking a (sub)figure."""
    rows = (len(panels) + 1) // 2
    fig = Figure(figsize=(14, 3.9 * rows), dpi=DPI, layout="constrained")
    fig.suptitle(title, x=0.01, ha="left", fontsize=13)
    subs = fig.subfigures(rows, 2, squeeze=False).ravel()
    for sub, panel in zip(subs, panels):
        panel(sub)
    return fig
