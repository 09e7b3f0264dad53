"""DPU profiles: load a TOML data file and validate it into a :class:`Profile`.

This is the only module of ``dpuprof.project`` that reads files. Shipped profiles live in
``dpuprof/data/dpu/*.toml``; a user may pass a path to their own file. Every number is a table
``{value, source, note?}``: a profile without a source for a parameter is rejected, so every
number in a projection can be traced to a paper, a datasheet, a doc or a stated assumption.
Format reference: ``dpuprof/data/dpu/README.md``.

Any problem becomes a :class:`dpuprof.errors.UserError` of one line naming the file, the key and
the problem (``my.toml: mechanism[2].alpha.value: must be between 0 and 1, got 1.5``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE
from dpuprof.errors import UserError

SCHEMA_VERSION = 1

#: Execution modes of the Accelerometer model.
MODES = ("sync", "sync_os", "async")
#: Where offloaded work runs: the NIC datapath, a fixed-function engine, the Arm cores, or nowhere
#: (the ideal device).
RUNS_ON = ("nic", "engine", "arm", "ideal")
#: How the slice of a subcategory a mechanism covers is measured (see dpuprof.project.features).
SHARES = ("all", "remainder", "collective_traffic", "network_crypto_stacks", "deflate",
          "deflate_lz4_decompress", "below_page_cache", "socket_processes")
#: How the number of offloads n is counted (see dpuprof.project.features).
N_FROM = ("none", "packets", "block_ios", "workload_socket_calls", "cpu_chunks")

#: Capacity keys and what they mean (units in the name).
CAPACITY_KEYS = {
    "line_rate_gbps": "network line rate of the card, Gb/s (flagged, never moved back to the host)",
    "crypto_gbps": "inline AES-GCM throughput, Gb/s",
    "arm_cores": "general-purpose Arm cores",
    "arm_speed": "speed of one Arm core relative to one host core (A of work run there)",
    "compression_engine_host_cores": "compression engine throughput in host-core equivalents",
}
#: Resources a mechanism may consume (checked by dpuprof.project.capacity).
RESOURCES = ("line_rate_gbps", "crypto_gbps", "arm_cores", "compression_engine_host_cores")
ALLREDUCE_KEYS = {
    "rdma_latency_us": "one-way small-message latency over RDMA, microseconds",
    "tcp_latency_us": "one-way small-message latency over kernel TCP, microseconds",
    "tcp_flow_gbps": "throughput of one TCP ring channel (one core), Gb/s",
}
#: Optional all-reduce keys: the intra-node links of hierarchical all-reduce (NVLink/SHM). Without
#: them, intra-node hops are priced like network hops (stated in the projection).
ALLREDUCE_OPTIONAL = {
    "intra_node_gbps": "per-GPU intra-node link bandwidth (NVLink or shared memory), Gb/s, one direction",
    "intra_node_latency_us": "one-way latency of one intra-node hop, microseconds",
}

_TOP_KEYS = {"schema_version", "name", "aliases", "description", "capacity", "mechanism", "allreduce",
             "references"}
_PARAM_KEYS = {"value", "source", "note"}
_MECH_TEXT = {"name", "label", "requires", "applies_to", "share", "runs_on", "resource", "n_from", "notes"}
_MECH_PARAMS = {"mode", "alpha", "A", "o0_ns", "L_ns", "Q_ns", "o1_ns", "chunk_bytes", "host_bytes_per_cpu_s"}
_MECH_REQUIRED = ("name", "label", "requires", "applies_to", "share", "runs_on", "n_from",
                  "mode", "alpha", "o0_ns", "L_ns", "Q_ns", "o1_ns")


@dataclass(frozen=True)
class Param:
    """One sourced number (or, for ``mode``, word)."""

    value: float | str
    source: str
    note: str = ""

    def as_dict(self) -> dict:
        value = self.value
        if isinstance(value, float) and math.isinf(value):
            value = None  # JSON has no infinity; null means unbounded (documented in the contract)
        out = {"value": value, "source": self.source}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Mechanism:
    """One offload mechanism of a device (see dpuprof/data/dpu/README.md for each field)."""

    name: str
    label: str
    requires: str
    applies_to: tuple[str, ...]
    share: str
    runs_on: str
    resource: str | None
    n_from: str
    mode: Param
    alpha: Param
    A: Param
    o0_ns: Param
    L_ns: Param
    Q_ns: Param
    o1_ns: Param
    chunk_bytes: Param | None = None
    host_bytes_per_cpu_s: Param | None = None
    notes: str = ""

    def matches(self, subcategory: str) -> bool:
        return any(fnmatchcase(subcategory, pat) for pat in self.applies_to)

    def sources(self) -> list[str]:
        params = [self.mode, self.alpha, self.A, self.o0_ns, self.L_ns, self.Q_ns, self.o1_ns,
                  self.chunk_bytes, self.host_bytes_per_cpu_s]
        return list(dict.fromkeys(p.source for p in params if p is not None))


@dataclass(frozen=True)
class Profile:
    """A validated DPU profile."""

    name: str
    description: str
    file: str
    aliases: tuple[str, ...] = ()
    capacity: dict = field(default_factory=dict)  # key -> Param
    mechanisms: tuple[Mechanism, ...] = ()
    allreduce: dict | None = None  # key -> Param, or None
    references: tuple[str, ...] = ()

    def cap(self, key: str) -> float | None:
        p = self.capacity.get(key)
        return None if p is None else float(p.value)

    def as_dict(self) -> dict:
        """JSON form for the projection's ``dpu`` key."""
        return {
            "name": self.name,
            "file": self.file,
            "description": self.description,
            "aliases": list(self.aliases),
            "capacity": {k: p.as_dict() for k, p in self.capacity.items()},
            "mechanisms": [m.name for m in self.mechanisms],
            "allreduce": None if self.allreduce is None else {k: p.as_dict() for k, p in self.allreduce.items()},
        }

    def with_overrides(self, mechanisms=None, **params) -> Profile:
        """A copy with mechanism parameters replaced (for --mode, --set and --sweep).

        ``params`` maps a mechanism field (``mode``, ``alpha``, ``A``, ``o0_ns``, ...) to a value;
        ``mechanisms`` (names) limits the change to those mechanisms (None: every mechanism). The new
        value's source says it was set on the command line. Unknown names raise ValueError.
        """
        names = None if mechanisms is None else set(mechanisms)
        if names is not None and names - {m.name for m in self.mechanisms}:
            raise ValueError(f"unknown mechanism(s) {sorted(names - {m.name for m in self.mechanisms})}")
        mechs = []
        for m in self.mechanisms:
            if names is None or m.name in names:
                changes = {k: Param(v, "set on the command line (what-if)") for k, v in params.items()}
                m = replace(m, **changes)
            mechs.append(m)
        return replace(self, mechanisms=tuple(mechs))

    def mechanism(self, name: str) -> Mechanism | None:
        return next((m for m in self.mechanisms if m.name == name), None)


# ------------------------------------------------------------------------------------------ loading

def data_dir() -> Path:
    """The directory of the shipped profiles."""
    return Path(__file__).resolve().parent.parent / "data" / "dpu"


def _toml_load(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UserError("reading DPU profiles needs Python 3.11+ (tomllib) or the tomli package") from None
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


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name or alias (``bluefield``), or a user's TOML file by path."""
    shipped = _shipped()
    if name_or_path in shipped:
        path = shipped[name_or_path]
    else:
        path = Path(name_or_path)
        looks_like_path = (path.suffix == ".toml" or "/" in name_or_path or "\\" in name_or_path)
        if not path.is_file():
            if looks_like_path:
                raise UserError(f"{name_or_path}: no such DPU profile file")
            raise UserError(f"unknown DPU {name_or_path!r}; known: {', '.join(known_profiles())} "
                            "(or give the path of a .toml profile)")
    return validate(_toml_load(path), str(path))


# ---------------------------------------------------------------------------------------- validation

def _fail(file: str, key: str, problem: str):
    raise UserError(f"{file}: {key}: {problem}")


def _check_keys(file: str, where: str, table: dict, allowed: set[str]):
    unknown = sorted(set(table) - allowed)
    if unknown:
        _fail(file, where, f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _text(file: str, key: str, value, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        _fail(file, key, f"must be text, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        _fail(file, key, "must not be empty")
    return value


def _param(file: str, key: str, table, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, allow_inf: bool = False, words: tuple[str, ...] | None = None) -> Param:
    if not isinstance(table, dict):
        _fail(file, key, "must be a table {value = ..., source = \"...\"}")
    _check_keys(file, key, table, _PARAM_KEYS)
    if "value" not in table:
        _fail(file, key, "missing 'value'")
    if "source" not in table:
        _fail(file, key, "missing 'source' (every parameter needs one; say 'assumption: ...' if it is one)")
    source = _text(file, f"{key}.source", table["source"])
    note = _text(file, f"{key}.note", table.get("note", ""), allow_empty=True)
    value = table["value"]
    if words is not None:
        if value not in words:
            _fail(file, f"{key}.value", f"must be one of {', '.join(words)}, got {value!r}")
        return Param(value, source, note)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(file, f"{key}.value", f"must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not (allow_inf and value > 0)):
        _fail(file, f"{key}.value", f"must be a finite number{' or inf' if allow_inf else ''}, got {value}")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        _fail(file, f"{key}.value", f"must be {'>' if lo_open else '>='} {lo:g}, got {value:g}")
    if hi is not None and value > hi:
        _fail(file, f"{key}.value", f"must be <= {hi:g}, got {value:g}")
    return Param(value, source, note)


def _mechanism(file: str, i: int, table, capacity: dict) -> Mechanism:
    where = f"mechanism[{i}]"
    if not isinstance(table, dict):
        _fail(file, where, "must be a table ([[mechanism]])")
    _check_keys(file, where, table, _MECH_TEXT | _MECH_PARAMS)
    for key in _MECH_REQUIRED:
        if key not in table and not (key == "A" and table.get("runs_on") == "arm"):
            _fail(file, f"{where}.{key}", "missing")
    name = _text(file, f"{where}.name", table["name"])
    where = f"mechanism[{i}] ({name})"
    applies = table["applies_to"]
    if not isinstance(applies, list) or not applies or not all(isinstance(a, str) for a in applies):
        _fail(file, f"{where}.applies_to", "must be a non-empty list of subcategory patterns")
    for pat in applies:
        top = pat.split(".", 1)[0]
        if top not in INFRASTRUCTURE:
            _fail(file, f"{where}.applies_to", f"{pat!r}: only infrastructure categories "
                                                f"({', '.join(INFRASTRUCTURE)}) can be offloaded")
    share = table["share"]
    if share not in SHARES:
        _fail(file, f"{where}.share", f"must be one of {', '.join(SHARES)}, got {share!r}")
    runs_on = table["runs_on"]
    if runs_on not in RUNS_ON:
        _fail(file, f"{where}.runs_on", f"must be one of {', '.join(RUNS_ON)}, got {runs_on!r}")
    n_from = table["n_from"]
    if n_from not in N_FROM:
        _fail(file, f"{where}.n_from", f"must be one of {', '.join(N_FROM)}, got {n_from!r}")
    resource = table.get("resource")
    if resource is not None:
        if resource not in RESOURCES:
            _fail(file, f"{where}.resource", f"must be one of {', '.join(RESOURCES)}, got {resource!r}")
        if resource not in capacity:
            _fail(file, f"{where}.resource", f"{resource!r} needs capacity.{resource} in the profile")
    if runs_on == "arm":
        if resource != "arm_cores":
            _fail(file, f"{where}.resource", "work that runs on the Arm cores must use resource \"arm_cores\"")
        if "arm_speed" not in capacity and "A" not in table:
            _fail(file, f"{where}.A", "missing (and no capacity.arm_speed to default to)")
    A = _param(file, f"{where}.A", table["A"], lo=0, lo_open=True, allow_inf=True) if "A" in table \
        else capacity["arm_speed"]
    chunk = host_rate = None
    if n_from == "cpu_chunks":
        for key in ("chunk_bytes", "host_bytes_per_cpu_s"):
            if key not in table:
                _fail(file, f"{where}.{key}", "missing (needed by n_from = \"cpu_chunks\")")
        chunk = _param(file, f"{where}.chunk_bytes", table["chunk_bytes"], lo=0, lo_open=True)
    if "host_bytes_per_cpu_s" in table:  # also sizes inline-crypto demand (capacity.crypto_gbps)
        host_rate = _param(file, f"{where}.host_bytes_per_cpu_s", table["host_bytes_per_cpu_s"], lo=0, lo_open=True)
    return Mechanism(
        name=name,
        label=_text(file, f"{where}.label", table["label"]),
        requires=_text(file, f"{where}.requires", table["requires"]),
        applies_to=tuple(applies),
        share=share,
        runs_on=runs_on,
        resource=resource,
        n_from=n_from,
        mode=_param(file, f"{where}.mode", table["mode"], words=MODES),
        alpha=_param(file, f"{where}.alpha", table["alpha"], lo=0, hi=1),
        A=A,
        o0_ns=_param(file, f"{where}.o0_ns", table["o0_ns"], lo=0),
        L_ns=_param(file, f"{where}.L_ns", table["L_ns"], lo=0),
        Q_ns=_param(file, f"{where}.Q_ns", table["Q_ns"], lo=0),
        o1_ns=_param(file, f"{where}.o1_ns", table["o1_ns"], lo=0),
        chunk_bytes=chunk,
        host_bytes_per_cpu_s=host_rate,
        notes=_text(file, f"{where}.notes", table.get("notes", ""), allow_empty=True),
    )


def validate(data: dict, file: str = "<profile>") -> Profile:
    """Validate parsed TOML ``data`` into a Profile, or raise UserError naming key and problem."""
    if not isinstance(data, dict):
        _fail(file, "(top level)", "must be a TOML table")
    _check_keys(file, "(top level)", data, _TOP_KEYS)
    for key in ("schema_version", "name", "description", "mechanism"):
        if key not in data:
            _fail(file, key, "missing")
    if data["schema_version"] != SCHEMA_VERSION:
        _fail(file, "schema_version", f"must be {SCHEMA_VERSION}, got {data['schema_version']!r}")
    name = _text(file, "name", data["name"])
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        _fail(file, "aliases", "must be a list of names")
    references = data.get("references", [])
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        _fail(file, "references", "must be a list of text")

    cap_table = data.get("capacity", {})
    if not isinstance(cap_table, dict):
        _fail(file, "capacity", "must be a table")
    _check_keys(file, "capacity", cap_table, set(CAPACITY_KEYS))
    capacity = {}
    for key, table in cap_table.items():
        if key == "arm_speed":
            capacity[key] = _param(file, f"capacity.{key}", table, lo=0, lo_open=True)
        elif key == "arm_cores":
            capacity[key] = _param(file, f"capacity.{key}", table, lo=0)
        else:
            capacity[key] = _param(file, f"capacity.{key}", table, lo=0, lo_open=True, allow_inf=True)

    mech_list = data["mechanism"]
    if not isinstance(mech_list, list) or not mech_list:
        _fail(file, "mechanism", "must be a non-empty array of tables ([[mechanism]])")
    mechanisms = tuple(_mechanism(file, i, t, capacity) for i, t in enumerate(mech_list))
    names = [m.name for m in mechanisms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        _fail(file, "mechanism", f"duplicate mechanism name {dup[0]!r}")

    allreduce = None
    if "allreduce" in data:
        table = data["allreduce"]
        if not isinstance(table, dict):
            _fail(file, "allreduce", "must be a table")
        _check_keys(file, "allreduce", table, set(ALLREDUCE_KEYS) | set(ALLREDUCE_OPTIONAL))
        for key in ALLREDUCE_KEYS:
            if key not in table:
                _fail(file, f"allreduce.{key}", "missing")
        if "line_rate_gbps" not in capacity:
            _fail(file, "capacity.line_rate_gbps", "missing (needed by the allreduce section)")
        allreduce = {k: _param(file, f"allreduce.{k}", table[k], lo=0, lo_open=k.endswith("_gbps"))
                     for k in list(ALLREDUCE_KEYS) + list(ALLREDUCE_OPTIONAL) if k in table}

    return Profile(name=name, description=_text(file, "description", data["description"]), file=file,
                   aliases=tuple(aliases), capacity=capacity, mechanisms=mechanisms, allreduce=allreduce,
                   references=tuple(references))


__all__ = ["CATEGORIES", "Mechanism", "MODES", "Param", "Profile", "known_profiles", "load_profile",
           "validate"]
