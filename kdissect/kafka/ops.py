"""The Kafka interpreter's building blocks: one small closure per field of a compiled plan.

A compiled field decoder is `dec(r: WireReader, ctx: Ctx) -> Field`. Closures capture the field
name and everything known at compile time (flexible, nullable, element decoder), so decoding
does no per-field dispatch on type names. Readers index the buffer directly and raise the
reader's Truncated/BadLength on short input, like WireReader.
"""

from __future__ import annotations

import struct as _struct
import uuid as _uuid
from collections.abc import Callable
from typing import Any

from kdissect import accel
from kdissect.dissect.base import Budget, Options
from kdissect.dissect.partial import keep_partial
from kdissect.errors import BadLength, DecodeError, Truncated
from kdissect.kafka.conversation import KafkaConversation
from kdissect.kafka.diagnostics import DIAGNOSTICS
from kdissect.kafka.displays import VALUE_NAMES
from kdissect.kafka.error_codes import error_name
from kdissect.kafka.records import decode_records
from kdissect.model import ARRAY, BYTES, ENUM, RAW, STRUCT, TIME_MS, Diagnostic, Field, duration_hint
from kdissect.wire.reader import WireReader


class Ctx:
    """What one body decode collects besides the tree."""

    __slots__ = ("opts", "errors", "topics", "groups", "diags", "records", "state", "version", "budget")

    def __init__(self, opts: Options, state: KafkaConversation | None = None, version: int = -1,
                 budget: Budget | None = None) -> None:
        self.opts = opts
        # The message's allowance of array elements and decompressed bytes (shared with the
        # records fields and embedded protocols of the same message).
        self.budget = budget if budget is not None else Budget(opts)
        self.version = version
        self.errors: list[int] = []  # non-zero error codes, in wire order
        self.topics: list[str] = []
        self.groups: list[str] = []
        self.diags: list[Diagnostic] = []
        self.records: dict[int, dict[str, int]] = {}  # id(records Field) -> stats
        self.state = state  # the conversation's facts (SASL mechanism); None outside a conversation


Dec = Callable[[WireReader, Ctx], Field]


class ArrayCap(DecodeError):
    """An array (or tagged-field section) past the message's element allowance: the elements
    before the limit are kept (`partial`); the rest of the message is not decoded."""


def _array_cap(ctx: Ctx, name: str, n: int, shown: int, start: int, pos: int) -> ArrayCap:
    """The error that stops a message at an array it may not decode whole (noted once)."""
    e = ArrayCap(f"{name}: {n} elements, past the {ctx.budget.elements_limit} elements a message may decode: "
                 f"the first {shown} are shown, the rest of the message is not decoded", pos)
    if ctx.budget.first("kafka.array_cap"):
        ctx.diags.append(DIAGNOSTICS("array_cap", str(e), start))
    return e

_FIXED = {
    "int8": (1, _struct.Struct(">b").unpack_from),
    "int16": (2, _struct.Struct(">h").unpack_from),
    "uint16": (2, _struct.Struct(">H").unpack_from),
    "int32": (4, _struct.Struct(">i").unpack_from),
    "uint32": (4, _struct.Struct(">I").unpack_from),
    "int64": (8, _struct.Struct(">q").unpack_from),
    "float64": (8, _struct.Struct(">d").unpack_from),
}
_I8 = _FIXED["int8"][1]
_I16 = _FIXED["int16"][1]
_I32 = _FIXED["int32"][1]

# The smallest encoding of each type, for checking element counts before allocating.
MIN_SIZE = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "float64": 8, "bool": 1, "uuid": 16, "string": 1, "bytes": 1, "records": 1}


def display_of(name: str) -> tuple[str | None, dict[int, str] | None]:
    """The hint of a number without a schema flag, and the names of its values: ENUM with the
    names of displays.VALUE_NAMES ("acks"), a duration by its name ("timeout_ms"), else none."""
    names = VALUE_NAMES.get(name)
    if names is not None:
        return ENUM, names
    return duration_hint(name), None


def fixed(name: str, typ: str, flags: str) -> Dec:
    size, unpack = _FIXED[typ]
    if "E" in flags:
        return _error_code(name)
    if "M" in flags:
        return _timestamp(name, unpack)
    hint, names = display_of(name)

    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p + size > r.end:
            raise Truncated(f"{name}: {typ} past the end", p)
        r.pos = p + size
        v = unpack(r.buf, p)[0]
        return Field(name, v, p, size, None, hint, None if names is None else names.get(v))
    return dec


def _error_code(name: str) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p + 2 > r.end:
            raise Truncated(f"{name}: int16 past the end", p)
        r.pos = p + 2
        v = _I16(r.buf, p)[0]
        if v:
            ctx.errors.append(v)
        return Field(name, v, p, 2, None, ENUM, error_name(v))
    return dec


def _timestamp(name: str, unpack: Callable[[Any, int], tuple[Any, ...]]) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p + 8 > r.end:
            raise Truncated(f"{name}: int64 past the end", p)
        r.pos = p + 8
        v = unpack(r.buf, p)[0]
        return Field(name, v, p, 8, None, TIME_MS)
    return dec


def boolean(name: str, typ: str, flags: str) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p >= r.end:
            raise Truncated(f"{name}: bool past the end", p)
        r.pos = p + 1
        return Field(name, r.buf[p] != 0, p, 1)
    return dec


def uuid_field(name: str, typ: str, flags: str) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p + 16 > r.end:
            raise Truncated(f"{name}: uuid past the end", p)
        r.pos = p + 16
        return Field(name, str(_uuid.UUID(bytes=bytes(r.buf[p:p + 16]))), p, 16)
    return dec


def uvarint_field(name: str, typ: str, flags: str) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        v = r.uvarint()
        return Field(name, v, p, r.pos - p)
    return dec


def length(r: WireReader, flexible: bool, wide: bool) -> int:
    """A string/bytes/array length: compact uvarint (length + 1) or int16/int32; -1 is null."""
    if flexible:
        return r.uvarint32() - 1
    p = r.pos
    if wide:
        if p + 4 > r.end:
            raise Truncated("length past the end", p)
        r.pos = p + 4
        return int(_I32(r.buf, p)[0])
    if p + 2 > r.end:
        raise Truncated("length past the end", p)
    r.pos = p + 2
    return int(_I16(r.buf, p)[0])


def _take(r: WireReader, n: int, name: str) -> int:
    """Check that n bytes remain; returns their start and moves past them."""
    p = r.pos
    if n < -1:
        raise BadLength(f"{name}: length {n}", p)
    if p + n > r.end:
        raise Truncated(f"{name}: {n} bytes needed, {r.end - p} remain", p)
    r.pos = p + n
    return p


def string(name: str, flexible: bool, flags: str) -> Dec:
    topic, group = "T" in flags, "G" in flags

    def dec(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        n = length(r, flexible, False)
        if n == -1:
            return Field(name, None, start, r.pos - start)
        p = _take(r, n, name)
        v = bytes(r.buf[p:p + n]).decode("utf-8", "replace")
        if topic:
            ctx.topics.append(v)
        elif group:
            ctx.groups.append(v)
        return Field(name, v, start, r.pos - start)
    return dec


def raw_bytes(name: str, flexible: bool) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        n = length(r, flexible, True)
        if n == -1:
            return Field(name, None, start, r.pos - start)
        p = _take(r, n, name)
        return Field(name, bytes(r.buf[p:p + n]), start, r.pos - start, None, BYTES)
    return dec


def array(name: str, elem: Dec, flexible: bool, min_size: int) -> Dec:
    def dec(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        n = length(r, flexible, True)
        if n < 0:
            if n < -1:
                raise BadLength(f"{name}: array length {n}", start)
            return Field(name, None, start, r.pos - start, None, ARRAY)
        if n * min_size > r.end - r.pos:
            raise BadLength(f"{name}: {n} elements exceed the {r.end - r.pos} bytes that remain", start)
        keep = ctx.budget.elements(n)
        kids: list[Field] = []
        add = kids.append
        try:
            for _ in range(keep):
                add(elem(r, ctx))
        except DecodeError as e:
            raise keep_partial(e, name, start, kids, ARRAY) from None
        if keep < n:
            cap = _array_cap(ctx, name, n, keep, start, r.pos)
            cap.partial = Field(name, None, start, r.pos - start, kids, ARRAY, None, f"{name} (first {keep} of {n})")
            raise cap
        return Field(name, None, start, r.pos - start, kids, ARRAY)
    return dec


def struct_dec(name: str, regular: list[Dec], tagged: dict[int, Dec] | None) -> Dec:
    """A struct: its regular fields, then (flexible versions) its tagged-field section."""
    if tagged is None:
        def dec(r: WireReader, ctx: Ctx) -> Field:
            start = r.pos
            kids: list[Field] = []
            add = kids.append
            try:
                for f in regular:
                    add(f(r, ctx))
            except DecodeError as e:
                raise keep_partial(e, name, start, kids, STRUCT) from None
            return Field(name, None, start, r.pos - start, kids, STRUCT)
        return dec

    def dec_flex(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        kids: list[Field] = []
        add = kids.append
        try:
            for f in regular:
                add(f(r, ctx))
        except DecodeError as e:
            raise keep_partial(e, name, start, kids, STRUCT) from None
        if r.pos < r.end and r.buf[r.pos] == 0:
            r.pos += 1  # the usual empty tagged-field section
        else:
            try:
                tagged_section(r, ctx, tagged, kids)
            except ArrayCap as e:
                raise keep_partial(e, name, start, kids, STRUCT) from None
        return Field(name, None, start, r.pos - start, kids, STRUCT)
    return dec_flex


def tagged_section(r: WireReader, ctx: Ctx, tagged: dict[int, Dec], out: list[Field] | None = None) -> list[Field]:
    """Tagged fields by schema, appended to `out`; unknown tags stay raw, named after their tag
    number. Each counts against the message's element allowance."""
    start = r.pos
    n = r.count(r.uvarint32(), 2)
    keep = ctx.budget.elements(n)
    if out is None:
        out = []
    for _ in range(keep):
        tag = r.uvarint32()
        size = r.uvarint32()
        sub = r.sub(size)
        dec = tagged.get(tag)
        if dec is None:
            out.append(Field(f"tag_{tag}", bytes(sub.buf[sub.pos:sub.end]), sub.pos, size, None, RAW))
        else:
            out.append(dec(sub, ctx))
    if keep < n:
        raise _array_cap(ctx, "tagged fields", n, keep, start, r.pos)  # those read are in `out`
    return out


def records(name: str, flexible: bool) -> Dec:
    """A records field: length-prefixed bytes handed to the record-batch decoder."""
    def dec(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        n = length(r, flexible, True)
        if n == -1:
            return Field(name, None, start, r.pos - start)
        p = _take(r, n, name)
        if not ctx.opts.decode_records or n == 0:
            return Field(name, bytes(r.buf[p:p + n]), start, r.pos - start, None, BYTES)
        try:
            f, diags, stats = decode_records(r.buf, p, p + n, ctx.opts, name, budget=ctx.budget)
        except DecodeError as e:
            ctx.diags.append(DIAGNOSTICS("records", f"{name}: {e}", e.offset))
            return Field(name, bytes(r.buf[p:p + n]), start, r.pos - start, None, RAW)
        ctx.diags.extend(diags)
        ctx.records[id(f)] = stats
        return f
    return dec


def nullable_struct(name: str, inner: Dec) -> Dec:
    """A nullable struct field carries an int8 marker: -1 null, 1 present."""
    def dec(r: WireReader, ctx: Ctx) -> Field:
        p = r.pos
        if p >= r.end:
            raise Truncated(f"{name}: presence byte past the end", p)
        if _I8(r.buf, p)[0] < 0:
            r.pos = p + 1
            return Field(name, None, p, 1, None, STRUCT)
        r.pos = p + 1
        f = inner(r, ctx)
        f.offset, f.length = p, r.pos - p
        return f
    return dec


accel.bind(globals(), "kdissect.kafka._ops", (
    "fixed", "_error_code", "_timestamp", "boolean", "uuid_field", "uvarint_field", "string",
    "raw_bytes", "array", "struct_dec", "records", "nullable_struct"))
