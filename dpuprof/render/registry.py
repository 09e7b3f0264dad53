"""Renderer names and output-file extensions.

Only plain data lives here, so the CLI can list the formats without importing pandas or
matplotlib; ``get(name)`` imports the renderer module when it is needed.
"""

from __future__ import annotations

import importlib

#: format name -> module in dpuprof.render.formats exposing ``render(report, stem) -> Rendered``
RENDERERS = {
    "terminal": "terminal",
    "json": "json_format",
    "markdown": "markdown",
    "html": "html",
    "png": "png",
    "folded": "folded",
    "speedscope": "speedscope",
    "perfetto": "perfetto",
    "pprof": "pprof",
}

#: output suffix -> format; the longest matching suffix wins (".speedscope.json" before ".json")
EXTENSIONS = {
    ".speedscope.json": "speedscope",
    ".trace.json": "perfetto",
    ".perfetto.json": "perfetto",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".png": "png",
    ".pb.gz": "pprof",
    ".pprof": "pprof",
    ".folded": "folded",
    ".collapsed": "folded",
    ".txt": "terminal",
}

#: formats that cannot go to standard output
NEEDS_FILE = {"png"}


def names() -> list[str]:
    return list(RENDERERS)


def _suffix(filename: str) -> str | None:
    lower = filename.lower()
    return next((s for s in sorted(EXTENSIONS, key=len, reverse=True) if lower.endswith(s)), None)


def from_extension(filename: str) -> str | None:
    """The format implied by ``filename``'s suffix, or None."""
    suffix = _suffix(filename)
    return EXTENSIONS[suffix] if suffix else None


def stem(filename: str) -> str:
    """``filename`` without its known suffix (``run.speedscope.json`` -> ``run``)."""
    suffix = _suffix(filename)
    return filename[: -len(suffix)] if suffix else filename


def choose(fmt: str | None, output: str | None) -> str:
    """``--format`` wins; else the output file's extension; else the terminal summary.

    Raises ValueError with a one-line reason when neither names a known format.
    """
    if fmt:
        if fmt not in RENDERERS:
            raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(RENDERERS)})")
        return fmt
    if output and output != "-":
        found = from_extension(output)
        if found is None:
            known = ", ".join(sorted(EXTENSIONS))
            raise ValueError(f"cannot tell the format from {output!r}: use --format, or one of {known}")
        return found
    return "terminal"


def get(name: str):
    """The ``render`` function of format ``name``."""
    module = importlib.import_module(f"dpuprof.render.formats.{RENDERERS[name]}")
    return module.render
