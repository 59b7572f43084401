"""A small test encoder driven by the generated tables: default/zero values for every field of a
message version, one element per array, every tagged field present once."""

from __future__ import annotations

import struct
from typing import Any

from kdissect.kafka.schema_messages import FieldRow

FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "int64": ">q",
         "float64": ">d"}


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length(n: int, flexible: bool, wide: bool) -> bytes:
    if flexible:
        return uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def _default(typ: str, default: str | None) -> Any:
    if default is None or default == "null":
        return 0 if typ in FIXED else ""
    if typ in FIXED:
        return int(default, 16) if default.startswith("0x") else (float(default) if typ == "float64" else int(default))
    if typ == "bool":
        return default == "true"
    return default


def scalar(typ: str, default: str | None, flexible: bool) -> bytes:
    if typ in FIXED:
        return struct.pack(FIXED[typ], _default(typ, default))
    if typ == "bool":
        return b"\x01" if _default(typ, default) is True else b"\x00"
    if typ == "uuid":
        return bytes(16)
    if typ == "string":
        raw = str(_default(typ, default) or "x").encode()
        return _length(len(raw), flexible, False) + raw
    if typ in ("bytes", "records"):
        return _length(0, flexible, True)
    raise KeyError(typ)


def field(f: FieldRow, v: int, flexible: bool) -> bytes:
    typ, children = f.type, f.children or ()
    if typ == "struct":
        body = encode(children, v, flexible)
        return (b"\x01" + body) if f.nullable_min <= v <= f.nullable_max else body
    if typ == "[]struct":
        return _length(1, flexible, True) + encode(children, v, flexible)
    if typ.startswith("[]"):
        return _length(1, flexible, True) + scalar(typ[2:], None, flexible)
    return scalar(typ, f.default, flexible)


def encode(fields: tuple[FieldRow, ...], v: int, flexible: bool) -> bytes:
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not f.min_version <= v <= f.max_version:
            continue
        data = field(f, v, flexible)
        if flexible and f.tag >= 0 and f.tagged_min <= v <= f.tagged_max:
            tagged.append((f.tag, data))
        else:
            out += data
    if flexible:
        out += uvarint(len(tagged))
        for tag, data in sorted(tagged):
            out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)
