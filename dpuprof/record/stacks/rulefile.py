"""Load and validate classification rule files (``dpuprof/data/rules.toml``, ``record --rules FILE``).

A rule file is TOML whose top-level keys are arrays of tables (docs/taxonomy.md):

  ``rule``      ``subcategory`` and ``kernel``/``module``/``user`` globs, optional ``cause``
  ``context``   ``leaf`` (subcategory globs), ``under`` (categories), ``suffix``
  ``boundary``  ``kernel`` globs: interrupt/softirq entries that end a context walk
  ``entry``     ``kernel`` globs: syscall entry frames (a stack rooted there is a system call)
  ``wrapper``   ``category`` and ``module``/``user`` globs: libc system-call wrappers
  ``thread``    ``subcategory``, ``comm`` globs, ``overrides`` (subcategory globs)
  ``cause``     ``cause`` and ``module``/``user`` globs
  ``observer``  ``subcategory`` (``observer.*``) and ``kernel`` globs: the recorder's own BPF
                programs; a stack with such a frame anywhere is the recorder's, not the job's

Several files are merged table by table, earlier files first, so their entries win (rules are tried
in order). Any problem is a :class:`dpuprof.errors.UserError` of one line naming the file.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from dpuprof.categories import CATEGORIES, IDLE, OBSERVER, top_level
from dpuprof.tomlcompat import tomllib
from dpuprof.errors import UserError

#: Keys each table kind accepts; the first tuple is required.
KINDS = {
    "rule": (("subcategory",), ("kernel", "module", "user", "cause")),
    "context": (("leaf", "under", "suffix"), ()),
    "boundary": (("kernel",), ()),
    "entry": (("kernel",), ()),
    "wrapper": (("category",), ("module", "user")),
    "thread": (("subcategory", "comm", "overrides"), ()),
    "cause": (("cause",), ("module", "user")),
    "observer": (("subcategory", "kernel"), ()),
}
_LISTS = {"kernel", "module", "user", "leaf", "under", "comm", "overrides"}
_SUFFIX = re.compile(r"^[a-z][a-z0-9_]*$")


def compile_globs(globs) -> re.Pattern | None:
    """Shell globs (fnmatch, case-sensitive) -> one anchored regex, or None for no globs."""
    if not globs:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


@dataclass(frozen=True)
class Entry:
    """One table of a rule file: ``kind`` (a key of KINDS), its values, and where it came from."""

    kind: str
    values: dict
    origin: str

    def pattern(self, key: str) -> re.Pattern | None:
        return compile_globs(self.values.get(key))


def _check_sub(sub, origin: str, what: str) -> None:
    if not isinstance(sub, str) or (sub != IDLE and (top_level(sub) not in CATEGORIES or "." not in sub)):
        raise UserError(f"{origin}: {what} {sub!r} is not a known category's subcategory "
                        f"(top.sub, top one of {', '.join(CATEGORIES)})")


def _check_entry(kind: str, raw, origin: str) -> Entry:
    if not isinstance(raw, dict):
        raise UserError(f"{origin}: each [[{kind}]] must be a table")
    required, optional = KINDS[kind]
    for key in raw:
        if key not in required and key not in optional:
            raise UserError(f"{origin}: [[{kind}]] has an unknown key {key!r} "
                            f"(known: {', '.join(required + optional)})")
    for key in required:
        if key not in raw:
            raise UserError(f"{origin}: a [[{kind}]] lacks {key!r}")
    for key, val in raw.items():
        if key in _LISTS and not (isinstance(val, list) and all(isinstance(v, str) and v for v in val)):
            raise UserError(f"{origin}: [[{kind}]] {key} must be a list of non-empty strings")
        if key not in _LISTS and not isinstance(val, str):
            raise UserError(f"{origin}: [[{kind}]] {key} must be a string")
    if kind == "rule":
        _check_sub(raw["subcategory"], origin, "subcategory")
        if not any(raw.get(k) for k in ("kernel", "module", "user")):
            raise UserError(f"{origin}: rule {raw['subcategory']!r} has no kernel, module or user patterns")
    elif kind == "observer":
        sub = raw["subcategory"]
        if not isinstance(sub, str) or top_level(sub) != OBSERVER or "." not in sub:
            raise UserError(f"{origin}: observer subcategory {sub!r} must be {OBSERVER}.<name>")
    elif kind == "thread":
        _check_sub(raw["subcategory"], origin, "thread subcategory")
    elif kind in ("wrapper",) and raw["category"] not in CATEGORIES:
        raise UserError(f"{origin}: wrapper category {raw['category']!r} is not one of {', '.join(CATEGORIES)}")
    elif kind == "context":
        if not _SUFFIX.match(raw["suffix"]):
            raise UserError(f"{origin}: context suffix {raw['suffix']!r} must be a lower-case word")
        for cat in raw["under"]:
            if cat not in CATEGORIES:
                raise UserError(f"{origin}: context category {cat!r} is not one of {', '.join(CATEGORIES)}")
    return Entry(kind, dict(raw), origin)


def parse(text: str, origin: str) -> list[Entry]:
    """Entries of one rule file's ``text`` in file order; ``origin`` names it in errors."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{origin}: not valid TOML ({str(err).splitlines()[0]})") from None
    out = []
    for kind, items in doc.items():
        if kind not in KINDS:
            raise UserError(f"{origin}: unknown table {kind!r} (known: {', '.join(KINDS)})")
        if not isinstance(items, list):
            raise UserError(f"{origin}: {kind!r} must be an array of tables ([[{kind}]])")
        out.extend(_check_entry(kind, raw, origin) for raw in items)
    return out


def read(path: str | Path, origin: str) -> str:
    """The text of a rule file, or a UserError naming it (``origin``) and why it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{origin}: cannot read it ({getattr(err, 'strerror', None) or err})") from None
