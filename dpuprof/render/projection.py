"""Read a projection file (docs/projection-contract.md) for the report.

The report never computes a projection; it draws the one ``dpuprof project`` stored beside the
recording (``RUN.rec`` -> ``RUN.proj.json``). A missing file means a measured-only report. A
damaged file that the user named is an error; one merely found beside the recording is ignored
with a warning, so a bad side file never blocks the measured report.
"""

from __future__ import annotations

import math
from pathlib import Path

from dpuprof.errors import UserError
from dpuprof.projection import store
from dpuprof.projection.store import path_for


def num(value) -> float | None:
    """A finite float, or None for anything else (missing, text, NaN, bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def text_list(value) -> list[str]:
    """A list of strings from a projection field that should hold one (anything else dropped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def load(recording: str | Path, explicit: str | Path | None = None) -> tuple[dict | None, list[str]]:
    """Return ``(projection or None, warnings)`` for ``recording``.

    ``explicit``: a path the user gave with ``--projection``; problems with it raise UserError.
    """
    path = Path(explicit) if explicit else path_for(recording)
    if not path.exists():
        if explicit:
            raise UserError(f"{path}: no such projection file")
        return None, []
    warnings: list[str] = []
    try:
        proj = store.read(path).as_json()
    except (OSError, ValueError, UnicodeDecodeError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        if explicit:
            raise UserError(f"{path}: not a usable projection ({why})") from None
        return None, [f"ignored {path.name}: not a usable projection ({why}); "
                      "re-run dpuprof project"]
    want = proj.get("recording_sha256")
    if isinstance(want, str) and want:
        try:
            if store.sha256(Path(recording)) != want:
                warnings.append(f"{path.name} was made from a different version of this recording "
                                "(checksum differs): re-run dpuprof project")
        except OSError:
            pass
    for w in text_list(proj.get("warnings")):
        warnings.append(f"projection: {w}")
    return proj, warnings
