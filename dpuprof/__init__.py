"""dpuprof: measure where host CPU goes during a training job, and project what a DPU would free.

For notebooks (docs/api.md)::

    import dpuprof
    run = dpuprof.load("run.rec")              # a dpuprof.api.Run
    run.categories(); run.stacks(); run.processes(); run.gpu(); run.summary()
    dpuprof.project_run(run, "bluefield-3")    # a dpuprof.projection.schema.Projection

``dpuprof.project`` is the projection model's subpackage, not a function.
"""

__version__ = "0.1.0"

from dpuprof.marker import mark_step  # noqa: E402  (cheap: imports only os)

__all__ = ["Run", "load", "mark_step", "project_run", "__version__"]

#: The notebook API, imported on first use (PEP 562). Training code imports dpuprof for
#: mark_step() and every CLI command imports this package: `python3 -X importtime -c 'import
#: dpuprof'` measures about 1 ms for it, against 270-430 ms for dpuprof.api's pandas and report
#: model (`-X importtime -c 'import dpuprof.api'`, 2-CPU VM).
_API = ("Run", "load", "project_run")


def __getattr__(name):
    if name in _API:
        from dpuprof import api  # noqa: PLC0415 -- `import dpuprof` stays light: api (pandas) loads on first use

        value = getattr(api, name)
        globals()[name] = value  # later uses skip this hook
        return value
    if name == "project":
        # Reached only while the subpackage dpuprof.project is not imported (importing it sets the
        # attribute): the notebook function's old name, or the subpackage used without an import.
        raise AttributeError("dpuprof.project is the projection model's subpackage (import dpuprof.project); "
                             "to project a run use dpuprof.project_run(run, dpu) (docs/api.md)")
    raise AttributeError(f"module 'dpuprof' has no attribute {name!r}")
