"""dpuprof: measure where host CPU goes during a training job, and project what a DPU would free.

For notebooks (docs/api.md)::

    import dpuprof
    run = dpuprof.load("run.rec")          # a dpuprof.api.Run
    run.categories(); run.stacks(); run.processes(); run.gpu(); run.summary()
    dpuprof.project(run, "bluefield-3")    # the projection dict

Nothing heavy is imported here (``dpuprof --help`` stays fast): the API is imported on first use.
"""

__version__ = "0.1.0"

from dpuprof.marker import mark_step  # noqa: E402  (cheap: imports only os)

__all__ = ["Run", "load", "mark_step", "project", "__version__"]


def __getattr__(name):
    # Lazy: pandas and the model load only when the API is first used. ``project`` is also the
    # subpackage dpuprof.project; dpuprof.api makes that module callable, so both uses work.
    if name in ("load", "Run"):
        from dpuprof import api

        return getattr(api, name)
    if name == "project":
        from dpuprof import api

        return api.callable_project_package()
    raise AttributeError(f"module 'dpuprof' has no attribute {name!r}")
