"""A table-driven protobuf wire walker: decodes any message of schema_table.MESSAGES into Fields.

One loop reads tags and wire types (varint, fixed64, length-delimited, fixed32) and converts
each value by the field's table entry: signed/unsigned varints, zig-zag sint, fixed-width
little-endian numbers, strings, bytes, enums (with their symbol in `display`), sub-messages
(recursively, depth-bounded) and packed repeated numbers. Unknown field numbers, and known
ones with an unexpected wire type, are kept as raw fields named `field_<n>` with a note.
Repeated fields are gathered into one array Field at the position of their first element.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, NamedTuple, NoReturn

from kdissect.dissect.base import Budget
from kdissect.dissect.partial import keep_partial
from kdissect.errors import BadValue, DecodeError, Truncated
from kdissect.model import (
    ARRAY,
    BYTES,
    ENUM,
    RAW,
    SECRET,
    STRUCT,
    TIME_MS,
    Diagnostic,
    Field,
    duration_hint,
)
from kdissect.pulsar.diagnostics import DIAGNOSTICS
from kdissect.pulsar.schema_table import ENUMS, MESSAGES
from kdissect.text import plural
from kdissect.wire.varint import uvarint_at, zigzag

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
MAX_DEPTH = 24
MAX_UNKNOWN_NOTED = 100  # unknown fields (of a message type, by number) noted one by one, per message
MAX_NOTED = 100  # notes of one kind (a malformed or incomplete nested message) one by one, per message

# Scalar type -> wire type it is written with.
WIRE_OF: dict[str, int] = {
    "int32": VARINT, "int64": VARINT, "uint32": VARINT, "uint64": VARINT, "sint32": VARINT,
    "sint64": VARINT, "bool": VARINT, "fixed64": FIXED64, "sfixed64": FIXED64, "double": FIXED64,
    "fixed32": FIXED32, "sfixed32": FIXED32, "float": FIXED32, "string": LEN, "bytes": LEN,
}
_FIXED = {
    "fixed64": struct.Struct("<Q"), "sfixed64": struct.Struct("<q"), "double": struct.Struct("<d"),
    "fixed32": struct.Struct("<I"), "sfixed32": struct.Struct("<i"), "float": struct.Struct("<f"),
}


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


_VARINT_CONV: dict[str, Callable[[int], Any]] = {
    "int32": lambda v: _signed(v, 32),
    "int64": lambda v: _signed(v, 64),
    "uint32": lambda v: v & 0xFFFFFFFF,
    "uint64": lambda v: v & 0xFFFFFFFFFFFFFFFF,
    "sint32": lambda v: _signed(zigzag(v & 0xFFFFFFFF), 32),
    "sint64": lambda v: zigzag(v & 0xFFFFFFFFFFFFFFFF),
    "bool": lambda v: v != 0,
}

# Fields holding milliseconds since the epoch (by snake_case name, in any message).
TIME_FIELDS = frozenset({
    "publish_time", "event_time", "deliver_at_time", "broker_timestamp", "message_publish_time",
    "created_at_ms", "sealed_at_ms",
})


@dataclass
class WalkContext:
    """Per-decode settings and the diagnostics the walk produced."""

    redact: frozenset[tuple[str, str]] = frozenset()  # (message, field) pairs to hide
    diags: list[Diagnostic] = field(default_factory=list)
    # The message's allowance: every field decoded is one element; decompressed bytes, entries.
    budget: Budget = field(default_factory=Budget)
    # Where the captured bytes of a frame cut short end (else -1): a length-delimited value that
    # runs past it is truncated rather than malformed, and a sub-message it cuts is decoded up
    # to the cut; the error carries the fields read (DecodeError.partial).
    cut: int = -1

    # Unknown fields noted (see unknown_field): (message, number, wire type) -> [its note's
    # index in diags, how many times it came, whether the number is known]; None: those past
    # MAX_UNKNOWN_NOTED.
    unknown: dict[tuple[str, int, int] | None, list[int]] = field(default_factory=dict)
    # Notes by name: name -> [how many came, the index in diags of the one that stands for those
    # past MAX_NOTED (-1 until then)], and the text of the last of them (see settle).
    noted: dict[str, list[int]] = field(default_factory=dict)
    last_noted: dict[str, str] = field(default_factory=dict)

    def note(self, name: str, text: str, offset: int) -> None:
        """The Pulsar diagnostic `name` (see pulsar/diagnostics.py): MAX_NOTED of a name one by
        one, then one note for the others, its text set by `settle` (a repeated field of empty
        or broken sub-messages took a note of about 150 bytes for every 2 or 3 bytes)."""
        seen = self.noted.get(name)
        if seen is None:
            seen = self.noted[name] = [0, -1]
        seen[0] += 1
        if seen[0] <= MAX_NOTED:
            self.diags.append(DIAGNOSTICS(name, text, offset))
            return
        if seen[1] < 0:
            seen[1] = len(self.diags)
            self.diags.append(DIAGNOSTICS(name, "", offset))
        self.last_noted[name] = text

    def settle(self) -> None:
        """Give the notes that stand for those past MAX_NOTED, and those of unknown fields, their
        text (once the walk is done: rewriting one for each note cost more than the note)."""
        for name, (count, at) in self.noted.items():
            if at >= 0:
                text = f"{count - MAX_NOTED} more of this kind, the last: {self.last_noted[name]}"
                self.diags[at] = replace(self.diags[at], message=text)
        for key, (at, times, known) in self.unknown.items():
            if key is None:
                text = f"{plural(times, 'more unknown field')} (of other numbers): kept raw"
            else:
                message, number, wire = key
                why = "with an unexpected wire type" if known else "unknown to protocol version 21"
                text = f"{message} field {number} (wire type {wire}) {why}: kept raw"
                if times > 1:
                    text += f" ({times} times)"
            self.diags[at] = replace(self.diags[at], message=text)

    def unknown_field(self, message: str, number: int, wire: int, known: bool, offset: int) -> None:
        """Note an unknown field (or one with an unexpected wire type): once per field of a
        message type, with how many times it came, for MAX_UNKNOWN_NOTED fields at most; the
        others in one note. `settle` writes their text."""
        key: tuple[str, int, int] | None = (message, number, wire)
        if key not in self.unknown and len(self.unknown) >= MAX_UNKNOWN_NOTED:
            key = None
        seen = self.unknown.get(key)
        if seen is None:
            seen = self.unknown[key] = [len(self.diags), 0, known]
            self.diags.append(DIAGNOSTICS("unknown_field", "", offset))
        seen[1] += 1

    def out_of_fields(self, offset: int) -> bool:
        """Whether the message may decode no more fields (noted once); else one is counted."""
        b = self.budget
        if b.elements_left > 0:
            b.elements_left -= 1
            return False
        if b.first("pulsar.field_limit"):
            self.note("field_limit", f"more than {b.elements_limit} fields in the message: "
                      "the rest are not decoded", offset)
        return True


class Plan(NamedTuple):
    """One field of a message, compiled from its table entry for the walker's inner loop."""

    name: str
    kind: str  # scalar | enum | message
    type: str
    repeated: bool
    wire: int  # the wire type it is written with
    packable: bool  # repeated numbers may also arrive packed (length-delimited)
    required: bool
    convert: Callable[[int], Any]  # a varint scalar's value from the varint read
    hint: str | None  # a varint scalar's hint: a time (TIME_FIELDS), a duration, or None


@cache
def plan(message: str) -> dict[int, Plan]:
    out: dict[int, Plan] = {}
    for number, (name, kind, typ, label, _) in MESSAGES.get(message, {}).items():
        wire = LEN if kind == "message" else WIRE_OF.get(typ, VARINT)
        repeated = label == "repeated"
        hint = TIME_MS if name in TIME_FIELDS else duration_hint(name)
        out[number] = Plan(name, kind, typ, repeated, wire, repeated and wire != LEN, label == "required",
                           _VARINT_CONV.get(typ, _VARINT_CONV["uint64"]), hint)
    return out


@cache
def required(message: str) -> tuple[str, ...]:
    return tuple(p.name for p in plan(message).values() if p.required)


def _length(buf: bytes, pos: int, end: int, ctx: WalkContext) -> tuple[int, int]:
    """(end of the length-delimited value, its start) for the length prefix at pos."""
    n, pos = uvarint_at(buf, pos, end)
    if n > end - pos:
        if end == ctx.cut:
            raise Truncated(f"length {n}, {end - pos} bytes captured", pos)
        raise BadValue(f"length {n} exceeds the {end - pos} bytes that remain", pos)
    return pos + n, pos


def decode(buf: bytes, start: int, end: int, message: str, ctx: WalkContext, name: str = "") -> Field:
    """Decode buf[start:end] as `message`; a STRUCT Field named `name` (offsets into buf)."""
    try:
        children = walk(buf, start, end, message, ctx, 0)
    except DecodeError as e:
        if isinstance(e.partial, Field):
            e.partial.name = name or message
        raise
    return Field(name or message, None, start, end - start, children, STRUCT)


def walk(buf: bytes, start: int, end: int, message: str, ctx: WalkContext, depth: int) -> list[Field]:
    if depth > MAX_DEPTH:
        raise BadValue(f"{message}: nested deeper than {MAX_DEPTH} levels", start)
    fields = plan(message)
    out: list[Field] = []
    arrays: dict[int, Field] = {}
    pos = start
    tag_at, number, p = start, 0, None
    try:
        while pos < end:
            tag_at, p = pos, None
            if ctx.out_of_fields(pos):
                return out  # the rest of this message, and of the ones around it, stays undecoded
            key = buf[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = uvarint_at(buf, pos, end)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise BadValue(f"{message}: field number 0", tag_at)
            p = fields.get(number)
            if p is None or (wire != p.wire and not (p.packable and wire == LEN)):
                p = None
                f, pos = _unknown(buf, pos, end, number, wire, tag_at, message, ctx, number in fields)
                out.append(f)
                continue
            if wire == LEN and p.kind != "message" and p.packable:
                values, pos = _packed(buf, pos, end, p, message, ctx)
            else:
                f, pos = _value(buf, pos, end, p, wire, message, ctx, depth)
                if f.hint != SECRET:  # a secret spans the bytes it hides, set by _value
                    f.offset, f.length = tag_at, pos - tag_at
                values = [f]
            if p.repeated:
                _append(out, arrays, number, p.name, values, tag_at, pos)
            else:
                out.extend(values)
    except DecodeError as e:
        raise _broken(e, message, start, out, arrays, number, p, tag_at) from None
    needed = required(message) if end != ctx.cut else ()  # a message cut short lacks its tail
    if needed:
        _check_required(needed, out, message, start, ctx)
    return out


def _broken(e: DecodeError, message: str, start: int, out: list[Field], arrays: dict[int, Field], number: int,
            p: Plan | None, tag_at: int) -> DecodeError:
    """The fields of `message` read before the break, with the sub-message it cut short (the
    partial `e` carries) in its place, as `e`'s partial. A field that breaks with nothing kept
    breaks where its tag starts, so the undecoded rest holds all of it."""
    child = e.partial
    e.partial = None
    if not isinstance(child, Field) and e.offset > tag_at:
        e.offset = tag_at
    if isinstance(child, Field) and p is not None:
        child.name, child.offset, child.length = p.name, tag_at, max(e.offset - tag_at, 0)
        if p.repeated:
            _append(out, arrays, number, p.name, [child], tag_at, tag_at + child.length)
        else:
            out.append(child)
    return keep_partial(e, message, start, out, STRUCT)


def _value(buf: bytes, pos: int, end: int, p: Plan, wire: int, message: str, ctx: WalkContext,
           depth: int) -> tuple[Field, int]:
    if wire == VARINT:
        v, pos = uvarint_at(buf, pos, end)
        return _from_varint(p, v), pos
    if wire != LEN:
        st = _FIXED[p.type]
        if pos + st.size > end:
            raise Truncated(f"{p.type} past the end", pos)
        return Field(p.name, st.unpack_from(buf, pos)[0]), pos + st.size
    if p.kind == "message" and end == ctx.cut:
        n, at = uvarint_at(buf, pos, end)
        if n > end - at:
            _cut_submessage(buf, at, end, p, n, ctx, depth)
    stop, pos = _length(buf, pos, end, ctx)
    if p.kind == "message":
        return _submessage(buf, pos, stop, p.type, p.name, ctx, depth), stop
    raw = bytes(buf[pos:stop])
    if (message, p.name) in ctx.redact:
        return Field(p.name, f"<redacted: {plural(len(raw), 'byte')}>", pos, stop - pos, hint=SECRET), stop
    if p.type == "string":
        return Field(p.name, raw.decode("utf-8", "replace")), stop
    return Field(p.name, raw, hint=BYTES), stop


def _from_varint(p: Plan, v: int) -> Field:
    if p.kind == "enum":
        iv = _signed(v, 32)
        sym = ENUMS.get(p.type, {}).get(iv)
        return Field(p.name, iv, hint=ENUM, display=sym if sym is not None else f"unknown({iv})")
    return Field(p.name, p.convert(v), -1, 0, None, p.hint)


def _packed(buf: bytes, pos: int, end: int, p: Plan, message: str, ctx: WalkContext) -> tuple[list[Field], int]:
    stop, pos = _length(buf, pos, end, ctx)
    out: list[Field] = []
    while pos < stop:
        at = pos
        if ctx.out_of_fields(pos):
            break
        f, pos = _value(buf, pos, stop, p, p.wire, message, ctx, 0)
        f.offset, f.length = at, pos - at
        out.append(f)
    return out, stop


def _cut_submessage(buf: bytes, start: int, end: int, p: Plan, size: int, ctx: WalkContext, depth: int) -> NoReturn:
    """A sub-message the frame's cut falls in: its fields up to the cut, carried by the error
    (the walk of the enclosing message names and places it)."""
    children = walk(buf, start, end, p.type, ctx, depth + 1)
    e = Truncated(f"{p.type} {p.name}: {size} bytes, {end - start} captured", end)
    e.partial = Field(p.name, None, start, end - start, children, STRUCT)
    raise e


def _submessage(buf: bytes, start: int, end: int, typ: str, name: str, ctx: WalkContext, depth: int) -> Field:
    """A nested message; a malformed one is kept raw so its siblings still decode."""
    try:
        children = walk(buf, start, end, typ, ctx, depth + 1)
    except DecodeError as e:
        at = e.offset if e.offset >= 0 else start
        ctx.note("malformed_field", f"{typ} {name}: {e}", at)
        return Field(name, bytes(buf[start:end]), -1, 0, hint=RAW)
    return Field(name, None, -1, 0, children, STRUCT)


def _append(out: list[Field], arrays: dict[int, Field], number: int, name: str, values: list[Field],
            start: int, end: int) -> None:
    arr = arrays.get(number)
    if arr is None:
        arr = Field(name, None, start, 0, [], ARRAY)
        arrays[number] = arr
        out.append(arr)
    assert arr.children is not None
    arr.children.extend(values)
    arr.length = end - arr.offset


def _unknown(buf: bytes, pos: int, end: int, number: int, wire: int, at: int, message: str, ctx: WalkContext,
             known: bool) -> tuple[Field, int]:
    value: Any
    if wire == VARINT:
        value, pos = uvarint_at(buf, pos, end)
    elif wire in (FIXED64, FIXED32):
        size = 8 if wire == FIXED64 else 4
        if pos + size > end:
            raise Truncated(f"field {number} past the end", pos)
        value, pos = bytes(buf[pos : pos + size]), pos + size
    elif wire == LEN:
        stop, pos = _length(buf, pos, end, ctx)
        value, pos = bytes(buf[pos:stop]), stop
    else:
        raise BadValue(f"{message}: field {number} has unsupported wire type {wire}", at)
    ctx.unknown_field(message, number, wire, known, at)
    return Field(f"field_{number}", value, at, pos - at, hint=None if wire == VARINT else RAW), pos


def _check_required(needed: tuple[str, ...], out: list[Field], message: str, start: int, ctx: WalkContext) -> None:
    if len(needed) == 1 and out and out[0].name == needed[0]:
        return
    present = {f.name for f in out}
    missing = [name for name in needed if name not in present]
    if missing:
        ctx.note("missing_required", f"{message}: required {', '.join(missing)} missing", start)
