"""Find the HTML report templates: ``reports/templates/`` in a source checkout, or the copy that the
wheel ships as ``dpuprof/_templates`` (pyproject force-include, like the probes)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from dpuprof.errors import UserError

_HERE = Path(__file__).resolve().parent
CANDIDATES = (_HERE.parent / "_templates", _HERE.parents[1] / "reports" / "templates")


def template_dir() -> Path:
    for d in CANDIDATES:
        if (d / "report.html").is_file():
            return d
    raise UserError("the HTML report templates are missing (looked in "
                    + ", ".join(str(d) for d in CANDIDATES) + "); reinstall dpuprof")


@lru_cache(maxsize=None)
def read(name: str) -> str:
    return (template_dir() / name).read_text(encoding="utf-8")
