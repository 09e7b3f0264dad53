"""The render stage: Recording (+ Projection) -> terminal, json, markdown, html, png, folded,
speedscope, perfetto and pprof output.

Layout, one concern per module:

- ``registry``   format names and file extensions -> renderer modules (imported lazily);
- ``view``       ``RunView``/``Report``: the DataFrames every renderer draws from, built from a
                 Recording; ``merge`` and ``compare`` combine several;
- ``projection_file`` loader for ``RUN.proj.json`` (docs/projection-contract.md); absent is fine;
- ``stats``      sampling confidence intervals and the two-proportion z-test;
- ``tables``     the vendor-style Metric | Measured | Projected with DPU | Change table, as rows;
- ``charts``     matplotlib (Agg) chart functions: DataFrames in, Figures out;
- ``flame``      flame graph and differential flame graph as inline SVG;
- ``build``      loads recordings into a Report: one run, a comparison, or a job view (``merge``
                 merges the nodes' tables, ``job`` adds per-node rows, spread and stragglers,
                 ``job_identity`` decides which recordings are one job);
- ``figures``    which charts a report has; ``palette`` their colours; ``templates`` finds the
                 HTML (Jinja2) templates (``reports/templates``);
- ``console``    terminal text through rich: tables, styles only on a TTY;
- ``formats/``   one module per output format (``terminal``, ``json_format``, ``markdown``,
  ``html``, ``png``, ``folded``, ``speedscope``, ``perfetto``, ``pprof``), each with
  ``render(report, *, stem=None, progress=None, color=False) -> Rendered`` (``stem``: the output
  file's name without its suffix, None for standard output); ``formats.projection_terminal``
  draws ``dpuprof project``'s tables;
- ``output``     writing files safely (no symlink following, atomic rename); ``progress`` the
                 stderr progress line.

Nothing here imports bcc or ``dpuprof.record``: reports are made on a laptop without root.
"""
