"""Helpers for the ZooKeeper tests: build messages from bytes, run captures, encode jute."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from support import SHARED, SHARED_CAPTURES

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.model import Field, Message, Pdu
from kdissect.zookeeper.dissector import DISSECTOR, conversation

REPO = Path(__file__).resolve().parents[3]
SHARED_ZK = SHARED_CAPTURES / "zookeeper"
OWN_ZK = REPO / "captures" / "zookeeper"
SPEC = SHARED / "zookeeper-spec"


def shared_capture(name: str) -> Path:
    path = SHARED_ZK / name
    if not path.exists():
        pytest.skip(f"shared capture {name} is not present")
    return path


def messages(path: Path) -> list[Message]:
    from kdissect.pipeline import dissect_file

    return [m for m in dissect_file(str(path)) if m.protocol == "zookeeper"]


def dissect(data: bytes, to_server: bool, state: ConversationState | None = None,
            opts: Options | None = None) -> Message:
    """One packet through the dissector boundary, with a conversation state (new if None)."""
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "client", "server", "zookeeper")
    run_dissector(DISSECTOR, msg, state if state is not None else DISSECTOR.new_state(), opts or Options())
    return msg


def started(state: ConversationState | None = None) -> ConversationState:
    """A state past the handshake: both directions already sent their first packet."""
    st = state if state is not None else DISSECTOR.new_state()
    conv = conversation(st)
    conv.client_started = conv.server_started = True
    return st


def field(msg: Message, path: str) -> Field | None:
    """The root field at a dotted path (first array element wins), as a Field."""
    parts = path.split(".")
    node = next((f for f in msg.fields if f.name == parts[0]), None)
    for part in parts[1:]:
        if node is None:
            return None
        if node.hint == "array":
            node = node.children[0] if node.children else None
            if node is None:
                return None
        node = node.child(part)
    return node


def value(msg: Message, path: str) -> object:
    f = field(msg, path)
    return None if f is None else f.value


# -- a small independent jute encoder for test packets ---------------------------------


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def ustr(s: str | None) -> bytes:
    if s is None:
        return i32(-1)
    b = s.encode()
    return i32(len(b)) + b


def buf(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def frame(body: bytes) -> bytes:
    return i32(len(body)) + body


def request(xid: int, opcode: int, body: bytes = b"") -> bytes:
    return frame(i32(xid) + i32(opcode) + body)


def reply(xid: int, zxid: int, err: int, body: bytes = b"") -> bytes:
    return frame(i32(xid) + i64(zxid) + i32(err) + body)


def stat(version: int = 3, ctime: int = 1_700_000_000_000) -> bytes:
    return (i64(5) + i64(9) + i64(ctime) + i64(ctime + 1000) + i32(version) + i32(1) + i32(0)
            + i64(0) + i32(24) + i32(2) + i64(7))
