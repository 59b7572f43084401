"""Message bodies by request code: send bodies (single, compressed, batch), stored messages in
pull/query/view responses and broker-to-client requests, JSON documents, opaque bytes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kdissect.dissect.base import Budget, Options
from kdissect.errors import DecodeError
from kdissect.model import BYTES, RAW, Diagnostic, Field
from kdissect.rocketmq.diagnostics import DIAGNOSTICS
from kdissect.rocketmq.jfields import to_field
from kdissect.rocketmq.ljson import JNode, looks_like_json, parse
from kdissect.rocketmq.message import decode_all, decode_batch_entry, decode_messages, decompress_body
from kdissect.rocketmq.tables import (
    BATCH_SEND_CODES,
    MAGIC_NAMES,
    MESSAGE_REQUEST_CODES,
    MESSAGE_RESPONSE_CODES,
    SEND_CODES,
)
from kdissect.text import plural
from kdissect.wire.reader import WireReader


@dataclass(slots=True)
class Body:
    """What a body decoder found: fields, facts for summaries, diagnostics."""

    fields: list[Field] = field(default_factory=list)
    messages: list[dict[str, Any]] | None = None
    json: JNode | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    broken: bool = False  # a message in it breaks part-way (cut short, a size that overruns)


@dataclass(frozen=True, slots=True)
class BodyContext:
    buf: bytes  # the whole message
    start: int  # body offset
    code: int | None  # the request code the body belongs to (None: unknown)
    ext: dict[str, Any]  # typed ext-field values of this message's header
    opts: Options
    matched: bool  # for a response: whether its request is known
    budget: Budget = field(default_factory=Budget)  # the frame's: decompressed bytes, messages


def _raw(ctx: BodyContext, out: Body) -> Body:
    data = ctx.buf[ctx.start :]
    out.fields.append(Field("body", data, ctx.start, len(data), hint=BYTES))
    return out


def _json(ctx: BodyContext, out: Body) -> Body:
    data = ctx.buf[ctx.start :]
    try:
        node, trailing = parse(data, ctx.start)
    except DecodeError as e:
        part = e.partial
        if not isinstance(part, JNode) or not part.value:
            out.diagnostics.append(DIAGNOSTICS("body_json", f"body is not JSON: {e}", e.offset))
            return _raw(ctx, out)
        # It breaks part-way (cut short, most often): the members read before the break stay.
        out.diagnostics.append(DIAGNOSTICS("body_json", f"JSON body breaks part-way: {e}", part.end))
        out.json, out.broken = part, True
        out.fields.append(to_field("body", part))
        if part.end < len(ctx.buf):
            out.fields.append(Field("undecoded", ctx.buf[part.end :], part.end, len(ctx.buf) - part.end, hint=RAW))
        return out
    if trailing:
        out.diagnostics.append(DIAGNOSTICS("body_trailing", f"{plural(trailing, 'byte')} after the JSON body",
                                           len(ctx.buf) - trailing))
    out.json = node
    out.fields.append(to_field("body", node))
    return out


def _generic(ctx: BodyContext, out: Body) -> Body:
    if looks_like_json(ctx.buf[ctx.start : ctx.start + 64]):
        return _json(ctx, out)
    return _raw(ctx, out)


def _send(ctx: BodyContext, out: Body) -> Body:
    data = ctx.buf[ctx.start :]
    sysflag = ctx.ext.get("sysFlag")
    flag = sysflag if isinstance(sysflag, int) else 0
    payload = decompress_body(data, flag, ctx.opts, out.diagnostics, ctx.start, ctx.budget)
    out.fields.append(Field("body", payload, ctx.start, len(data), hint=BYTES))
    if payload is not data:
        out.fields.append(Field("compressed_size", len(data), ctx.start, len(data)))
    return out


def _batch(ctx: BodyContext, out: Body) -> Body:
    f, facts = decode_all(WireReader(ctx.buf, ctx.start), ctx.opts, out.diagnostics, decode_batch_entry, "messages",
                          ctx.budget)
    out.fields.append(f)
    out.messages = [{} for _ in facts]
    return out


def _stored(ctx: BodyContext, out: Body) -> Body:
    f, facts = decode_messages(WireReader(ctx.buf, ctx.start), ctx.opts, out.diagnostics, ctx.budget)
    out.fields.append(f)
    out.messages = facts
    return out


def _looks_stored(ctx: BodyContext) -> bool:
    head = ctx.buf[ctx.start + 4 : ctx.start + 8]
    return len(head) == 4 and int.from_bytes(head, "big") in MAGIC_NAMES


def _unknown_response(ctx: BodyContext, out: Body) -> Body:
    if _looks_stored(ctx):
        return _stored(ctx, out)
    if looks_like_json(ctx.buf[ctx.start : ctx.start + 64]):
        return _json(ctx, out)
    out.diagnostics.append(DIAGNOSTICS(
        "body_unmatched", "response body kept raw: its request is not in the capture", ctx.start,
    ))
    return _raw(ctx, out)


Decoder = Callable[[BodyContext, Body], Body]

REQUEST_BODIES: dict[int, Decoder] = {c: _send for c in SEND_CODES}
REQUEST_BODIES.update({c: _batch for c in BATCH_SEND_CODES})
REQUEST_BODIES.update({c: _stored for c in MESSAGE_REQUEST_CODES})
RESPONSE_BODIES: dict[int, Decoder] = {c: _stored for c in MESSAGE_RESPONSE_CODES}


def decode_body(ctx: BodyContext, is_request: bool) -> Body:
    out = Body()
    if ctx.start >= len(ctx.buf):
        return out
    if is_request:
        fn = REQUEST_BODIES.get(ctx.code) if ctx.code is not None else None
    elif not ctx.matched:
        fn = _unknown_response
    else:
        fn = RESPONSE_BODIES.get(ctx.code) if ctx.code is not None else None
        # A frame cut short before the first message's magic: its request says what it holds.
        cut_early = len(ctx.buf) - ctx.start < 8 and int.from_bytes(ctx.buf[:4], "big") + 4 > len(ctx.buf)
        if fn is _stored and not _looks_stored(ctx) and not cut_early:
            fn = None
    out = (fn or _generic)(ctx, out)
    out.broken = out.broken or any(d.key == "rocketmq.message_malformed" for d in out.diagnostics)
    return out
