"""The Projection: the seam between ``dpuprof project`` and the renderers.

``schema`` holds the typed object (pydantic, with a JSON Schema); ``store`` its path rule,
checksum, atomic write and validated read.
"""

import importlib as _importlib

#: name -> the submodule it comes from, imported on first use (PEP 562): the pydantic schema
#: costs a few tenths of a second to import, and a report without a projection file never needs it.
_LAZY = {"PROJECTION_VERSION": "schema", "READABLE_VERSIONS": "schema", "Projection": "schema",
         **{name: "store" for name in ("path_for", "read", "sha256", "validate", "write")}}

_SUBMODULES = ("schema", "store")

__all__ = ["PROJECTION_VERSION", "READABLE_VERSIONS", "Projection", "path_for", "read", "sha256", "validate",
           "write"]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:  # as when this file imported them all: pkg.store without importing it
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
