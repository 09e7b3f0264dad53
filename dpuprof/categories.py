"""The stable category taxonomy (docs/taxonomy.md).

JSON output and tests rely on these names. A subcategory is written ``top.sub`` (``network.tcpip``);
``idle`` is not a category of work and is reported separately; neither is ``observer``: samples
whose kernel stack runs dpuprof's own BPF programs (the recorder's cost, not the job's tax).
"""

CATEGORIES = ("network", "storage", "crypto", "compression", "compute", "kernel_other")
#: The categories a DPU can in principle take over ("infrastructure tax").
INFRASTRUCTURE = ("network", "storage", "crypto", "compression")
IDLE = "idle"
#: The recorder's own BPF programs (and the kernel code that runs them) seen in a sampled stack.
OBSERVER = "observer"
#: Top-level names that are not work of the host's processes: left out of busy, workload and
#: infrastructure CPU and of every projection input, each reported on its own.
NOT_WORK = (IDLE, OBSERVER)


def top_level(subcategory: str) -> str:
    """Return the top-level category of ``subcategory`` (``"network.tcpip"`` -> ``"network"``)."""
    return subcategory.split(".", 1)[0]
