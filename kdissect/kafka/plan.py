"""Compile the generated schema tables into decode plans, once per (message, version), cached.

A plan is a struct decoder built from the closures in ops.py. The interpreter is simply
calling it: `plan(reader, ctx) -> Field`. Fields outside the version, tagged fields and
nullable versions are resolved here, at compile time, never while decoding.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kdissect.errors import DecodeError
from kdissect.kafka import hooks, ops
from kdissect.kafka.apis import APIS
from kdissect.kafka.ops import Ctx, Dec
from kdissect.kafka.schema_messages import EMBEDDED, REQUESTS, RESPONSES
from kdissect.model import BYTES, RAW, Diagnostic, Field, Group, Severity
from kdissect.wire.reader import WireReader

_SCALARS: dict[str, Callable[[str, str, str], Dec]] = {
    "int8": ops.fixed, "int16": ops.fixed, "uint16": ops.fixed, "int32": ops.fixed,
    "uint32": ops.fixed, "int64": ops.fixed, "float64": ops.fixed,
    "bool": ops.boolean, "uuid": ops.uuid_field, "uvarint": ops.uvarint_field,
}


def message_fields(message: str) -> tuple[Any, ...] | None:
    """The field table of "<Api>Request", "<Api>Response" or an embedded message name."""
    for suffix, table in (("Request", REQUESTS), ("Response", RESPONSES)):
        if message.endswith(suffix):
            key = API_BY_NAME.get(message[: -len(suffix)])
            return None if key is None else table.get(key)
    emb = EMBEDDED.get(message)
    return None if emb is None else emb[3]


API_BY_NAME = {row[0]: key for key, row in APIS.items()}


def message_name(api_key: int, is_request: bool) -> str:
    return APIS[api_key][0] + ("Request" if is_request else "Response")


def is_flexible(api_key: int, version: int) -> bool:
    flex = APIS[api_key][3]
    return flex is not None and version >= flex


@lru_cache(maxsize=2048)
def compile_message(message: str, version: int, flexible: bool) -> Dec:
    """The decoder of one message version (cached)."""
    fields = message_fields(message)
    if fields is None:
        raise KeyError(message)
    return _struct("body", fields, version, flexible, message, "")[0]


def plan_for(api_key: int, version: int, is_request: bool) -> Dec:
    return compile_message(message_name(api_key, is_request), version, is_flexible(api_key, version))


def _in(v: int, lo: int, hi: int) -> bool:
    return lo <= v <= hi


def _struct(name: str, fields: tuple[Any, ...], v: int, flexible: bool, message: str,
            path: str) -> tuple[Dec, int]:
    """A struct's decoder and its smallest encoded size."""
    regular: list[Dec] = []
    tagged: dict[int, Dec] = {}
    size = 1 if flexible else 0
    for f in fields:
        fname, _typ, vlo, vhi, _nlo, _nhi, tag, tlo, thi = f[:9]
        if not _in(v, vlo, vhi):
            continue
        dec, fsize = _field(f, v, flexible, message, f"{path}.{fname}" if path else fname)
        if flexible and tag >= 0 and _in(v, tlo, thi):
            tagged[tag] = dec
        else:
            regular.append(dec)
            size += fsize
    return ops.struct_dec(name, regular, tagged if flexible else None), size


def _field(f: tuple[Any, ...], v: int, flexible: bool, message: str, path: str) -> tuple[Dec, int]:
    name, typ, _vlo, _vhi, nlo, nhi, _tag, _tlo, _thi, flags, _default, children = f
    nullable = _in(v, nlo, nhi)
    if typ == "struct":
        inner, size = _struct(name, children, v, flexible, message, path)
        return (ops.nullable_struct(name, inner), 1) if nullable else (inner, size)
    if typ.startswith("[]"):
        elem_type = typ[2:]
        if elem_type == "struct":
            elem, min_size = _struct(name, children, v, flexible, message, path)
        else:
            elem, min_size = _scalar(name, elem_type, flags, flexible, message, path)
        return ops.array(name, elem, flexible, max(min_size, 1)), 1 if flexible else 4
    return _scalar(name, typ, flags, flexible, message, path)


_VAR_SIZE = {"string": (2, 1), "bytes": (4, 1), "records": (4, 1)}


def _scalar(name: str, typ: str, flags: str, flexible: bool, message: str, path: str) -> tuple[Dec, int]:
    make = _SCALARS.get(typ)
    if make is not None:
        return make(name, typ, flags), ops.MIN_SIZE.get(typ, 1)
    size = _VAR_SIZE.get(typ, (1, 1))[1 if flexible else 0]
    if typ == "string":
        return ops.string(name, flexible, flags), size
    if typ == "records":
        return records(name, flexible), size
    if typ == "bytes":
        dec = ops.raw_bytes(name, flexible)
        hook = hooks.lookup(message, path)
        return (dec if hook is None else _hooked(dec, hook)), size
    raise KeyError(f"{message}.{path}: unknown type {typ}")


def _hooked(dec: Dec, hook: hooks.Hook) -> Dec:
    def run(r: WireReader, ctx: Ctx) -> Field:
        f = dec(r, ctx)
        return hook(f, r, ctx) if f.value else f
    return run


# -- records ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _records_decoder() -> Callable[..., Any] | None:
    try:
        mod = importlib.import_module("kdissect.kafka.records")
    except ImportError:
        return None
    fn = getattr(mod, "decode_records", None)
    return fn if callable(fn) else None


def records(name: str, flexible: bool) -> Dec:
    """A records field: length-prefixed bytes handed to the record-batch decoder."""
    def dec(r: WireReader, ctx: Ctx) -> Field:
        start = r.pos
        n = ops.length(r, flexible, True)
        if n == -1:
            return Field(name, None, start, r.pos - start)
        p = ops._take(r, n, name)
        decode = _records_decoder() if ctx.opts.decode_records else None
        if decode is None or n == 0:
            return Field(name, bytes(r.buf[p:p + n]), start, r.pos - start, None, BYTES)
        try:
            f, diags, stats = decode(r.buf, p, p + n, ctx.opts, name, budget=ctx.budget)
        except DecodeError as e:
            ctx.diags.append(Diagnostic(Severity.ERROR, Group.MALFORMED, "kafka.records",
                                        f"{name}: {e}", e.offset))
            return Field(name, bytes(r.buf[p:p + n]), start, r.pos - start, None, RAW)
        ctx.diags.extend(diags)
        ctx.records[id(f)] = stats
        return f
    return dec
