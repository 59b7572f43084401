"""Heuristics: does a stream (or a message boundary) look like the ZooKeeper client protocol?

A stream start is a ConnectRequest (protocolVersion 0, a plausible timeout, a 16-byte or empty
password whose length accounts for the packet), a four-letter admin word, or (for a capture
that starts mid-connection) a RequestHeader with a client opcode whose request record decodes
exactly. None of these functions raises.
"""

from __future__ import annotations

from kdissect.dissect.base import ConversationState
from kdissect.errors import DecodeError
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import fourlw, multi
from kdissect.zookeeper.codes_table import ENUMS, OPCODES
from kdissect.zookeeper.jute import Ctx, read_fields
from kdissect.zookeeper.session import is_connect_request

MAX_TIMEOUT_MS = 24 * 3600 * 1000
SPECIAL_XIDS = frozenset({-2, -4, -8})
CLIENT_OPCODES = frozenset(op for op, (_, req, _r) in OPCODES.items() if req is not None) | multi.MULTI_OPCODES
REPLY_HEADER = 16


def _i32(b: bytes, off: int) -> int:
    return int.from_bytes(b[off : off + 4], "big", signed=True)


def _connect_score(head: bytes, n: int) -> float:
    if 4 + n > len(head) or not is_connect_request(head[: 4 + n]):
        return 0.0
    timeout, pw = _i32(head, 16), _i32(head, 28)
    if not 0 < timeout <= MAX_TIMEOUT_MS or pw not in (0, 16):
        return 0.3
    return 0.9


def _body_decodes(head: bytes, n: int, opcode: int) -> bool:
    """The whole request record decodes and fills the packet exactly."""
    r = WireReader(head, 12, 4 + n)
    try:
        if opcode in multi.MULTI_OPCODES:
            multi.read(r, Ctx(), results=False)
        else:
            record = OPCODES[opcode][1]
            fields = read_fields(r, record, Ctx()) if record else []
            path = next((f.value for f in fields if f.name == "path"), "/")
            if not isinstance(path, str) or not path.startswith("/"):
                return False
    except DecodeError:
        return False
    return r.at_end()


def _path_start(head: bytes, n: int) -> bool:
    """A request too long for the head: its first field is a path ('/...') that fits."""
    plen = _i32(head, 12)
    return 1 <= plen <= n - 12 and len(head) > 16 and head[16] == 0x2F


def request_score(head: bytes, max_frame: int) -> float:
    """A RequestHeader with a client opcode and a request record that fits."""
    if len(head) < 12:
        return 0.0
    n, xid, opcode = _i32(head, 0), _i32(head, 4), _i32(head, 8)
    if not 8 <= n <= max_frame or opcode not in CLIENT_OPCODES or (xid < 0 and xid not in SPECIAL_XIDS):
        return 0.0
    if 4 + n <= len(head):
        if not _body_decodes(head, n, opcode):
            return 0.0
        return 0.9 if (xid, opcode, n) == (-2, 11, 8) else 0.8
    return 0.65 if _path_start(head, n) else 0.0


def stream_score(head: bytes, max_frame: int) -> float:
    try:
        if len(head) >= 4 and fourlw.is_word(head):
            return 0.6 if len(head) <= 16 else 0.0
        if len(head) < 12:
            return 0.0
        n = _i32(head, 0)
        if not 8 <= n <= max_frame:
            return 0.0
        return max(_connect_score(head, n), request_score(head, max_frame))
    except (DecodeError, IndexError, KeyError, ValueError):
        return 0.0


def reply_boundary(head: bytes, state: ConversationState, max_frame: int) -> bool:
    """A ReplyHeader: a special xid with its shape, a notification, or a pending request's xid."""
    if len(head) < 4 + REPLY_HEADER:
        return False
    n, xid = _i32(head, 0), _i32(head, 4)
    if not REPLY_HEADER <= n <= max_frame:
        return False
    if xid in SPECIAL_XIDS:
        return n == REPLY_HEADER
    if xid == -1:
        return len(head) >= 32 and _i32(head, 20) in ENUMS["EventType"] and _i32(head, 24) in ENUMS["KeeperState"]
    return state.pending.peek(xid) is not None


def boundary(head: bytes, to_server: bool, state: ConversationState, max_frame: int) -> bool:
    try:
        if to_server:
            return request_score(head, max_frame) >= 0.65
        return reply_boundary(head, state, max_frame)
    except (DecodeError, IndexError, KeyError, ValueError):
        return False
