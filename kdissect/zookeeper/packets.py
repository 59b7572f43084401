"""Ordinary packets: RequestHeader + the opcode's request record, and ReplyHeader + the response
record of the request with the same xid (notifications, pings, auth and set-watches replies are
decoded by their special xid alone).

A body that breaks part-way keeps the summary and facts of what was read: the header, and the
body's fields up to the break, travel on the DecodeError (`partial`) to the per-PDU boundary,
which appends them before the undecoded rest."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState
from kdissect.dissect.partial import inline_partial, keep_partial, partial_fields
from kdissect.errors import DecodeError
from kdissect.model import STRUCT, Field, Message
from kdissect.text import plural
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import multi, summary
from kdissect.zookeeper.annotate import error_name, opcode_name
from kdissect.zookeeper.codes_table import OPCODES
from kdissect.zookeeper.diagnostics import DIAGNOSTICS
from kdissect.zookeeper.jute import Ctx, read_fields

NOTIFICATION_XID = -1
# Replies decodable without their request: xid -> opcode.
SPECIAL_REPLIES = {-2: 11, -4: 100, -8: 101}
PATH_FIELDS = ("path", "prefix_path")


def _raw(r: WireReader, name: str) -> Field:
    off = r.pos
    return Field(name, r.rest(), off, r.end - off, hint="raw")


def _undecoded(msg: Message, r: WireReader, why: str) -> list[Field]:
    if r.at_end():
        return []
    msg.add(DIAGNOSTICS("undecoded", why, r.pos))
    return [_raw(r, "body")]


def _trailing(msg: Message, r: WireReader) -> list[Field]:
    if r.at_end():
        return []
    msg.add(DIAGNOSTICS("trailing", f"{plural(r.remaining, 'byte')} after the record", r.pos))
    return [_raw(r, "trailing")]


def _path(fields: list[Field]) -> str | None:
    for f in fields:
        if f.name in PATH_FIELDS and isinstance(f.value, str):
            return f.value
    return None


# -- requests ---------------------------------------------------------------------------


def _header(r: WireReader, record: str, ctx: Ctx) -> list[Field]:
    try:
        header = read_fields(r, record, ctx)
    except DecodeError as e:
        _name_opcode(partial_fields(e))
        raise
    _name_opcode(header)
    return header


def _name_opcode(header: list[Field]) -> None:
    if len(header) > 1 and header[1].name == "type":
        header[1].name = "opcode"  # RequestHeader.type; AuthPacket and others have a body "type"


def request(msg: Message, r: WireReader, ctx: Ctx, state: ConversationState) -> list[Field]:
    header = _header(r, "RequestHeader", ctx)
    xid, opcode = int(header[0].value), int(header[1].value)
    name = opcode_name(opcode)
    msg.info.update({"op": name, "op_code": opcode, "corr": xid, "error": None, "error_code": None})
    state.pending.add(xid, msg)
    try:
        body = _request_body(msg, r, ctx, opcode, name)
    except DecodeError as e:
        raise inline_partial(e, header) from None
    return header + body + _trailing(msg, r)


def _request_body(msg: Message, r: WireReader, ctx: Ctx, opcode: int, name: str) -> list[Field]:
    """The body's fields; sets the summary and path, also from the fields read before a break."""
    if opcode in multi.MULTI_OPCODES:
        mb = multi.new_body(False, r.pos)
        try:
            multi.read(r, ctx, False, mb)
        except DecodeError as e:
            raise _multi_partial(e) from None
        finally:
            path = next((p for _, p in mb.ops if p), None)
            if path is not None:
                msg.info["path"] = path
            msg.summary = f"{name} {summary.ops_list(mb.ops)}".rstrip()
        return [mb.tree]
    entry = OPCODES.get(opcode)
    record = None if entry is None else entry[1]
    if record is None:
        msg.summary = name
        return _undecoded(msg, r, f"no request layout for opcode {opcode}")
    try:
        body = read_fields(r, record, ctx) if record else []
    except DecodeError as e:
        _describe_request(msg, name, partial_fields(e))
        raise
    _describe_request(msg, name, body)
    return body


def _multi_partial(e: DecodeError) -> DecodeError:
    """The partial ops/results array as the one field of the body read so far."""
    return keep_partial(e, "body", e.partial.offset if isinstance(e.partial, Field) else -1, [], STRUCT)


def _describe_request(msg: Message, name: str, body: list[Field]) -> None:
    msg.summary = summary.request(name, body)
    path = _path(body)
    if path is not None:
        msg.info["path"] = path


# -- replies ----------------------------------------------------------------------------


def reply(msg: Message, r: WireReader, ctx: Ctx, state: ConversationState) -> list[Field]:
    header = read_fields(r, "ReplyHeader", ctx)
    try:
        return header + _reply(msg, r, ctx, state, header)
    except DecodeError as e:
        raise inline_partial(e, header) from None


def _reply(msg: Message, r: WireReader, ctx: Ctx, state: ConversationState, header: list[Field]) -> list[Field]:
    """The fields after the header."""
    xid, zxid, err = (int(f.value) for f in header)
    msg.info.update({"corr": xid, "zxid": zxid, "error_code": err or None,
                     "error": error_name(err) if err else None})
    if xid == NOTIFICATION_XID:
        return _notification(msg, r, ctx)
    req = state.pending.pop(xid)
    if req is not None:
        msg.peer = req
        opcode = req.info.get("op_code")
        if "path" in req.info:
            msg.info["path"] = req.info["path"]
    else:
        opcode = SPECIAL_REPLIES.get(xid)
    if not isinstance(opcode, int):
        return _unmatched(msg, r, xid, err)
    name = opcode_name(opcode)
    msg.info.update({"op": name, "op_code": opcode})
    body = _reply_body(msg, r, ctx, opcode, name, err)
    return body + _trailing(msg, r)


def _reply_body(msg: Message, r: WireReader, ctx: Ctx, opcode: int, name: str, err: int) -> list[Field]:
    if err and r.at_end():
        msg.summary = f"{name} → {error_name(err)}"
        return []
    if opcode in multi.MULTI_OPCODES:
        mb = multi.new_body(True, r.pos)
        try:
            multi.read(r, ctx, True, mb)
        except DecodeError as e:
            raise _multi_partial(e) from None
        finally:
            msg.summary = multi.result_summary(name, mb)
        return [mb.tree]
    entry = OPCODES.get(opcode)
    record = None if entry is None else entry[2]
    if record is None:
        msg.summary = f"{name} → reply"
        return _undecoded(msg, r, f"no response layout for opcode {opcode}")
    try:
        body = read_fields(r, record, ctx) if record and not r.at_end() else []
    except DecodeError as e:
        _describe_reply(msg, name, err, partial_fields(e))
        raise
    _describe_reply(msg, name, err, body)
    return body


def _describe_reply(msg: Message, name: str, err: int, body: list[Field]) -> None:
    for f in body:
        if f.name == "err":  # addWatch's ErrorResponse beside ReplyHeader.err
            f.name = "result_err"
    msg.summary = f"{name} → {error_name(err)}" if err else summary.reply(name, body)


def _unmatched(msg: Message, r: WireReader, xid: int, err: int) -> list[Field]:
    outcome = error_name(err) if err else "ok"
    msg.summary = f"reply xid={xid} → {outcome}"
    msg.info["op"] = None
    return _undecoded(msg, r, f"the request with xid {xid} was not captured: its reply body cannot be decoded")


def _notification(msg: Message, r: WireReader, ctx: Ctx) -> list[Field]:
    msg.kind = "event"
    msg.info.update({"op": "notification", "op_code": 0})
    try:
        body = read_fields(r, "WatcherEvent", ctx)
    except DecodeError as e:
        _describe_notification(msg, partial_fields(e))
        raise
    _describe_notification(msg, body)
    return body + _trailing(msg, r)


def _describe_notification(msg: Message, body: list[Field]) -> None:
    """Summary and facts of a WatcherEvent{type, state, path}, or of its fields before a break."""
    if not body:
        msg.summary = "notification"
        return
    event = body[0]
    msg.info["event"] = event.display
    if len(body) < 2:
        msg.summary = str(event.display)
        return
    state = body[1]
    msg.info["state"] = state.display
    path = body[2] if len(body) > 2 else None
    if path is not None and isinstance(path.value, str) and path.value:
        msg.info["path"] = path.value
        msg.summary = f"{event.display} {summary.short(path.value)}"
    else:
        msg.summary = f"{event.display} {state.display}" if event.value != -1 else f"state {state.display}"
