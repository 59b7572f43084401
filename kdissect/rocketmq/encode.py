"""An encoder for RocketMQ remoting frames, for tests and for the capture generator
(tools/gen_rocketmq_captures.py). It writes what the dissector reads:

- frame(): [int32 total][int32 serialize type << 24 | header length][header][body], with the
  header as JSON (serialize type 0) or in the ROCKETMQ binary layout (type 1);
- properties(): the `name 0x01 value 0x02` string;
- stored_message(): one message in the stored (commit-log / pull-response) layout;
- batch(): a SEND_BATCH_MESSAGE body.
"""

from __future__ import annotations

import ipaddress
import json
import struct
import zlib
from collections.abc import Mapping

from kdissect.rocketmq.codes import LANGUAGES
from kdissect.rocketmq.tables import (
    MAGIC_V1,
    MAGIC_V2,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)


def properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def json_header(code: int, language: int, version: int, opaque: int, flag: int,
                remark: str | None, ext: Mapping[str, str] | None) -> bytes:
    h: dict[str, object] = {"code": code, "flag": flag, "language": LANGUAGES.get(language, "OTHER"),
                            "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": version}
    if remark is not None:
        h["remark"] = remark
    if ext is not None:
        h["extFields"] = dict(ext)
    return json.dumps(h, separators=(",", ":")).encode()


def _text(s: str | None) -> bytes:
    return b"" if s is None else s.encode()


def binary_header(code: int, language: int, version: int, opaque: int, flag: int,
                  remark: str | None, ext: Mapping[str, str] | None) -> bytes:
    out = struct.pack(">hBhii", code, language, version, opaque, flag)
    r = _text(remark)
    out += struct.pack(">i", len(r)) + r
    entries = b""
    for k, v in (ext or {}).items():
        kb, vb = _text(k), _text(v)
        entries += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    return out + struct.pack(">i", len(entries)) + entries


def frame(code: int, *, opaque: int, flag: int = 0, ext: Mapping[str, str] | None = None, body: bytes = b"",
          remark: str | None = None, language: int = 0, version: int = 0, serialize: int = SERIALIZE_ROCKETMQ) -> bytes:
    """One whole frame, length prefix included."""
    make = binary_header if serialize == SERIALIZE_ROCKETMQ else json_header
    header = make(code, language, version, opaque, flag, remark, ext)
    word = (serialize << 24) | len(header)
    return struct.pack(">II", 4 + len(header) + len(body), word) + header + body


def _host(addr: str, port: int) -> bytes:
    return ipaddress.ip_address(addr).packed + struct.pack(">i", port)


def stored_message(topic: str, body: bytes, *, queue_id: int = 0, queue_offset: int = 0, physical_offset: int = 0,
                   sysflag: int = 0, flag: int = 0, props: Mapping[str, str] | None = None,
                   born: tuple[str, int] = ("127.0.0.1", 40000), store: tuple[str, int] = ("127.0.0.1", 10911),
                   born_ts: int = 0, store_ts: int = 0, reconsume: int = 0, magic_v2: bool = False) -> bytes:
    """A stored message; `body` is written as given (compress it first and set the sysflag
    bits yourself). IPv6 hosts set the BORNHOST_V6 / STOREHOSTADDRESS_V6 bits."""
    if ipaddress.ip_address(born[0]).version == 6:
        sysflag |= SYSFLAG_BORNHOST_V6
    if ipaddress.ip_address(store[0]).version == 6:
        sysflag |= SYSFLAG_STOREHOST_V6
    t = topic.encode()
    p = properties(props or {}).encode()
    rec = struct.pack(">Iii", MAGIC_V2 if magic_v2 else MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, queue_id)
    rec += struct.pack(">iqqi", flag, queue_offset, physical_offset, sysflag)
    rec += struct.pack(">q", born_ts) + _host(*born) + struct.pack(">q", store_ts) + _host(*store)
    rec += struct.pack(">iq", reconsume, 0) + struct.pack(">i", len(body)) + body
    rec += (struct.pack(">h", len(t)) if magic_v2 else struct.pack(">B", len(t))) + t
    rec += struct.pack(">h", len(p)) + p
    return struct.pack(">i", 4 + len(rec)) + rec


def batch(messages: list[tuple[bytes, Mapping[str, str]]], flag: int = 0) -> bytes:
    """A batch body: each entry is (body, properties)."""
    out = b""
    for body, props in messages:
        p = properties(props).encode()
        entry = struct.pack(">iii", 0, 0, flag) + struct.pack(">i", len(body)) + body + struct.pack(">h", len(p)) + p
        out += struct.pack(">i", 4 + len(entry)) + entry
    return out


__all__ = ["SERIALIZE_JSON", "SERIALIZE_ROCKETMQ", "batch", "binary_header", "frame", "json_header",
           "properties", "stored_message"]
