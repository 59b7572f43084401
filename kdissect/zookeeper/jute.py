"""One jute reader for every record: it interprets the layouts in records_table.RECORDS.

Jute's binary archive is big-endian: int (4 bytes), long (8), boolean (1), buffer and ustring
(int32 length, -1 = null, then the bytes), vector<T> (int32 count, -1 = null, then the elements),
and nested records as their fields in order. Each record compiles once into a plan: a tuple of
(field name, reader, annotator); the annotator adds display names (enums, flags, dates, hex
zxids) and redacts secrets.

A record or vector that breaks part-way (cut short, a length that overruns) raises with the
fields read before the break as the DecodeError's `partial` (see dissect/partial.py).
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from dataclasses import dataclass, field

from kdissect.dissect.base import Budget
from kdissect.dissect.partial import keep_partial
from kdissect.errors import BadLength, BadValue, DecodeError
from kdissect.model import ARRAY, BYTES, STRUCT, Diagnostic, Field, struct
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import annotate
from kdissect.zookeeper.diagnostics import DIAGNOSTICS
from kdissect.zookeeper.records_table import RECORDS


@dataclass(frozen=True, slots=True)
class Ctx:
    """What decoding needs besides the bytes, and what one message may still decode: vector
    elements past its budget are read but not kept (a diagnostic in `diags` says so)."""

    show_secrets: bool = False
    budget: Budget = field(default_factory=Budget)
    diags: list[Diagnostic] = field(default_factory=list)

    def limited(self, name: str, n: int | None, shown: int, offset: int) -> None:
        """Say once per message that a list (of n elements, None: not known ahead) was cut at
        the budget."""
        if self.budget.first("zookeeper.vector_limit"):
            count = f"{n} elements" if n is not None else "more elements"
            self.diags.append(DIAGNOSTICS(
                "vector_limit",
                f"{name}: {count}, past the {self.budget.elements_limit} elements a message may show: "
                f"the first {shown} are shown", offset))


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


def _renamed(e: DecodeError, new: DecodeError) -> DecodeError:
    new.partial = e.partial
    return new


def _vector(elem: str) -> Reader:
    elem_reader = reader_for(elem)
    elem_min = min_size(elem)
    elem_name = elem.lower() if elem in RECORDS else "item"

    def read(r: WireReader, name: str, ctx: Ctx) -> Field:
        off = r.pos
        n = r.int32()
        if n == -1:
            return Field(name, None, off, 4, [], ARRAY, display="null")
        if n < 0:
            raise BadLength(f"{name}: count {n}", off)
        items: list[Field] = []
        item_name = elem_name if elem in RECORDS else name
        room = r.remaining
        # Past the message's budget, elements are read (to find what follows) but not kept.
        keep = ctx.budget.elements(min(n, room // max(elem_min, 1)))
        try:
            # Every element takes at least elem_min > 0 bytes: a count that overruns (a
            # cut-short vector) ends at the first element that is not there, with the elements
            # before it kept, and nothing is allocated per count.
            for _ in range(keep):
                items.append(elem_reader(r, item_name, ctx))
            for _ in range(n - keep):
                elem_reader(r, item_name, ctx)
        except DecodeError as e:
            if n * elem_min > room:
                e = _renamed(e, BadLength(f"{name}: count {n} exceeds the {room} bytes that remain", e.offset))
            raise keep_partial(e, name, off, items, ARRAY) from None
        if keep < n:
            ctx.limited(name, n, keep, off)
            return Field(name, None, off, r.pos - off, items, ARRAY, label=f"{name} (first {keep} of {n})")
        return Field(name, None, off, r.pos - off, items, ARRAY)

    return read


def _nested(record: str) -> Reader:
    def read(r: WireReader, name: str, ctx: Ctx) -> Field:
        off = r.pos
        children = read_fields(r, record, ctx, name=name)
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


def read_fields(r: WireReader, record: str, ctx: Ctx, optional_tail: bool = False,
                name: str | None = None) -> list[Field]:
    """The fields of `record`, in order. optional_tail: the last field may be absent (the
    readOnly byte of ConnectRequest/ConnectResponse, which peers before 3.4 omit). A break
    raises with the fields read so far as a partial struct named `name` (default: the record)."""
    steps = plan(record)
    out: list[Field] = []
    last = len(steps) - 1
    start = r.pos
    try:
        for i, (fname, read, ann) in enumerate(steps):
            if optional_tail and i == last and r.at_end():
                break
            f = read(r, fname, ctx)
            if ann is not None:
                ann(f, ctx.show_secrets)
            out.append(f)
    except DecodeError as e:
        raise keep_partial(e, name or record, start, out, STRUCT) from None
    return out


def read_record(r: WireReader, record: str, name: str, ctx: Ctx) -> Field:
    """The record as one struct Field."""
    off = r.pos
    return struct(name, read_fields(r, record, ctx, name=name), off, r.pos - off)
