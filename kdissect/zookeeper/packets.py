"""Ordinary packets: RequestHeader + the opcode's request record, and ReplyHeader + the response
record of the request with the same xid (notifications, pings, auth and set-watches replies are
decoded by their special xid alone)."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState
from kdissect.model import Field, Group, Message, warning
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import multi, summary
from kdissect.zookeeper.annotate import error_name, opcode_name
from kdissect.zookeeper.codes_table import OPCODES
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
    msg.add(warning("zookeeper.undecoded", why, r.pos, Group.UNDECODED))
    return [_raw(r, "body")]


def _trailing(msg: Message, r: WireReader) -> list[Field]:
    if r.at_end():
        return []
    msg.add(warning("zookeeper.trailing", f"{r.remaining} bytes after the record", r.pos, Group.MALFORMED))
    return [_raw(r, "trailing")]


def _path(fields: list[Field]) -> str | None:
    for f in fields:
        if f.name in PATH_FIELDS and isinstance(f.value, str):
            return f.value
    return None


# -- requests ---------------------------------------------------------------------------


def request(msg: Message, r: WireReader, ctx: Ctx, state: ConversationState) -> list[Field]:
    header = read_fields(r, "RequestHeader", ctx)
    header[1].name = "opcode"  # RequestHeader.type; AuthPacket and others have a body "type"
    xid, opcode = int(header[0].value), int(header[1].value)
    name = opcode_name(opcode)
    msg.info.update({"op": name, "op_code": opcode, "corr": xid, "error": None, "error_code": None})
    body, text = _request_body(msg, r, ctx, opcode, name)
    msg.summary = text
    path = _path(body)
    if path is not None:
        msg.info["path"] = path
    state.pending.add(xid, msg)
    return header + body + _trailing(msg, r)


def _request_body(msg: Message, r: WireReader, ctx: Ctx, opcode: int, name: str) -> tuple[list[Field], str]:
    if opcode in multi.MULTI_OPCODES:
        mb = multi.read(r, ctx, results=False)
        path = next((p for _, p in mb.ops if p), None)
        if path is not None:
            msg.info["path"] = path
        return [mb.tree], f"{name} {summary.ops_list(mb.ops)}".rstrip()
    entry = OPCODES.get(opcode)
    record = None if entry is None else entry[1]
    if record is None:
        return _undecoded(msg, r, f"no request layout for opcode {opcode}"), name
    body = read_fields(r, record, ctx) if record else []
    return body, summary.request(name, body)


# -- replies ----------------------------------------------------------------------------


def reply(msg: Message, r: WireReader, ctx: Ctx, state: ConversationState) -> list[Field]:
    header = read_fields(r, "ReplyHeader", ctx)
    xid, zxid, err = (int(f.value) for f in header)
    msg.info.update({"corr": xid, "zxid": zxid, "error_code": err or None,
                     "error": error_name(err) if err else None})
    if xid == NOTIFICATION_XID:
        return header + _notification(msg, r, ctx)
    req = state.pending.pop(xid)
    if req is not None:
        msg.peer = req
        opcode = req.info.get("op_code")
        if "path" in req.info:
            msg.info["path"] = req.info["path"]
    else:
        opcode = SPECIAL_REPLIES.get(xid)
    if not isinstance(opcode, int):
        return header + _unmatched(msg, r, xid, err)
    name = opcode_name(opcode)
    msg.info.update({"op": name, "op_code": opcode})
    body = _reply_body(msg, r, ctx, opcode, name, err)
    return header + body + _trailing(msg, r)


def _reply_body(msg: Message, r: WireReader, ctx: Ctx, opcode: int, name: str, err: int) -> list[Field]:
    if err and r.at_end():
        msg.summary = f"{name} → {error_name(err)}"
        return []
    if opcode in multi.MULTI_OPCODES:
        mb = multi.read(r, ctx, results=True)
        msg.summary = multi.result_summary(name, mb)
        return [mb.tree]
    entry = OPCODES.get(opcode)
    record = None if entry is None else entry[2]
    if record is None:
        msg.summary = f"{name} → reply"
        return _undecoded(msg, r, f"no response layout for opcode {opcode}")
    body = read_fields(r, record, ctx) if record and not r.at_end() else []
    for f in body:
        if f.name == "err":  # addWatch's ErrorResponse beside ReplyHeader.err
            f.name = "result_err"
    msg.summary = f"{name} → {error_name(err)}" if err else summary.reply(name, body)
    return body


def _unmatched(msg: Message, r: WireReader, xid: int, err: int) -> list[Field]:
    outcome = error_name(err) if err else "ok"
    msg.summary = f"reply xid={xid} → {outcome}"
    msg.info["op"] = None
    return _undecoded(msg, r, f"the request with xid {xid} was not captured: its reply body cannot be decoded")


def _notification(msg: Message, r: WireReader, ctx: Ctx) -> list[Field]:
    body = read_fields(r, "WatcherEvent", ctx)
    event, state, path = body[0], body[1], body[2]
    msg.kind = "event"
    msg.info.update({"op": "notification", "op_code": 0, "event": event.display, "state": state.display})
    if isinstance(path.value, str) and path.value:
        msg.info["path"] = path.value
        msg.summary = f"{event.display} {path.value}"
    else:
        msg.summary = f"{event.display} {state.display}" if event.value != -1 else f"state {state.display}"
    return body + _trailing(msg, r)
