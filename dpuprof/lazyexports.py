"""A package's names imported from its submodules on first use (PEP 562 module ``__getattr__``),
for packages whose submodules are costly to import and often not needed (dpuprof.project,
dpuprof.projection: ``dpuprof report`` without a projection file needs neither model nor schema)."""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, names: dict[str, str], submodules: tuple[str, ...], public: list[str]):
    """(``__getattr__``, ``__dir__``) for ``package``: each of ``names`` {name: submodule} is
    imported from its submodule on first access and then kept in the package; each of
    ``submodules`` is importable as an attribute (``pkg.store`` without ``import pkg.store``), as
    when the package imported them all; ``public`` is its ``__all__``."""

    def __getattr__(name):
        if name in names:
            value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
            setattr(sys.modules[package], name, value)
            return value
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__
