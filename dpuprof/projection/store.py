"""Where a Projection file lives, and writing and reading it.

- path rule: ``project`` writes ``./RUN.proj.json`` (``default_output``); ``report`` looks there,
  then beside the recording (``candidates``, ``path_for``);
- ``write``: validate against the schema, then write atomically (a temporary file in the target's
  folder, renamed over the target: a reader never sees half a file, a planted symlink is replaced,
  never written through), mode 0644;
- ``read``: parse (NaN/Infinity refused) and validate; any problem is a ``ValueError`` with one
  line naming the first bad field.
- ``sha256``: of the recording a projection was made from, so a report can tell a stale one;
  ``stamp`` puts it, and the recording's name, into a projection before it is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: pydantic is imported when a projection is validated (validate)
    from dpuprof.projection.schema import Projection

SUFFIX = ".proj.json"


def path_for(recording: str | os.PathLike) -> Path:
    """``dir/RUN.rec`` -> ``dir/RUN.proj.json`` (beside the recording)."""
    recording = Path(recording)
    stem = recording.name[:-4] if recording.name.endswith(".rec") else recording.name
    return recording.with_name(stem + SUFFIX)


def default_output(recording: str | os.PathLike) -> Path:
    """Where ``dpuprof project dir/RUN.rec`` writes without ``-o``: ``./RUN.proj.json`` in the
    current directory, as perf and Nsight write into it (never into a folder the user did not name,
    such as a read-only or bundled recording's)."""
    return Path(path_for(recording).name)


def candidates(recording: str | os.PathLike) -> list[tuple[Path, bool]]:
    """Where ``dpuprof report dir/RUN.rec`` looks for its projection, in order, as
    ``(path, must_match)``: ``./RUN.proj.json`` in the current directory (where ``project`` writes
    by default), then ``dir/RUN.proj.json`` beside the recording. A file in the current directory
    is used only when its ``recording_sha256`` is this recording's (every default recording is named
    ``dpuprof.rec``, so the name alone does not tell whose it is); the one beside the recording is
    used by name, with a warning when its checksum differs.
    """
    beside = path_for(recording)
    here = default_output(recording)
    if here.resolve() == beside.resolve():
        return [(beside, False)]
    return [(here, True), (beside, False)]


def sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _one_line(err) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "projection"
    return f"{where}: {first.get('msg', 'invalid')}"


def validate(obj) -> Projection:
    """A Projection from a dict; ValueError with one line if it does not fit the schema."""
    # pydantic and the schema are imported here, not at load: a report finds its projection file
    # through this module, and most reports have none to validate; `dpuprof --help` loads it too
    from pydantic import ValidationError  # noqa: PLC0415 -- the pydantic schema ~0.1 s, see above

    from dpuprof.projection.schema import Projection  # noqa: PLC0415 -- see above

    if isinstance(obj, Projection):
        return obj
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    try:
        return Projection.model_validate(obj)
    except ValidationError as err:
        raise ValueError(_one_line(err)) from None


def dumps(proj: Projection) -> str:
    """The file's text: indented JSON, one trailing newline."""
    return json.dumps(proj.as_json(), indent=2, allow_nan=False) + "\n"


def write(proj: Projection | dict, target: str | os.PathLike) -> Path:
    """Validate and store ``proj`` at ``target`` atomically; returns the path. OSError on failure."""
    proj = validate(proj)
    target = Path(target)
    text = dumps(proj)
    fd, tmp = tempfile.mkstemp(prefix=".proj-", suffix=".json", dir=str(target.parent) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def stamp(proj: Projection, recording: str | os.PathLike, label: str | None = None, *,
          sweep: dict | None = None, set: list[str] | None = None) -> Projection:
    """A copy of ``proj`` (the model's, ``dpuprof.project.build_projection``, validated there) made
    from the file ``recording``: its ``recording`` field set to ``label`` (the name the user gave;
    default the path), ``recording_sha256`` to the file's checksum, and what the command line added:
    ``sweep`` (dpuprof.project.sweep.sweep's dict, validated here as a ``Sweep``) and ``set`` (the
    --set specs as given)."""
    from dpuprof.projection.schema import Sweep  # noqa: PLC0415 -- loaded with ``proj``'s class: see validate

    return proj.model_copy(update={"recording": label if label is not None else str(recording),
                                   "recording_sha256": sha256(recording),
                                   "sweep": None if sweep is None else Sweep.model_validate(sweep), "set": set})


def _reject(name):
    raise ValueError(f"{name} is not allowed in a projection")


def read(path: str | os.PathLike) -> Projection:
    """Load and validate the projection file at ``path`` (OSError, or ValueError with one line)."""
    with open(path, encoding="utf-8") as fh:
        try:
            obj = json.load(fh, parse_constant=_reject)
        except json.JSONDecodeError as err:
            raise ValueError(f"not JSON ({err.msg} at line {err.lineno})") from None
    return validate(obj)
