"""DPU profiles: load a TOML data file and validate it into a :class:`Profile`.

This is the only module of ``dpuprof.project`` that reads files. Shipped profiles live in
``dpuprof/data/dpu/*.toml``; a user may pass a path to their own file. Every number is a table
``{value, source, note?}``: a profile without a source for a parameter is rejected, so every
number in a projection can be traced to a paper, a datasheet, a doc or a stated assumption.
Format reference: ``dpuprof/data/dpu/README.md``.

The file's schema is a set of pydantic models (the public :class:`Profile`, :class:`Mechanism` and
:class:`Param` among them): a field's type states its rule. Any problem becomes a
:class:`dpuprof.errors.UserError` of one line naming the file, the key and the problem
(``my.toml: mechanism[2] (rdma).alpha.value: must be <= 1, got 1.5``).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import ValidationError

from dpuprof.categories import CATEGORIES
from dpuprof.tomlcompat import tomllib
from dpuprof.errors import UserError
from dpuprof.project.profile_schema import MODES, SCHEMA_VERSION, Mechanism, Param, Profile, one_line


def data_dir() -> Path:
    """The directory of the shipped profiles."""
    return Path(__file__).resolve().parent.parent / "data" / "dpu"


def _toml_load(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: malformed TOML: {str(err).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: malformed TOML: not UTF-8 text") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read DPU profile: {err.strerror or err}") from None


def _shipped() -> dict[str, Path]:
    """Name or alias -> shipped file. Aliases are read from the files themselves."""
    out: dict[str, Path] = {}
    for path in sorted(data_dir().glob("*.toml")):
        out[path.stem] = path
        try:
            data = _toml_load(path)
        except UserError:
            continue
        for alias in data.get("aliases", []) or []:
            if isinstance(alias, str):
                out.setdefault(alias, path)
    return out


def known_profiles() -> list[str]:
    """Names and aliases of the shipped profiles, sorted."""
    return sorted(_shipped())


def _fold(name: str) -> str:
    """A name as --dpu compares it: case and separators do not matter (``BlueField-3``,
    ``BlueField 3``, ``bluefield_3`` and ``bluefield3`` are one name; no two shipped names fold alike)."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _did_you_mean(name: str, names: list[str]) -> str:
    """`` (did you mean X?)`` for the closest shipped name, or an empty string."""
    folded = {_fold(n): n for n in names}
    close = difflib.get_close_matches(_fold(name), list(folded), n=1, cutoff=0.6)
    return f" (did you mean {folded[close[0]]}?)" if close else ""


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name or alias (``bluefield``, any case: ``BlueField-3``), or a user's
    TOML file by path. An unknown name is a UserError of one line with the closest name and the
    known ones."""
    shipped = _shipped()
    by_fold = {_fold(name): path for name, path in shipped.items()}
    if name_or_path in shipped:
        path = shipped[name_or_path]
    elif _fold(name_or_path) in by_fold:
        path = by_fold[_fold(name_or_path)]
    else:
        path = Path(name_or_path)
        looks_like_path = (path.suffix == ".toml" or "/" in name_or_path or "\\" in name_or_path)
        if not path.is_file():
            if looks_like_path:
                raise UserError(f"{name_or_path}: no such DPU profile file")
            raise UserError(f"unknown DPU {name_or_path!r}{_did_you_mean(name_or_path, list(shipped))}; "
                            f"known: {', '.join(known_profiles())} (or give the path of a .toml profile)")
    return validate(_toml_load(path), str(path))


def validate(data: dict, file: str = "<profile>") -> Profile:
    """Validate parsed TOML ``data`` into a Profile, or raise UserError naming key and problem.

    The line reports the first problem found (tables in the order of dpuprof.project.profile_schema):
    ``file: mechanism[0] (rdma).alpha.value: must be <= 1, got 1.5``.
    """
    try:
        return Profile.model_validate(data, context={"file": file})
    except ValidationError as err:
        raise UserError(f"{file}: {one_line(err, data)}") from None


__all__ = ["CATEGORIES", "Mechanism", "MODES", "Param", "Profile", "SCHEMA_VERSION", "known_profiles",
           "load_profile", "validate"]
