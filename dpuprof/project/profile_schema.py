"""The schema of a DPU profile file (``dpuprof/data/dpu/*.toml``) as pydantic models.

A field's type states its rule: a number is a TOML int or float (never bool or text) in a range,
``inf`` only where a fixed-function engine may run at line rate, NaN never; text is not empty; a
word is one of a closed set; a table has only the keys listed (a typo must not fall back to a
default). The rules that link fields are the two ``model_validator(mode="after")``.
:func:`one_line` words pydantic's first error as the one line the user sees, naming the key
(``mechanism[0] (rdma).alpha.value: must be <= 1, got 1.5``). Format: dpuprof/data/dpu/README.md.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, Strict,
                      ValidationError, ValidationInfo, model_validator)
from pydantic_core import PydanticCustomError

from dpuprof.categories import INFRASTRUCTURE

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

#: Resources a mechanism may consume (checked by dpuprof.project.capacity).
RESOURCES = ("line_rate_gbps", "crypto_gbps", "arm_cores", "compression_engine_host_cores")

# ------------------------------------------------------------------------------------------ fields

def _problem(text: str, at: tuple = ()) -> PydanticCustomError:
    """A rule broken at ``at`` (a path below the model that raises it)."""
    return PydanticCustomError("profile", "{problem}", {"problem": text, "at": at})


def _not_blank(text: str) -> str:
    if not text.strip():
        raise _problem("must not be empty")
    return text


def _infrastructure(pattern: str) -> str:
    if pattern.split(".", 1)[0] not in INFRASTRUCTURE:
        raise _problem(f"{pattern!r}: only infrastructure categories ({', '.join(INFRASTRUCTURE)}) can be offloaded")
    return pattern


def _not_nan(value):
    if isinstance(value, float) and math.isnan(value):
        raise _problem("must be a number or inf, got nan")
    return value


def _number(ge: float | None = None, gt: float | None = None, le: float | None = None, inf: bool = False):
    """A TOML number (int or float, never bool or text) in a range; ``inf``: positive infinity allowed."""
    if inf:
        return Annotated[float, Strict(), Field(ge=ge, gt=gt, le=le, allow_inf_nan=True), BeforeValidator(_not_nan)]
    return Annotated[float, Strict(), Field(ge=ge, gt=gt, le=le, allow_inf_nan=False)]


Text = Annotated[str, Strict(), AfterValidator(_not_blank)]
AnyText = Annotated[str, Strict()]


class _Table(BaseModel):
    """A TOML table: unknown keys are refused (a typo must not silently fall back to a default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data):
        if isinstance(data, dict):
            allowed = sorted(f.alias or n for n, f in cls.model_fields.items())
            unknown = sorted((k for k in data if k not in allowed), key=str)
            if unknown:
                raise _problem(f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")
        return data


class Param(_Table):
    """One sourced number (or, for ``mode``, word)."""

    value: float | str
    source: Text
    note: AnyText = ""

    def as_dict(self) -> dict:
        value = self.value
        if isinstance(value, float) and math.isinf(value):
            value = None  # JSON has no infinity; null means unbounded (documented in the contract)
        out = {"value": value, "source": self.source}
        if self.note:
            out["note"] = self.note
        return out


class _Fraction(Param):
    value: _number(ge=0, le=1)


class _NonNegative(Param):
    value: _number(ge=0)


class _Positive(Param):
    value: _number(gt=0)


class _PositiveOrInf(Param):
    value: _number(gt=0, inf=True)  # a fixed-function engine at line rate


class _Mode(Param):
    value: Literal[MODES]


class Mechanism(_Table):
    """One offload mechanism of a device (see dpuprof/data/dpu/README.md for each field)."""

    name: Text
    label: Text
    requires: Text
    applies_to: Annotated[tuple[Annotated[str, Strict(), AfterValidator(_infrastructure)], ...], Field(min_length=1)]
    share: Literal[SHARES]
    runs_on: Literal[RUNS_ON]
    resource: Literal[RESOURCES] | None = None
    n_from: Literal[N_FROM]
    mode: _Mode
    alpha: _Fraction
    A: _PositiveOrInf  # work on the Arm cores defaults to capacity.arm_speed (Profile._arm_speed)
    o0_ns: _NonNegative
    L_ns: _NonNegative
    Q_ns: _NonNegative
    o1_ns: _NonNegative
    chunk_bytes: _Positive | None = None
    host_bytes_per_cpu_s: _Positive | None = None  # also sizes inline-crypto demand (capacity.crypto_gbps)
    notes: AnyText = ""

    @model_validator(mode="after")
    def _consistent(self):
        if self.runs_on == "arm" and self.resource != "arm_cores":
            raise _problem('work that runs on the Arm cores must use resource "arm_cores"', ("resource",))
        if self.n_from == "cpu_chunks":
            for key in ("chunk_bytes", "host_bytes_per_cpu_s"):
                if getattr(self, key) is None:
                    raise _problem('missing (needed by n_from = "cpu_chunks")', (key,))
        return self

    def matches(self, subcategory: str) -> bool:
        return any(fnmatchcase(subcategory, pat) for pat in self.applies_to)

    def sources(self) -> list[str]:
        params = [self.mode, self.alpha, self.A, self.o0_ns, self.L_ns, self.Q_ns, self.o1_ns,
                  self.chunk_bytes, self.host_bytes_per_cpu_s]
        return list(dict.fromkeys(p.source for p in params if p is not None))


class _Capacity(_Table):
    """What the card can absorb; units in the names."""

    line_rate_gbps: _PositiveOrInf | None = None  # network line rate (flagged, never moved back to the host)
    crypto_gbps: _PositiveOrInf | None = None  # inline AES-GCM throughput
    arm_cores: _NonNegative | None = None  # general-purpose Arm cores
    arm_speed: _Positive | None = None  # one Arm core relative to one host core (the A of work run there)
    compression_engine_host_cores: _PositiveOrInf | None = None  # engine throughput in host-core equivalents


class _AllReduce(_Table):
    """Alpha-beta parameters of ``--nodes``. Without the intra-node (NVLink/shared memory) links,
    intra-node hops are priced like network hops (stated in the projection)."""

    rdma_latency_us: _NonNegative  # one-way small-message latency over RDMA
    tcp_latency_us: _NonNegative  # the same over kernel TCP
    tcp_flow_gbps: _Positive  # one TCP ring channel (one core)
    intra_node_gbps: _Positive | None = None  # per GPU, one direction
    intra_node_latency_us: _NonNegative | None = None  # one intra-node hop


def _present(table: BaseModel | None) -> dict | None:
    return None if table is None else {k: v for k, v in table if v is not None}


class Profile(_Table):
    """A validated DPU profile. ``capacity`` and ``allreduce`` read as dicts key -> Param."""

    schema_version: Literal[SCHEMA_VERSION]
    name: Text
    aliases: tuple[Text, ...] = ()
    description: Text
    capacity_table: _Capacity = Field(default_factory=_Capacity, alias="capacity")
    mechanisms: Annotated[tuple[Mechanism, ...], Field(min_length=1, alias="mechanism")]
    allreduce_table: _AllReduce | None = Field(None, alias="allreduce")
    references: tuple[AnyText, ...] = ()
    _file: str = PrivateAttr("<profile>")

    @model_validator(mode="before")
    @classmethod
    def _arm_speed(cls, data):
        """A mechanism that runs on the Arm cores and gives no A takes capacity.arm_speed."""
        cap = data.get("capacity") if isinstance(data, dict) else None
        speed = cap.get("arm_speed") if isinstance(cap, dict) else None
        if speed is None or not isinstance(data.get("mechanism"), list):
            return data
        return data | {"mechanism": [m | {"A": speed} if isinstance(m, dict) and m.get("runs_on") == "arm"
                                     and "A" not in m else m for m in data["mechanism"]]}

    @model_validator(mode="after")
    def _linked(self, info: ValidationInfo):
        self._file = (info.context or {}).get("file", self._file)  # where it was read, for the projection
        for i, m in enumerate(self.mechanisms):
            if m.resource is not None and m.resource not in self.capacity:
                raise _problem(f"{m.resource!r} needs capacity.{m.resource} in the profile",
                               ("mechanism", i, "resource"))
        names = [m.name for m in self.mechanisms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise _problem(f"duplicate mechanism name {dup[0]!r}", ("mechanism",))
        if self.allreduce_table is not None and "line_rate_gbps" not in self.capacity:
            raise _problem("missing (needed by the allreduce section)", ("capacity", "line_rate_gbps"))
        return self

    @property
    def file(self) -> str:
        return self._file

    @property
    def capacity(self) -> dict[str, Param]:
        return _present(self.capacity_table)

    @property
    def allreduce(self) -> dict[str, Param] | None:
        return _present(self.allreduce_table)

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
        value's source says it was set on the command line. Unknown names raise ValueError. The
        values are not range-checked here (dpuprof.project.sweep checks what the user typed).
        """
        names = None if mechanisms is None else set(mechanisms)
        if names is not None and names - {m.name for m in self.mechanisms}:
            raise ValueError(f"unknown mechanism(s) {sorted(names - {m.name for m in self.mechanisms})}")
        mechs = []
        for m in self.mechanisms:
            if names is None or m.name in names:
                m = m.model_copy(update={k: Param(value=v, source="set on the command line (what-if)")
                                         for k, v in params.items()})
            mechs.append(m)
        return self.model_copy(update={"mechanisms": tuple(mechs)})

    def mechanism(self, name: str) -> Mechanism | None:
        return next((m for m in self.mechanisms if m.name == name), None)


# ------------------------------------------------------------------------------- error wording

_TABLE_HINT = {"Mechanism": " ([[mechanism]])"}
_PARAM_HINT = ' {value = ..., source = "..."}'
_MISSING_HINT = {"source": " (every parameter needs one; say 'assumption: ...' if it is one)",
                 "A": ' (only a mechanism with runs_on = "arm" may take it from capacity.arm_speed)'}
_LIST_HINT = {"mechanism": "a non-empty array of tables ([[mechanism]])",
              "applies_to": "a non-empty list of subcategory patterns",
              "aliases": "a list of names", "references": "a list of text"}
_BOUNDS = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le")}


def _where(loc: tuple, data) -> str:
    """``('mechanism', 0, 'alpha', 'value')`` -> ``mechanism[0] (rdma).alpha.value``."""
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            if loc[:i] == ("mechanism",) and i + 1 < len(loc) and loc[i + 1] != "name":
                try:
                    name = data["mechanism"][part]["name"]
                except (KeyError, IndexError, TypeError):
                    name = None
                if isinstance(name, str) and name.strip():
                    out += f" ({name})"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _problem_of(err: dict) -> tuple[tuple, str]:
    """Path and wording of one pydantic error, in the words of dpuprof/data/dpu/README.md."""
    kind, loc, ctx, got = err["type"], tuple(err["loc"]), err.get("ctx") or {}, err.get("input")
    if kind == "profile":
        return loc + tuple(ctx["at"]), ctx["problem"]
    if loc == ("schema_version",):
        return loc, "missing" if kind == "missing" else f"must be {SCHEMA_VERSION}, got {got!r}"
    if kind == "missing":
        if loc[-1] in ("value", "source"):
            return loc[:-1], f"missing {loc[-1]!r}{_MISSING_HINT.get(loc[-1], '')}"
        return loc, "missing" + _MISSING_HINT.get(loc[-1], "")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        name = str(ctx.get("class_name"))
        hint = _PARAM_HINT if issubclass(globals().get(name, object), Param) else _TABLE_HINT.get(name, "")
        return loc, "must be a table" + hint
    if kind in ("tuple_type", "list_type", "too_short"):
        return loc, f"must be {_LIST_HINT.get(loc[-1], 'a list')}" + (", got []" if kind == "too_short" else "")
    if kind == "float_type":
        return loc, f"must be a number, got {got!r}"
    if kind == "string_type":
        return loc, f"must be text, got {type(got).__name__}"
    if kind == "finite_number":
        return loc, f"must be a finite number, got {got}"
    if kind in _BOUNDS:
        op, key = _BOUNDS[kind]
        return loc, f"must be {op} {ctx[key]:g}, got {got:g}"
    if kind == "literal_error":
        expected = str(ctx.get("expected"))
        return loc, f"must be {'one of ' if ' or ' in expected else ''}{expected}, got {got!r}"
    return loc, err["msg"][:1].lower() + err["msg"][1:]


def one_line(err: ValidationError, data) -> str:
    """``where: problem`` for the first error of ``err``, raised validating ``data``."""
    loc, problem = _problem_of(err.errors(include_url=False)[0])
    return f"{_where(loc, data)}: {problem}"
