"""Compile the generated schema tables into decode plans, once per (message, version), cached.

A plan is a struct decoder built from the closures in ops.py. The interpreter is simply
calling it: `plan(reader, ctx) -> Field`. Fields outside the version, tagged fields and
nullable versions are resolved here, at compile time, never while decoding; so is what a
`bytes` field carries (hooks.HOOKS), whose decoders live here too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from kdissect.errors import DecodeError
from kdissect.kafka import ops
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import is_flexible
from kdissect.kafka.hooks import HOOKS, Carried
from kdissect.kafka.ops import ArrayCap, Ctx, Dec
from kdissect.kafka.sasl import decode_sasl_auth_bytes
from kdissect.kafka.schema_messages import EMBEDDED, REQUESTS, RESPONSES, FieldRow
from kdissect.model import RAW, SECRET, STRUCT, Field
from kdissect.text import plural
from kdissect.wire.reader import WireReader

_SCALARS: dict[str, Callable[[str, str, str], Dec]] = {
    "int8": ops.fixed, "int16": ops.fixed, "uint16": ops.fixed, "int32": ops.fixed,
    "uint32": ops.fixed, "int64": ops.fixed, "float64": ops.fixed,
    "bool": ops.boolean, "uuid": ops.uuid_field, "uvarint": ops.uvarint_field,
}


def message_fields(message: str) -> tuple[FieldRow, ...] | None:
    """The field table of "<Api>Request", "<Api>Response" or an embedded message name."""
    for suffix, table in (("Request", REQUESTS), ("Response", RESPONSES)):
        if message.endswith(suffix):
            key = API_BY_NAME.get(message[: -len(suffix)])
            return None if key is None else table.get(key)
    emb = EMBEDDED.get(message)
    return None if emb is None else emb.fields


API_BY_NAME = {api.name: key for key, api in APIS.items()}


# "<Api>Request" and "<Api>Response" by (API key, is_request), made once: not a new string (whose
# hash the plan cache computes again) for every message.
_MESSAGE_NAMES = {(key, is_request): api.name + ("Request" if is_request else "Response")
                  for key, api in APIS.items() for is_request in (True, False)}


def message_name(api_key: int, is_request: bool) -> str:
    return _MESSAGE_NAMES[api_key, is_request]


@lru_cache(maxsize=2048)
def compile_message(message: str, version: int, flexible: bool) -> Dec:
    """The decoder of one message version (cached)."""
    fields = message_fields(message)
    if fields is None:
        raise KeyError(message)
    return _struct("body", fields, version, flexible, message, "")[0]


# The plans plan_for gave, by (API key, version, is_request): one dict lookup a message. As many
# as the tables have versions: its callers ask for none newer than the newest known.
_PLANS: dict[tuple[int, int, bool], Dec] = {}


def plan_for(api_key: int, version: int, is_request: bool) -> Dec:
    key = (api_key, version, is_request)
    try:
        return _PLANS[key]
    except KeyError:
        plan = _PLANS[key] = compile_message(message_name(api_key, is_request), version,
                                             is_flexible(api_key, version))
    return plan


def _in(v: int, lo: int, hi: int) -> bool:
    return lo <= v <= hi


def _struct(name: str, fields: tuple[FieldRow, ...], v: int, flexible: bool, message: str,
            path: str) -> tuple[Dec, int]:
    """A struct's decoder and its smallest encoded size."""
    regular: list[Dec] = []
    tagged: dict[int, Dec] = {}
    size = 1 if flexible else 0
    for f in fields:
        if not _in(v, f.min_version, f.max_version):
            continue
        dec, fsize = _field(f, v, flexible, message, f"{path}.{f.name}" if path else f.name)
        if flexible and f.tag >= 0 and _in(v, f.tagged_min, f.tagged_max):
            tagged[f.tag] = dec
        else:
            regular.append(dec)
            size += fsize
    return ops.struct_dec(name, regular, tagged if flexible else None), size


def _field(f: FieldRow, v: int, flexible: bool, message: str, path: str) -> tuple[Dec, int]:
    name, typ = f.name, f.type
    if typ == "struct":
        inner, size = _struct(name, f.children or (), v, flexible, message, path)
        return (ops.nullable_struct(name, inner), 1) if _in(v, f.nullable_min, f.nullable_max) else (inner, size)
    if typ.startswith("[]"):
        elem_type = typ[2:]
        if elem_type == "struct":
            elem, min_size = _struct(name, f.children or (), v, flexible, message, path)
        else:
            elem, min_size = _scalar(name, elem_type, f.flags, flexible, message, path)
        return ops.array(name, elem, flexible, max(min_size, 1)), 1 if flexible else 4
    return _scalar(name, typ, f.flags, flexible, message, path)


_VAR_SIZE = {"string": (2, 1), "bytes": (4, 1), "records": (4, 1)}


def _scalar(name: str, typ: str, flags: str, flexible: bool, message: str, path: str) -> tuple[Dec, int]:
    make = _SCALARS.get(typ)
    if make is not None:
        return make(name, typ, flags), ops.MIN_SIZE.get(typ, 1)
    size = _VAR_SIZE.get(typ, (1, 1))[1 if flexible else 0]
    if typ == "string":
        return ops.string(name, flexible, flags), size
    if typ == "records":
        return ops.records(name, flexible), size
    if typ == "bytes":
        dec = ops.raw_bytes(name, flexible)
        carried = HOOKS.get((message, path))
        return (dec if carried is None else _carrying(dec, _CONTENT[carried])), size
    raise KeyError(f"{message}.{path}: unknown type {typ}")


# -- what bytes fields carry (hooks.HOOKS) ----------------------------------------------

# A content decoder takes the decoded bytes Field (offset and length cover its length prefix)
# and returns it unchanged or replaced by a structure.
Content = Callable[[Field, WireReader, Ctx], Field]


def _carrying(dec: Dec, content: Content) -> Dec:
    def run(r: WireReader, ctx: Ctx) -> Field:
        f = dec(r, ctx)
        return content(f, r, ctx) if f.value else f
    return run


# The consumer protocol carried by the classic group APIs: JoinGroup metadata and DescribeGroups
# member metadata hold a ConsumerProtocolSubscription; SyncGroup and DescribeGroups assignments
# a ConsumerProtocolAssignment. Each starts with its own int16 version; the layout comes from the
# generated tables (schema_messages.EMBEDDED). Groups of other protocol types (Kafka Connect,
# custom assignors) carry other bytes: those stay raw unless they decode cleanly and completely.
# Newer versions than the tables know are decoded with the newest known version; their extra
# trailing fields stay raw (the protocol only appends).
CONSUMER_PROTOCOL_LABELS = {Carried.SUBSCRIPTION: "consumer protocol subscription",
                            Carried.ASSIGNMENT: "consumer protocol assignment"}


def _consumer_protocol(carried: Carried) -> Content:
    message, label = carried.value, CONSUMER_PROTOCOL_LABELS[carried]
    emb = EMBEDDED[message]

    def decode(f: Field, r: WireReader, ctx: Ctx) -> Field:
        data: bytes = f.value
        start = f.offset + f.length - len(data)
        if len(data) < 2:
            return f
        version = int.from_bytes(data[:2], "big", signed=True)
        if version < emb.lowest:
            return f
        inner = WireReader(r.buf, start + 2, start + len(data))
        sub = Ctx(ctx.opts, ctx.state, budget=ctx.budget)
        flexible = emb.first_flexible is not None and version >= emb.first_flexible
        try:
            body = compile_message(message, min(version, emb.newest), flexible)(inner, sub)
        except ArrayCap:
            ctx.diags.extend(sub.diags)  # the limit is the message's: its next array stops it
            return f
        except DecodeError:
            return f
        kids = [Field("version", version, start, 2)] + (body.children or [])
        if inner.remaining:
            if version <= emb.newest:
                return f  # not this protocol: a known version must use every byte
            kids.append(Field("unknown_fields", inner.rest(), inner.pos, inner.end - inner.pos, None, RAW))
        ctx.topics.extend(sub.topics)
        ctx.diags.extend(sub.diags)
        return Field(f.name, None, f.offset, f.length, kids, STRUCT, None, label)
    return decode


def _sasl(is_request: bool) -> Content:
    """SaslAuthenticate's auth_bytes, decoded for the mechanism SaslHandshake named."""
    def decode(f: Field, r: WireReader, ctx: Ctx) -> Field:
        data: bytes = f.value
        start = f.offset + f.length - len(data)
        mechanism = ctx.state.sasl_mechanism if ctx.state is not None else None
        kids = decode_sasl_auth_bytes(mechanism, data, start, is_request, ctx.opts)
        return Field(f.name, None, f.offset, f.length, kids, STRUCT, None, "SASL")
    return decode


def _secret(f: Field, r: WireReader, ctx: Ctx) -> Field:
    """A credential: redacted unless show_secrets (a SECRET field over its bytes)."""
    if ctx.opts.show_secrets:
        return f
    size = len(f.value)
    return Field(f.name, f"<redacted {plural(size, 'byte')}>", f.offset + f.length - size, size, hint=SECRET)


_CONTENT: dict[Carried, Content] = {
    Carried.SUBSCRIPTION: _consumer_protocol(Carried.SUBSCRIPTION),
    Carried.ASSIGNMENT: _consumer_protocol(Carried.ASSIGNMENT),
    Carried.SASL_CLIENT: _sasl(True),
    Carried.SASL_SERVER: _sasl(False),
    Carried.SECRET: _secret,
}
