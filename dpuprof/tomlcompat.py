"""``tomllib`` on every supported Python: the standard library's from 3.11, the ``tomli`` backport
(the same code, and the same API) on 3.10, where DGX OS 6 and Ubuntu 22.04 stop. The one place
that chooses, so every other module imports ``tomllib`` from here."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pyproject.toml depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["tomllib"]
