"""The Projection: the seam between ``dpuprof project`` and the renderers.

``schema`` holds the typed object (pydantic, with a JSON Schema); ``store`` its path rule,
checksum, atomic write and validated read; ``window`` the steady window a projection covers
(``dpuprof project`` chooses it; ``report --time steady`` and the projection check apply the
same rule). Import them by name (``from dpuprof.projection.schema
import Projection``): this package re-exports nothing, because every ``dpuprof report`` imports
``store`` to look for a projection file, and the schema's pydantic would add 0.2 s to the reports
that have none (``time python3 -c 'import dpuprof.projection.X'``: store 0.12 s, schema 0.33 s,
each with Python's own start-up; 2-CPU VM).
"""
