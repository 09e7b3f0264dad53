"""The Projection: the seam between ``dpuprof project`` and the renderers.

``schema`` holds the typed object (pydantic, with a JSON Schema); ``store`` its path rule,
checksum, atomic write and validated read.
"""

from dpuprof.lazyexports import lazy_exports

#: name -> the submodule it comes from, imported on first use (PEP 562): the pydantic schema
#: costs a few tenths of a second to import, and a report without a projection file never needs it.
_LAZY = {"PROJECTION_VERSION": "schema", "READABLE_VERSIONS": "schema", "Projection": "schema",
         **{name: "store" for name in ("path_for", "read", "sha256", "validate", "write")}}

_SUBMODULES = ("schema", "store")

__all__ = ["PROJECTION_VERSION", "READABLE_VERSIONS", "Projection", "path_for", "read", "sha256", "validate",
           "write"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _SUBMODULES, __all__)
