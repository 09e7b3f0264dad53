"""The GPU timeline chart: per device utilisation % (solid, left axis) and memory used GiB
(dashed, right axis) per interval, on the same x axis as "Categories over time" (seconds since the
recording's start), so the HTML report can set it right under that chart."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpuprof.render import charts
from dpuprof.render.gpu import GpuView

COLORS = ("#76b900", "#1f77b4", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


def gpu_timeline(view: GpuView, title: str = "GPU over time", xlim: tuple[float, float] | None = None,
                 fig=None, step_s: float = 1.0) -> Figure:
    """Step lines per device from ``view.timeline`` (t_s, util_pct, mem_used_bytes); ``step_s``
    the interval length. ``xlim``: the CPU timeline's x range, so both charts line up."""
    fig = fig if fig is not None else Figure(figsize=charts.SIZE, dpi=charts.DPI)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    mem_ax = ax.twinx()
    for k, (index, g) in enumerate(view.timeline.groupby("gpu_index")):
        c = COLORS[k % len(COLORS)]
        t = list(g["t_s"].astype(float))
        t.append(t[-1] + step_s)  # the last interval ends one interval after it starts
        util = list(g["util_pct"].astype(float)) + [float(g["util_pct"].iloc[-1])]
        mem = list(g["mem_used_bytes"].astype(float) / 2 ** 30) + [float(g["mem_used_bytes"].iloc[-1]) / 2 ** 30]
        ax.step(t, util, where="post", color=c, label=f"GPU {int(index)} util %")
        mem_ax.step(t, mem, where="post", color=c, linestyle="--", label=f"GPU {int(index)} memory GiB")
    ax.set_ylim(0, 105)
    ax.set_ylabel("utilisation %")
    mem_ax.set_ylabel("memory used (GiB)")
    mem_ax.set_ylim(bottom=0)
    ax.set_xlabel("time since start (s)")
    if xlim:
        ax.set_xlim(*xlim)
    lines = ax.get_legend_handles_labels()
    more = mem_ax.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", bbox_to_anchor=(1.14, 1.0), fontsize=8,
              frameon=False)
    if fig.get_layout_engine() is None:
        fig.subplots_adjust(left=0.09, right=0.68, top=0.9, bottom=0.13)
    ax.spines[["top"]].set_visible(False)
    ax.grid(axis="y", color="#e6e6e6", linewidth=0.8)
    return fig
