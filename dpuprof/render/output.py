"""What a renderer returns, and writing it out safely.

Reports are often written as root next to a recording. A symlink planted at the output path is
refused, never followed; the file is written under a temporary name and renamed into place, so a
reader never sees half a report and an interrupted render leaves the old file intact.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from dpuprof.errors import UserError


@dataclass
class Rendered:
    main: bytes
    #: extra files (name -> bytes) written beside the main output, e.g. the markdown's PNGs
    extra: dict[str, bytes] = field(default_factory=dict)
    binary: bool = False


def check_target(path: Path, inputs=()) -> None:
    """Refuse an output path that is a symlink, not a regular file, in a missing directory, or one
    of the input recordings -- before any work is done."""
    path = Path(path)
    if path.is_symlink():
        raise UserError(f"refusing to write {path}: it is a symbolic link")
    if path.exists() and not path.is_file():
        raise UserError(f"refusing to write {path}: it exists and is not a regular file")
    if not path.parent.is_dir():
        raise UserError(f"cannot write {path}: no such directory {path.parent}")
    for inp in inputs:
        try:
            if path.exists() and path.samefile(inp):
                raise UserError(f"refusing to overwrite the recording {inp} with the report")
        except OSError:
            pass


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; refuse symlinks and non-regular files."""
    path = Path(path)
    check_target(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)  # rename replaces a link planted meanwhile; it never follows it
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {err.strerror}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def emit(rendered: Rendered, output: str | None, inputs=()) -> list[Path]:
    """Write ``rendered`` to ``output`` (None or '-' = standard output); return the files written."""
    if output in (None, "-"):
        if rendered.binary and sys.stdout.isatty():
            raise UserError("refusing to write binary output to a terminal: use -o FILE")
        sys.stdout.buffer.write(rendered.main)
        sys.stdout.buffer.flush()
        return []
    path = Path(output)
    check_target(path, inputs)
    written = []
    for name, data in rendered.extra.items():
        extra = path.with_name(name)
        write_file(extra, data)
        written.append(extra)
    write_file(path, rendered.main)
    return written + [path]
