"""Where a Recording file goes: the checks made before anything is loaded, and the staged name a
new recording is written under until it has really started.

``dpuprof record`` must never lose the last good recording to a run that fails to start (a
mistyped command, an unwritable directory, Ctrl-C while the probes compile). So:

- ``check_output`` runs before the probes compile: it refuses a symbolic link at the path (or at
  its ``.old`` name), a path that is not a regular file, and a directory where no file can be
  created (it creates and removes a temporary file there), and touches nothing at the path.
- ``create_staged`` creates the new file under a temporary name beside the path
  (``.NAME.XXXXXXXX.tmp``); ``move_into_place`` renames an existing file to ``NAME.old`` (like
  perf.data -> perf.data.old) and the staged one to ``NAME``. The recorder calls it once the
  recording has really started (recorder.py); before that a failure removes the staged file and
  the existing one is as it was.

Every file is created with O_EXCL|O_NOFOLLOW (a symlink planted at a name is refused, never
followed), mode 0644 whatever the umask, and handed to ``owner`` (the invoking user under sudo)
before any data is written. Renames never follow symlinks either.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dpuprof.errors import UserError


def old_name(path: Path) -> Path:
    """Where an existing recording at ``path`` is kept when a new one replaces it."""
    return path.with_name(path.name + ".old")


def _refuse(path: Path) -> None:
    """UserError when ``path`` cannot take a new recording: a symbolic link, something that is not
    a regular file, or an existing file whose ``.old`` name is a symbolic link."""
    if path.is_symlink():
        raise UserError(f"refusing to write {path}: it is a symbolic link")
    if path.exists():
        if not path.is_file():
            raise UserError(f"refusing to write {path}: it exists and is not a regular file")
        old = old_name(path)
        if old.is_symlink():
            raise UserError(f"refusing to rename {path} to {old}: {old} is a symbolic link")


def check_output(path: str | os.PathLike) -> None:
    """Raise UserError (one line) unless a recording can be written at ``path`` (see the module
    docstring). Cheap (no probe, no data): meant to run before anything slow. Nothing at
    ``path`` or its ``.old`` name is created, renamed or opened."""
    path = Path(path)
    _refuse(path)
    try:  # the one sure test of "can create here": read-only mounts, ACLs, quotas, missing dirs
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=path.parent)
    except OSError as err:
        raise UserError(f"cannot create {path}: {err.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def _own(fd: int, owner: tuple[int, int] | None) -> None:
    os.fchmod(fd, 0o644)  # not subject to the umask: readable, never world-writable
    if owner is not None and os.geteuid() == 0:
        os.fchown(fd, owner[0], owner[1])


def create_exclusive(path: Path, owner: tuple[int, int] | None) -> None:
    """Create ``path`` empty (see the module docstring), an existing file first renamed to
    ``.old``. UserError (one line) when it cannot be."""
    _refuse(path)
    if path.exists():
        os.replace(path, old_name(path))  # like perf.data -> perf.data.old
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise UserError(f"refusing to write {path}: it appeared while opening (symlink race?)") from None
    except OSError as err:
        raise UserError(f"cannot create {path}: {err.strerror}") from None
    try:
        _own(fd, owner)
    finally:
        os.close(fd)


def create_staged(path: Path, owner: tuple[int, int] | None) -> Path:
    """Create an empty file under a new temporary name beside ``path`` and return that name; ``path``
    itself is not touched. UserError (one line) when it cannot be created."""
    _refuse(path)
    try:  # mkstemp opens with O_EXCL|O_NOFOLLOW and a random name
        fd, staged = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise UserError(f"cannot create {path}: {err.strerror}") from None
    try:
        _own(fd, owner)
    except OSError:
        os.close(fd)
        os.unlink(staged)
        raise
    os.close(fd)
    return Path(staged)


def move_into_place(staged: Path, path: Path) -> None:
    """Rename an existing ``path`` to ``.old`` and ``staged`` to ``path``. OSError when that cannot
    be done (also for what ``_refuse`` refuses: a symlink planted since ``check_output``); the
    existing file is then back at ``path`` where that is possible, and ``staged`` is left for the
    caller to remove."""
    try:
        _refuse(path)
    except UserError as err:
        raise OSError(str(err)) from None
    old = None
    if path.exists():
        old = old_name(path)
        os.replace(path, old)
    try:
        os.replace(staged, path)
    except OSError:
        if old is not None:
            try:
                os.replace(old, path)  # put the last recording back
            except OSError:
                pass
        raise
