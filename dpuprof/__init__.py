"""dpuprof: measure where host CPU goes during a training job, and project what a DPU would free."""

__version__ = "0.1.0"

from dpuprof.marker import mark_step  # noqa: E402  (cheap: imports only os)

__all__ = ["mark_step", "__version__"]
