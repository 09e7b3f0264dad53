"""The stable category taxonomy (docs/taxonomy.md).

JSON output and tests rely on these names. A subcategory is written ``top.sub`` (``network.tcpip``);
``idle`` is not a category of work and is reported separately.
"""

CATEGORIES = ("network", "storage", "crypto", "compression", "compute", "kernel_other")
#: The categories a DPU can in principle take over ("infrastructure tax").
INFRASTRUCTURE = ("network", "storage", "crypto", "compression")
IDLE = "idle"


def top_level(subcategory: str) -> str:
    """Return the top-level category of ``subcategory`` (``"network.tcpip"`` -> ``"network"``)."""
    return subcategory.split(".", 1)[0]
