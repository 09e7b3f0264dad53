"""Colours shared by the charts and the flame graphs (one per category, stable across reports)."""

CATEGORY_COLORS = {
    "network": "#1f77b4",
    "storage": "#ff7f0e",
    "crypto": "#d62728",
    "compression": "#9467bd",
    "compute": "#2ca02c",
    "kernel_other": "#8c8c8c",
    "idle": "#e0e0e0",
    # psutil-mode cpu_times fields
    "user": "#2ca02c",
    "nice": "#98df8a",
    "system": "#1f77b4",
    "irq": "#ff9896",
    "softirq": "#d62728",
    "steal": "#c7c7c7",
}


def color(name: str) -> str:
    return CATEGORY_COLORS.get(name, "#7f7f7f")
