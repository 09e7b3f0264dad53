"""Read a projection file (docs/projection-contract.md) for the report.

The report never computes a projection; it draws the one ``dpuprof project`` stored. For
``dir/RUN.rec`` it looks (see ``candidates``) in the current directory, where ``dpuprof project``
writes by default, and then beside the recording. A missing file means a measured-only report. A
damaged file that the user named is an error; one merely found is ignored with a warning, so a bad
side file never blocks the measured report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dpuprof.errors import UserError
from dpuprof.projection import store
from dpuprof.projection.store import candidates, path_for  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # annotations only: pydantic is imported when a projection file is read (store.validate)
    from dpuprof.projection.schema import Projection


def load(recording: str | Path, explicit: str | Path | None = None) -> tuple[Projection | None, list[str]]:
    """Return ``(the validated Projection or None, warnings)`` for ``recording``.

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


def _read(path: Path) -> tuple[Projection | None, str]:
    """(validated projection, "") or (None, why it is unusable)."""
    try:
        return store.read(path), ""
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return None, str(err).splitlines()[0] if str(err) else type(err).__name__


def _matches(proj: Projection, recording) -> bool | None:
    """True/False when the projection's checksum is/is not the recording's; None when unknown."""
    want = proj.recording_sha256
    if not want:
        return None
    try:
        return store.sha256(Path(recording)) == want
    except OSError:
        return None


def _warnings(proj: Projection, path: Path, recording) -> list[str]:
    warnings = []
    if _matches(proj, recording) is False:
        warnings.append(f"{path.name} was made from a different version of this recording "
                        "(checksum differs): re-run dpuprof project")
    for w in proj.warnings:
        warnings.append(f"projection: {w}")
    return warnings
