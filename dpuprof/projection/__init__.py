"""The Projection: the seam between ``dpuprof project`` and the renderers.

``schema`` holds the typed object (pydantic, with a JSON Schema); ``store`` its path rule,
checksum, atomic write and validated read.
"""

from dpuprof.projection.schema import PROJECTION_VERSION, READABLE_VERSIONS, Projection
from dpuprof.projection.store import path_for, read, sha256, validate, write

__all__ = ["PROJECTION_VERSION", "READABLE_VERSIONS", "Projection", "path_for", "read", "sha256", "validate",
           "write"]
