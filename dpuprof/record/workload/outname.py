"""Output name templates for ``dpuprof record -o``, in the style of Nsight Systems' ``-o``.

One recorder per node (``srun dpuprof record ...``) on a shared filesystem must not write the same
file: ``-o run-%h-%q{SLURM_PROCID}.rec`` names each file after its host and Slurm rank.

Keys: ``%h`` hostname, ``%p`` the recorder's pid, ``%n`` a counter (the first of 1, 2, 3 ... for
which the whole name is not taken yet), ``%q{VAR}`` the value of environment variable VAR (an
unset or empty VAR is an error, never an empty string: two ranks must not collide silently), and
``%%`` a literal ``%``. Any other ``%`` sequence is an error.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping

from dpuprof.errors import UserError

_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEYS = "%h hostname, %p recorder pid, %n counter, %q{VAR} environment variable, %% a literal %"
MAX_COUNTER = 100_000


def _parts(template: str, hostname: str, pid: int, env: Mapping[str, str]) -> list[str | None]:
    """The template split into literal text, with None where the counter goes."""
    out: list[str | None] = []
    i = 0
    while i < len(template):
        j = template.find("%", i)
        if j < 0:
            out.append(template[i:])
            break
        out.append(template[i:j])
        key = template[j + 1:j + 2]
        if key == "%":
            out.append("%")
        elif key == "h":
            out.append(hostname)
        elif key == "p":
            out.append(str(pid))
        elif key == "n":
            out.append(None)
        elif key == "q":
            end = template.find("}", j + 2)
            if template[j + 2:j + 3] != "{" or end < 0:
                raise UserError(f"output name {template!r}: %q needs a variable name in braces, e.g. %q{{SLURM_PROCID}}")
            name = template[j + 3:end]
            if not _VAR.fullmatch(name):
                raise UserError(f"output name {template!r}: {name!r} is not an environment variable name")
            value = env.get(name)
            if not value:
                raise UserError(f"output name {template!r}: environment variable {name} is not set "
                                f"(%q{{{name}}} never expands to an empty string)")
            out.append(value)
            i = end + 1
            continue
        else:
            shown = "%" + key if key else "a trailing %"
            raise UserError(f"output name {template!r}: unknown key {shown}; known: {KEYS}")
        i = j + 2
    return out


def expand(template: str, *, hostname: str | None = None, pid: int | None = None,
           env: Mapping[str, str] | None = None, exists: Callable[[str], bool] = os.path.lexists) -> str:
    """The output path for ``template`` (see the module docstring for the keys).

    ``hostname``, ``pid`` and ``env`` default to this host, this process and ``os.environ``;
    ``exists`` says whether a candidate name is taken (used only when the template has ``%n``).
    A template without ``%`` is returned unchanged; values are inserted as they are (a ``/`` in
    ``%q{SCRATCH}`` makes a directory part). Raises UserError for an unknown key, a trailing
    ``%``, a malformed, empty or unset ``%q{VAR}``, or no free ``%n``.
    """
    parts = _parts(template, hostname if hostname is not None else socket.gethostname(),
                   os.getpid() if pid is None else pid, os.environ if env is None else env)
    if None not in parts:
        return "".join(p for p in parts if p is not None)
    for n in range(1, MAX_COUNTER + 1):
        name = "".join(str(n) if p is None else p for p in parts)
        if not exists(name):
            return name
    raise UserError(f"output name {template!r}: no free name for %n up to {MAX_COUNTER}")


__all__ = ["expand", "KEYS"]
