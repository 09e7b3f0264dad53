"""Read a projection file (docs/projection-contract.md) for the report.

The report never computes a projection; it draws the one ``dpuprof project`` stored. For
``dir/RUN.rec`` it looks (see ``candidates``) in the current directory, where ``dpuprof project``
writes by default, and then beside the recording. A missing file means a measured-only report. A
damaged file that the user named is an error; one merely found is ignored with a warning, so a bad
side file never blocks the measured report.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from dpuprof.categories import CATEGORIES
from dpuprof.errors import UserError

SUPPORTED_VERSIONS = (1,)


def path_for(recording: str | Path) -> Path:
    """``dir/RUN.rec`` -> ``dir/RUN.proj.json`` (beside the recording)."""
    recording = Path(recording)
    stem = recording.name[:-4] if recording.name.endswith(".rec") else recording.name
    return recording.with_name(stem + ".proj.json")


def candidates(recording: str | Path) -> list[tuple[Path, bool]]:
    """Where ``dpuprof report`` looks for ``dir/RUN.rec``'s projection, in order, as
    ``(path, must_match)``: ``./RUN.proj.json`` in the current directory (where ``dpuprof project``
    writes by default), then ``dir/RUN.proj.json`` beside the recording. A file found in the current
    directory is used only when its ``recording_sha256`` is this recording's (every default
    recording is named ``dpuprof.rec``, so the name alone does not tell whose it is); the one beside
    the recording is used by name, with a warning when its checksum differs.
    """
    beside = path_for(recording)
    here = Path(beside.name)
    if here.resolve() == beside.resolve():
        return [(beside, False)]
    return [(here, True), (beside, False)]


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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _validate(obj) -> dict:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    version = obj.get("projection_version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"projection_version {version!r} not supported (readable: {SUPPORTED_VERSIONS})")
    rows = obj.get("rows", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("'rows' is not a list of objects")
    by_cat = obj.get("by_category", {})
    if not isinstance(by_cat, dict):
        raise ValueError("'by_category' is not an object")
    for key in ("totals", "cores_for_ai", "speedup", "dpu", "host"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise ValueError(f"{key!r} is not an object")
    if obj.get("allreduce") is not None and not isinstance(obj["allreduce"], dict):
        raise ValueError("'allreduce' is not an object or null")
    unknown = [c for c in by_cat if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown categories in by_category: {', '.join(map(str, unknown[:3]))}")
    return obj


def load(recording: str | Path, explicit: str | Path | None = None) -> tuple[dict | None, list[str]]:
    """Return ``(projection or None, warnings)`` for ``recording``.

    ``explicit``: a path the user gave with ``--projection``; problems with it raise UserError.
    Without it the projection is looked for where ``candidates`` says.
    """
    if explicit:
        path = Path(explicit)
        if not path.exists():
            raise UserError(f"{path}: no such projection file")
        proj, why = _read(path)
        if proj is None:
            raise UserError(f"{path}: not a usable projection ({why})")
        return proj, _warnings(proj, path, recording)
    notes: list[str] = []
    others: list[str] = []  # said only when nothing is found: another run's file is no news otherwise
    for path, must_match in candidates(recording):
        if not path.exists():
            continue
        proj, why = _read(path)
        if proj is None:
            notes.append(f"ignored {path}: not a usable projection ({why}); re-run dpuprof project")
            continue
        if must_match and not _matches(proj, recording):
            others.append(f"ignored {path}: made from another recording than {recording} "
                          "(checksum differs)")
            continue
        return proj, notes + _warnings(proj, path, recording)
    return None, notes + others


def _read(path: Path) -> tuple[dict | None, str]:
    """(validated projection, "") or (None, why it is unusable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh, parse_constant=_reject)
        return _validate(obj), ""
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return None, str(err).splitlines()[0] if str(err) else type(err).__name__


def _matches(proj: dict, recording) -> bool | None:
    """True/False when the projection's checksum is/is not the recording's; None when unknown."""
    want = proj.get("recording_sha256")
    if not isinstance(want, str) or not want:
        return None
    try:
        return _sha256(Path(recording)) == want
    except OSError:
        return None


def _warnings(proj: dict, path: Path, recording) -> list[str]:
    warnings = []
    if _matches(proj, recording) is False:
        warnings.append(f"{path.name} was made from a different version of this recording "
                        "(checksum differs): re-run dpuprof project")
    for w in text_list(proj.get("warnings")):
        warnings.append(f"projection: {w}")
    return warnings


def _reject(name):
    raise ValueError(f"{name} is not allowed in a projection")
