"""The session handshake: ConnectRequest (the client's first packet, no RequestHeader) and
ConnectResponse (the server's first packet, no ReplyHeader). Both end with a readOnly byte that
peers before 3.4 omit."""

from __future__ import annotations

from kdissect.dissect.partial import partial_fields
from kdissect.errors import DecodeError
from kdissect.model import Field, Message
from kdissect.wire.reader import WireReader
from kdissect.zookeeper.diagnostics import DIAGNOSTICS
from kdissect.zookeeper.jute import Ctx, read_fields

CONNECT_KEY = "connect"
MAX_PASSWD = 64  # session passwords are 16 bytes; anything far larger is not a handshake


def _i32(b: bytes, off: int) -> int:
    return int.from_bytes(b[off : off + 4], "big", signed=True)


def _tail_fits(payload_len: int, passwd_at: int, passwd_len: int) -> bool:
    if passwd_len < -1 or passwd_len > MAX_PASSWD:
        return False
    return payload_len - (passwd_at + 4 + max(passwd_len, 0)) in (0, 1)


def is_connect_request(data: bytes) -> bool:
    """data: a packet with its length prefix (cut short or whole). protocolVersion 0, a
    non-negative timeout, and a password whose length accounts for the packet's size (readOnly
    optional)."""
    if len(data) < 32 or _i32(data, 4) != 0 or _i32(data, 16) < 0:
        return False
    return _tail_fits(_i32(data, 0), 24, _i32(data, 28))


def is_connect_response(data: bytes) -> bool:
    if len(data) < 24 or _i32(data, 4) != 0 or _i32(data, 8) < 0:
        return False
    return _tail_fits(_i32(data, 0), 16, _i32(data, 20))


def _int(fields: list[Field], name: str) -> int:
    for f in fields:
        if f.name == name and isinstance(f.value, int):
            return int(f.value)
    return 0


def _flag(fields: list[Field], name: str) -> bool:
    return any(f.name == name and f.value is True for f in fields)


def _tail_note(msg: Message, fields: list[Field], record: str) -> None:
    if not any(f.name == "read_only" for f in fields):
        msg.add(DIAGNOSTICS("no_read_only", f"{record} without the readOnly byte (a peer before 3.4)"))


def _read(msg: Message, r: WireReader, ctx: Ctx, record: str) -> list[Field]:
    """The record's fields, described by the message's describer also when they break part-way
    (then the DecodeError carries them on)."""
    describe = _describe_request if record == "ConnectRequest" else _describe_response
    try:
        fields = read_fields(r, record, ctx, optional_tail=True)
    except DecodeError as e:
        describe(msg, partial_fields(e))
        raise
    describe(msg, fields)
    _tail_note(msg, fields, record)
    return fields


def dissect_connect_request(msg: Message, r: WireReader, ctx: Ctx) -> list[Field]:
    return _read(msg, r, ctx, "ConnectRequest")


def dissect_connect_response(msg: Message, r: WireReader, ctx: Ctx) -> list[Field]:
    return _read(msg, r, ctx, "ConnectResponse")


def _has(fields: list[Field], name: str) -> bool:
    return any(f.name == name for f in fields)


def _describe_request(msg: Message, fields: list[Field]) -> None:
    session, last = _int(fields, "session_id"), _int(fields, "last_zxid_seen")
    parts = [f"connect timeout={_int(fields, 'time_out')}" if _has(fields, "time_out") else "connect"]
    if _has(fields, "session_id"):
        parts.append(f"session=0x{session & 0xFFFFFFFFFFFFFFFF:x}")
    if last:
        parts.append(f"lastZxid=0x{last & 0xFFFFFFFFFFFFFFFF:x}")
    if _flag(fields, "read_only"):
        parts.append("readonly")
    msg.summary = " ".join(parts)
    msg.kind = "request"
    msg.info.update({"op": "connect", "op_code": None, "corr": CONNECT_KEY, "session_id": session,
                     "error": None, "error_code": None})


def _describe_response(msg: Message, fields: list[Field]) -> None:
    session, timeout = _int(fields, "session_id"), _int(fields, "time_out")
    msg.kind = "response"
    msg.info.update({"op": "connect", "op_code": None, "corr": CONNECT_KEY, "session_id": session,
                     "error": None, "error_code": None})
    if not _has(fields, "session_id"):  # cut short before it
        msg.summary = f"connected timeout={timeout}" if _has(fields, "time_out") else "connected"
    elif timeout <= 0 and session == 0:
        # The server's answer to a session it will not revive.
        msg.summary = "connect → session expired"
        msg.info["error"] = "SessionExpired"
    else:
        ro = " readonly" if _flag(fields, "read_only") else ""
        msg.summary = f"connected timeout={timeout} session=0x{session & 0xFFFFFFFFFFFFFFFF:x}{ro}"
