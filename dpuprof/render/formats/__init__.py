"""The output formats, one module each; ``dpuprof.render.registry`` picks one by name or extension.

Each module exposes ``render(report, stem) -> Rendered`` and reads only the view model
(``dpuprof.render.view``) and its helpers.
"""
