"""One jute reader for every record: it interprets the layouts in records_table.RECORDS.

Jute's binary archive is big-endian: int (4 bytes), long (8), boolean (1), buffer and ustring
(int32 length, -1 = null, then the bytes), vector<T> (int32 count, -1 = null, then the elements),
and nested records as their fields in order. Each record compiles once into a plan: a tuple of
(field name, reader, annotator); the annotator adds display names (enums, flags, dates, hex
zxids) and redacts secrets.
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from dataclasses import dataclass

from kdissect.errors import BadLength, BadValue
from kdissect.model import ARRAY, BYTES, Field, struct
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import annotate
from kdissect.zookeeper.records_table import RECORDS


@dataclass(frozen=True, slots=True)
class Ctx:
    """What decoding needs besides the bytes."""

    show_secrets: bool = False


Reader = Callable[[WireReader, str, Ctx], Field]
Plan = tuple[tuple[str, Reader, "annotate.Annotator | None"], ...]


def _int(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    return Field(name, r.int32(), off, 4)


def _long(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    return Field(name, r.int64(), off, 8)


def _byte(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    return Field(name, r.int8(), off, 1)


def _boolean(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    b = r.uint8()
    if b > 1:
        raise BadValue(f"{name}: boolean byte {b} is neither 0 nor 1", off)
    return Field(name, b == 1, off, 1)


def _float(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    raw = r.raw(4)
    return Field(name, float(_struct.unpack(">f", raw)[0]), off, 4)


def _double(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    return Field(name, r.float64(), off, 8)


def _length(r: WireReader, what: str) -> int:
    n = r.int32()
    if n < -1:
        raise BadLength(f"{what}: length {n}", r.pos - 4)
    return n


def _buffer(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    n = _length(r, name)
    value = None if n == -1 else r.raw(n)
    return Field(name, value, off, r.pos - off, hint=BYTES)


def _ustring(r: WireReader, name: str, ctx: Ctx) -> Field:
    off = r.pos
    n = _length(r, name)
    value = None if n == -1 else r.text(n)
    return Field(name, value, off, r.pos - off)


PRIMITIVES: dict[str, tuple[Reader, int]] = {
    "int": (_int, 4),
    "long": (_long, 8),
    "boolean": (_boolean, 1),
    "buffer": (_buffer, 4),
    "ustring": (_ustring, 4),
    "byte": (_byte, 1),
    "float": (_float, 4),
    "double": (_double, 8),
}

_PLANS: dict[str, Plan] = {}
_MIN_SIZE: dict[str, int] = {}


def min_size(jtype: str) -> int:
    """The fewest bytes a value of this jute type takes (bounds element counts)."""
    if jtype in PRIMITIVES:
        return PRIMITIVES[jtype][1]
    if jtype.startswith("vector<"):
        return 4
    if jtype not in _MIN_SIZE:
        _MIN_SIZE[jtype] = sum(min_size(t) for _, t in RECORDS[jtype])
    return _MIN_SIZE[jtype]


def _vector(elem: str) -> Reader:
    elem_reader = reader_for(elem)
    elem_min = min_size(elem)
    elem_name = elem.lower() if elem in RECORDS else "item"

    def read(r: WireReader, name: str, ctx: Ctx) -> Field:
        off = r.pos
        n = r.int32()
        if n == -1:
            return Field(name, None, off, 4, [], ARRAY, display="null")
        r.count(n, elem_min)
        items = [elem_reader(r, elem_name if elem in RECORDS else name, ctx) for _ in range(n)]
        return Field(name, None, off, r.pos - off, items, ARRAY)

    return read


def _nested(record: str) -> Reader:
    def read(r: WireReader, name: str, ctx: Ctx) -> Field:
        off = r.pos
        children = read_fields(r, record, ctx)
        return struct(name, children, off, r.pos - off)

    return read


def reader_for(jtype: str) -> Reader:
    if jtype in PRIMITIVES:
        return PRIMITIVES[jtype][0]
    if jtype.startswith("vector<") and jtype.endswith(">"):
        return _vector(jtype[7:-1])
    if jtype in RECORDS:
        return _nested(jtype)
    raise KeyError(f"unknown jute type {jtype}")


def plan(record: str) -> Plan:
    """The compiled plan of a record (cached)."""
    p = _PLANS.get(record)
    if p is None:
        p = tuple((name, reader_for(t), annotate.for_field(record, name)) for name, t in RECORDS[record])
        _PLANS[record] = p
    return p


def read_fields(r: WireReader, record: str, ctx: Ctx, optional_tail: bool = False) -> list[Field]:
    """The fields of `record`, in order. optional_tail: the last field may be absent (the
    readOnly byte of ConnectRequest/ConnectResponse, which peers before 3.4 omit)."""
    steps = plan(record)
    out: list[Field] = []
    last = len(steps) - 1
    for i, (name, read, ann) in enumerate(steps):
        if optional_tail and i == last and r.at_end():
            break
        f = read(r, name, ctx)
        if ann is not None:
            ann(f, ctx.show_secrets)
        out.append(f)
    return out


def read_record(r: WireReader, record: str, name: str, ctx: Ctx) -> Field:
    """The record as one struct Field."""
    off = r.pos
    return struct(name, read_fields(r, record, ctx), off, r.pos - off)
