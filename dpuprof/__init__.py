"""dpuprof: measure where host CPU goes during a training job, and project what a DPU would free."""

__version__ = "0.1.0"
