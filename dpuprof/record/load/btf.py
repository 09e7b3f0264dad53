"""A small reader of the kernel's BTF (/sys/kernel/btf/vmlinux): struct member offsets at run time.

The probes must not read kernel structs by the offsets of installed headers: on this kind of host
the headers are a distribution's fallback (e.g. 6.1) while the running kernel is newer, and the
layouts differ. BTF describes the running kernel's own types, so member offsets come from there and
are passed to a probe as -D constants (see dpuprof/record/load/probes.py).

Format: include/uapi/linux/btf.h and https://docs.kernel.org/bpf/btf.html (a header, a type
section of ``struct btf_type`` records each followed by kind-specific data, and a string section).
Only what offsets need is decoded; no libbpf, no bcc.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

VMLINUX = Path("/sys/kernel/btf/vmlinux")
MAGIC = 0xEB9F

# BTF_KIND_* (include/uapi/linux/btf.h)
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT = range(1, 12)
FUNC, FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(12, 20)
_MODIFIERS = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)
# Bytes of kind-specific data after the 12-byte btf_type: fixed, and per vlen item.
_EXTRA_FIXED = {INT: 4, ARRAY: 12, VAR: 4, DECL_TAG: 4}
_EXTRA_PER_ITEM = {STRUCT: 12, UNION: 12, ENUM: 8, FUNC_PROTO: 8, DATASEC: 12, ENUM64: 12}
_NO_EXTRA = frozenset((PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG))


class BtfError(Exception):
    """BTF is missing, malformed, or lacks the asked-for type or member."""


@dataclass(frozen=True)
class Type:
    kind: int
    name_off: int
    size_or_type: int  # size in bytes for INT/STRUCT/UNION/ENUM/FLOAT, else a referenced type id
    kind_flag: bool
    vlen: int
    extra: int  # where the kind-specific data starts in the type section


@dataclass(frozen=True)
class Member:
    """A struct member found by ``Btf.member``: byte offset from the outer struct, size in bytes."""
    offset: int
    size: int


class Btf:
    """The types of one BTF blob. ``Btf.load()`` reads the running kernel's."""

    def __init__(self, data: bytes):
        if len(data) < 24:
            raise BtfError("BTF blob too short")
        magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
        if magic != MAGIC:
            raise BtfError(f"not BTF (magic {magic:#x})")
        type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", data, 8)
        self._strings = data[hdr_len + str_off: hdr_len + str_off + str_len]
        self._starts: list[int] = [-1]  # where type id i starts in the type section; 0 is void
        self._by_name: dict[tuple[int, int], int] = {}  # (kind, name offset) -> first type id
        self._enums: list[int] = []  # ids of the ENUM and ENUM64 types, for ``enumerator``
        self._datasecs: list[int] = []  # ids of the DATASEC types, for ``percpu_var``
        self._parse(data[hdr_len + type_off: hdr_len + type_off + type_len])

    @classmethod
    def load(cls, path: Path | str = VMLINUX) -> "Btf":
        """The BTF at ``path``; raises BtfError when it cannot be read."""
        try:
            return cls(Path(path).read_bytes())
        except OSError as err:
            raise BtfError(f"cannot read {path}: {err.strerror}") from None

    def _str(self, off: int) -> str:
        end = self._strings.index(b"\0", off)
        return self._strings[off:end].decode("utf-8", "replace")

    def _parse(self, sec: bytes) -> None:
        # Only where each type starts is found here (126k types in a 6.18 vmlinux, so this loop is
        # kept tight: it runs before the probes compile); types, members and names are decoded when
        # a lookup needs them.
        self._sec = sec
        starts, by_name, enums, datasecs = self._starts, self._by_name, self._enums, self._datasecs
        fixed, per_item, plain = _EXTRA_FIXED, _EXTRA_PER_ITEM, _NO_EXTRA
        unpack, pos, end = struct.Struct("<II").unpack_from, 0, len(sec) - 12
        while pos <= end:
            name_off, info = unpack(sec, pos)
            kind = (info >> 24) & 0x1F
            starts.append(pos)
            if (kind == STRUCT or kind == UNION) and name_off:
                by_name.setdefault((kind, name_off), len(starts) - 1)
            if kind in per_item:
                if kind == ENUM or kind == ENUM64:
                    enums.append(len(starts) - 1)
                elif kind == DATASEC:
                    datasecs.append(len(starts) - 1)
                pos += 12 + per_item[kind] * (info & 0xFFFF)
            elif kind in fixed:
                pos += 12 + fixed[kind]
            elif kind in plain:
                pos += 12
            else:
                raise BtfError(f"unknown BTF kind {kind} at type {len(starts) - 1}")

    def type(self, tid: int) -> Type:
        """Type ``tid`` (>= 1) decoded."""
        pos = self._starts[tid]
        name_off, info, size_or_type = struct.unpack_from("<III", self._sec, pos)
        return Type((info >> 24) & 0x1F, name_off, size_or_type, bool(info >> 31), info & 0xFFFF, pos + 12)

    def name(self, tid: int) -> str:
        """The name of type ``tid`` ("" when anonymous)."""
        off = self.type(tid).name_off
        return self._str(off) if off else ""

    def members(self, tid: int) -> list[tuple[str, int, int]]:
        """STRUCT/UNION ``tid``: [(name, type id, bit offset)] in declaration order."""
        t = self.type(tid)
        raw = struct.iter_unpack("<III", self._sec[t.extra: t.extra + 12 * t.vlen])
        return [(self._str(n) if n else "", mt, (o & 0xFFFFFF) if t.kind_flag else o) for n, mt, o in raw]

    def find(self, name: str, kind: int = STRUCT) -> int:
        """Type id of the first struct (or union, ``kind=UNION``) called ``name``; raises BtfError
        if none."""
        off = self._strings.find(b"\0" + name.encode() + b"\0")
        tid = None
        while off >= 0 and tid is None:  # the same text may be stored more than once
            tid = self._by_name.get((kind, off + 1))
            off = self._strings.find(b"\0" + name.encode() + b"\0", off + 1)
        if tid is None:  # a name stored without a NUL before it (a shared suffix): scan
            tid = next((i for (k, _), i in self._by_name.items() if k == kind and self.name(i) == name), None)
        if tid is None:
            raise BtfError(f"no {'struct' if kind == STRUCT else kind} {name!r} in BTF")
        return tid

    def _name_offsets(self, name: str) -> set[int]:
        """Every offset in the string section where ``name`` is stored as a whole string."""
        needle, offs = name.encode() + b"\0", set()
        if self._strings.startswith(needle):
            offs.add(0)
        off = self._strings.find(b"\0" + needle)
        while off >= 0:
            offs.add(off + 1)
            off = self._strings.find(b"\0" + needle, off + 1)
        return offs

    def enumerator(self, name: str) -> int:
        """The value of enumerator ``name`` (``REQ_OP_DRV_IN``) in the first enum that has it;
        raises BtfError if none."""
        offs = self._name_offsets(name)
        for tid in self._enums if offs else ():
            t = self.type(tid)
            if t.kind == ENUM:
                fmt, width = ("<Ii" if t.kind_flag else "<II"), 8  # kind_flag: signed values
            else:
                fmt, width = "<III", 12  # ENUM64: name, low 32 bits, high 32 bits
            for item in struct.iter_unpack(fmt, self._sec[t.extra: t.extra + width * t.vlen]):
                if item[0] in offs:
                    value = item[1] if width == 8 else item[1] | (item[2] << 32)
                    if width == 12 and t.kind_flag and value >= 1 << 63:
                        value -= 1 << 64
                    return value
        raise BtfError(f"no enumerator {name!r} in BTF")

    def percpu_var(self, name: str) -> Member:
        """Byte offset (in the per-CPU section ``.data..percpu``) and size of per-CPU variable
        ``name``; raises BtfError if none. Two variables' offsets differ by what their addresses
        on one CPU differ by."""
        for tid in self._datasecs:
            if self.name(tid) != ".data..percpu":
                continue
            t = self.type(tid)
            for var, offset, size in struct.iter_unpack("<III", self._sec[t.extra: t.extra + 12 * t.vlen]):
                if self.name(var) == name:
                    return Member(offset, size)
        raise BtfError(f"no per-CPU variable {name!r} in BTF")

    def resolve(self, tid: int) -> int:
        """``tid`` with typedefs and qualifiers stripped."""
        while tid and self.type(tid).kind in _MODIFIERS:
            tid = self.type(tid).size_or_type
        return tid

    def sizeof(self, tid: int) -> int:
        """Size in bytes of type ``tid``."""
        tid = self.resolve(tid)
        t = self.type(tid)
        if t.kind in (INT, STRUCT, UNION, ENUM, ENUM64, FLOAT):
            return t.size_or_type
        if t.kind == PTR:
            return 8
        if t.kind == ARRAY:
            elem, _index, nelems = struct.unpack_from("<III", self._sec, t.extra)
            return self.sizeof(elem) * nelems
        raise BtfError(f"type {tid} (kind {t.kind}) has no size")

    def _search(self, tid: int, name: str) -> tuple[int, int] | None:
        """(bit offset, type id) of member ``name`` of struct/union ``tid``, looking into anonymous
        struct/union members (``union { struct net_device *dev; ... }``) the way C does."""
        tid = self.resolve(tid)
        if self.type(tid).kind not in (STRUCT, UNION):
            return None
        for mname, mtype, bit_off in self.members(tid):
            if mname == name:
                return bit_off, mtype
            if not mname:
                inner = self._search(mtype, name)
                if inner is not None:
                    return bit_off + inner[0], inner[1]
        return None

    def member(self, struct_name: str, path: str) -> Member:
        """Byte offset and size of ``path`` (``"dev"``, or dotted ``"a.b"``) in struct
        ``struct_name``; raises BtfError when missing or a bitfield."""
        tid, total = self.find(struct_name), 0
        for part in path.split("."):
            hit = self._search(tid, part)
            if hit is None:
                raise BtfError(f"struct {struct_name} has no member {path!r} in BTF")
            bit_off, tid = hit
            if bit_off % 8:
                raise BtfError(f"{struct_name}.{path} is a bitfield")
            total += bit_off // 8
        return Member(total, self.sizeof(tid))
