"""pprof's ``profile.proto`` as protobuf message classes, built at run time from the vendored file.

Why at run time: a generated ``profile_pb2.py`` is tied to the protoc that made it (newer generated
code refuses older protobuf runtimes, and the reverse), and generating it at build time needs
protoc or grpcio-tools in every build. ``profile.proto`` is plain proto3 -- top-level messages of
scalar, string and message fields, some repeated -- so this module reads it into a
``FileDescriptorProto`` and lets the installed ``protobuf`` runtime build the classes: the vendored
``.proto`` is the single source of the schema, and nothing is generated or compiled.
(tests/test_report_pprof.py checks the result against protoc's own compilation when grpcio-tools is
installed.)
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO = "profile.proto"
PACKAGE = "perftools.profiles"

_SCALARS = {"int64": "TYPE_INT64", "uint64": "TYPE_UINT64", "int32": "TYPE_INT32", "uint32": "TYPE_UINT32",
            "bool": "TYPE_BOOL", "string": "TYPE_STRING", "bytes": "TYPE_BYTES", "double": "TYPE_DOUBLE",
            "float": "TYPE_FLOAT"}
_FIELD = re.compile(r"^(repeated\s+)?([A-Za-z_][\w.]*)\s+([a-z_]\w*)\s*=\s*(\d+)\s*;$")


def _statements(text: str) -> list[str]:
    """The .proto's statements without comments: 'syntax = "proto3";', 'message X {', '}', ..."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    tokens = re.findall(r"[^;{}]+[;{]|}", text)
    return [" ".join(t.split()) for t in tokens if t.strip()]


def file_descriptor(text: str):
    """``profile.proto`` text -> ``FileDescriptorProto``. ValueError on anything this reader does
    not understand (nested messages, enums, oneofs, maps), rather than a wrong schema."""
    fdp = descriptor_pb2.FileDescriptorProto(name=PROTO)
    msg = None
    F = descriptor_pb2.FieldDescriptorProto
    for st in _statements(text):
        if st.startswith("syntax"):
            fdp.syntax = re.search(r'"(\w+)"', st).group(1)
        elif st.startswith("package "):
            fdp.package = st[len("package "):-1].strip()
        elif st.startswith("option "):
            continue  # java_package and friends: nothing for Python
        elif st.startswith("message ") and st.endswith("{") and msg is None:
            msg = fdp.message_type.add(name=st[len("message "):-1].strip())
        elif st == "}" and msg is not None:
            msg = None
        elif msg is not None and (m := _FIELD.match(st)):
            repeated, typ, name, number = m.groups()
            field = msg.field.add(name=name, number=int(number), json_name=_camel(name),
                                  label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if typ in _SCALARS:
                field.type = getattr(F, _SCALARS[typ])
            else:
                field.type = F.TYPE_MESSAGE
                field.type_name = f".{fdp.package}.{typ}"
        else:
            raise ValueError(f"{PROTO}: cannot read statement {st!r}")
    if msg is not None or fdp.syntax != "proto3":
        raise ValueError(f"{PROTO}: unterminated message or not proto3")
    return fdp


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


@lru_cache(maxsize=1)
def messages() -> dict:
    """{message name: class} for every message of the vendored profile.proto (Profile, Sample, ...)."""
    text = resources.files("dpuprof.render.formats").joinpath(PROTO).read_text(encoding="utf-8")
    fdp = file_descriptor(text)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fdp.package}.{m.name}"))
            for m in fdp.message_type}


def profile_class():
    """The ``perftools.profiles.Profile`` message class."""
    return messages()["Profile"]
