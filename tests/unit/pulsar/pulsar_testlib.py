"""Test helpers: a hand-written protobuf encoder with field numbers spelled out (independent of
the schema table under test), frame builders, and a one-PDU runner."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import crc32c

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.model import Field, Message, Pdu
from kdissect.pulsar.dissector import DISSECTOR

OWN_CAPTURES = Path(__file__).resolve().parents[3] / "captures" / "pulsar"

# BaseCommand types used in tests (PulsarApi.proto)
CONNECT, CONNECTED, SUBSCRIBE, PRODUCER, SEND, SEND_RECEIPT, SEND_ERROR = 2, 3, 4, 5, 6, 7, 8
MESSAGE, ACK, FLOW, SUCCESS, ERROR, CLOSE_PRODUCER, PRODUCER_SUCCESS = 9, 10, 11, 13, 14, 15, 17
PING, PONG, PARTITIONED_METADATA, PARTITIONED_METADATA_RESPONSE = 18, 19, 21, 22
LOOKUP, LOOKUP_RESPONSE, AUTH_CHALLENGE, AUTH_RESPONSE, ACK_RESPONSE = 23, 24, 36, 37, 38


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb(*pairs: tuple[int, Any]) -> bytes:
    """(field number, value) pairs: int/bool -> varint, str/bytes -> length-delimited,
    ("f64", float) -> fixed64 double, list -> repeated."""
    out = bytearray()
    for num, val in pairs:
        for v in val if isinstance(val, list) else [val]:
            if isinstance(v, tuple) and v[0] == "f64":
                out += varint(num << 3 | 1) + struct.pack("<d", v[1])
            elif isinstance(v, bool | int):
                out += varint(num << 3) + varint(int(v))
            else:
                raw = v.encode() if isinstance(v, str) else v
                out += varint(num << 3 | 2) + varint(len(raw)) + raw
    return bytes(out)


def command(ctype: int, body: bytes | None = b"") -> bytes:
    return pb((1, ctype)) + (b"" if body is None else pb((ctype, body)))


def simple(ctype: int, body: bytes | None = b"") -> bytes:
    cmd = command(ctype, body)
    return struct.pack(">II", 4 + len(cmd), len(cmd)) + cmd


def payload_frame(ctype: int, body: bytes, metadata: bytes, payload: bytes, *, crc: int | None = None,
                  broker_entry: bytes | None = None) -> bytes:
    cmd = command(ctype, body)
    after = struct.pack(">I", len(metadata)) + metadata + payload
    check = crc32c.crc32c(after) if crc is None else crc
    section = struct.pack(">HI", 0x0E01, check) + after
    if broker_entry is not None:
        section = struct.pack(">HI", 0x0E02, len(broker_entry)) + broker_entry + section
    return struct.pack(">II", 4 + len(cmd) + len(section), len(cmd)) + cmd + section


def batch(*entries: tuple[bytes, bytes]) -> bytes:
    """(SingleMessageMetadata, payload) pairs -> a batch payload."""
    return b"".join(struct.pack(">I", len(m)) + m + p for m, p in entries)


def run(data: bytes, to_server: bool = True, state: ConversationState | None = None,
        opts: Options | None = None) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "pulsar")
    run_dissector(DISSECTOR, msg, state if state is not None else DISSECTOR.new_state(), opts or Options())
    return msg


def root(msg: Message, name: str) -> Field | None:
    return next((f for f in msg.fields if f.name == name), None)


def value(msg: Message, path: str) -> Any:
    head, _, rest = path.partition(".")
    f = root(msg, head)
    if f is None:
        return None
    return f.value if not rest else f.get(rest)


def keys(msg: Message) -> list[str]:
    return [d.key for d in msg.diagnostics]
