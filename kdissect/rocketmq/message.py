"""Messages inside bodies: the stored-message layout (pull, query and view responses) and the
batch layout of SEND_BATCH_MESSAGE bodies (also used inside inner-batch stored messages)."""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable
from typing import Any

from kdissect.dissect.base import Options
from kdissect.errors import BadLength, DecodeError
from kdissect.model import (
    BYTES,
    ENUM,
    FLAGS,
    RAW,
    TIME_MS,
    Diagnostic,
    Field,
    Group,
    array,
    error,
    note,
    struct,
)
from kdissect.rocketmq.compress import DecompressError, decompress
from kdissect.rocketmq.props import properties_from_bytes
from kdissect.rocketmq.tables import (
    COMPRESSION_MASK,
    COMPRESSION_TYPES,
    MAGIC_NAMES,
    MAGIC_V2,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_COMPRESSED,
    SYSFLAG_INNER_BATCH,
    SYSFLAG_NEED_UNWRAP,
    SYSFLAG_STOREHOST_V6,
    message_sysflag_names,
)
from kdissect.wire.reader import WireReader

# The smallest stored message: fixed fields (IPv4 hosts), empty body, topic and properties.
MIN_STORED = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
MIN_BATCH_ENTRY = 4 * 5 + 2


class FieldReader:
    """A WireReader that also records a Field for every value it reads."""

    __slots__ = ("r", "fields")

    def __init__(self, r: WireReader) -> None:
        self.r = r
        self.fields: list[Field] = []

    def read(self, name: str, fn: Callable[[], Any], hint: str | None = None, display: str | None = None) -> Any:
        at = self.r.pos
        value = fn()
        self.fields.append(Field(name, value, at, self.r.pos - at, hint=hint, display=display))
        return value

    def host(self, name: str, v6: bool) -> bytes:
        r = self.r
        at = r.pos
        addr = r.raw(16 if v6 else 4)
        port = r.int32()
        ip = ipaddress.ip_address(addr)
        text = f"[{ip}]:{port}" if v6 else f"{ip}:{port}"
        self.fields.append(Field(name, text, at, r.pos - at))
        return addr + port.to_bytes(4, "big", signed=True)


def body_fields(fr: FieldReader, sysflag: int, opts: Options, diags: list[Diagnostic]) -> bytes:
    """An int32-length body; decompressed per sysflag. Returns the payload (stored bytes when
    it does not decompress)."""
    r = fr.r
    fr.read("body_length", r.int32)
    n = fr.fields[-1].value
    if n < 0:
        raise BadLength(f"body length {n}", r.pos - 4)
    at = r.pos
    stored = r.raw(n)
    payload = decompress_body(stored, sysflag, opts, diags, at)
    fr.fields.append(Field("body", payload, at, n, hint=BYTES))
    return stored


def decompress_body(stored: bytes, sysflag: int, opts: Options, diags: list[Diagnostic], at: int) -> bytes:
    if not sysflag & SYSFLAG_COMPRESSED:
        return stored
    codec = COMPRESSION_TYPES.get((sysflag & COMPRESSION_MASK) >> 8, "UNKNOWN")
    try:
        return decompress(stored, codec, opts.max_decompressed)
    except DecompressError as e:
        diags.append(error("rocketmq.decompress", f"body does not decompress: {e}", at, Group.MALFORMED))
        return stored


def _check_crc(stored: bytes, crc: int, at: int, diags: list[Diagnostic]) -> None:
    actual = zlib.crc32(stored)
    if crc not in (actual, actual & 0x7FFFFFFF, actual - (1 << 32)):
        diags.append(error("rocketmq.body_crc", f"body CRC 0x{crc & 0xFFFFFFFF:08x} != computed 0x{actual:08x}", at, Group.CHECKSUM))


def decode_stored(r: WireReader, opts: Options, diags: list[Diagnostic]) -> tuple[Field, dict[str, Any]]:
    """One stored message at r.pos (r moves past it). Returns its field and facts."""
    start = r.pos
    total = r.int32()
    if total < MIN_STORED:
        raise BadLength(f"stored message size {total}", start)
    r.pos = start
    fr = FieldReader(r.sub(total))
    mr = fr.r
    fr.read("total_size", mr.int32)
    magic = fr.read("magic", mr.uint32, ENUM)
    fr.fields[-1].display = MAGIC_NAMES.get(magic, "UNKNOWN")
    crc_at = mr.pos
    crc = fr.read("body_crc", mr.int32)
    queue_id = fr.read("queue_id", mr.int32)
    fr.read("flag", mr.int32)
    queue_offset = fr.read("queue_offset", mr.int64)
    phys = fr.read("physical_offset", mr.int64)
    sysflag = fr.read("sys_flag", mr.int32, FLAGS)
    fr.fields[-1].display = message_sysflag_names(sysflag)
    fr.read("born_timestamp", mr.int64, TIME_MS)
    fr.host("born_host", bool(sysflag & SYSFLAG_BORNHOST_V6))
    fr.read("store_timestamp", mr.int64, TIME_MS)
    store = fr.host("store_host", bool(sysflag & SYSFLAG_STOREHOST_V6))
    fr.read("reconsume_times", mr.int32)
    fr.read("prepared_transaction_offset", mr.int64)
    body_at = mr.pos + 4
    stored = body_fields(fr, sysflag, opts, diags)
    _check_crc(stored, crc, crc_at, diags)
    topic = fr.read("topic", mr.string16 if magic == MAGIC_V2 else lambda: mr.text(mr.uint8()))
    props = _props(fr, mr)
    msg_id = (store + phys.to_bytes(8, "big", signed=True)).hex().upper()
    fr.fields.append(Field("msg_id", msg_id))
    if sysflag & SYSFLAG_INNER_BATCH and sysflag & SYSFLAG_NEED_UNWRAP and not sysflag & SYSFLAG_COMPRESSED:
        inner = decode_batch(WireReader(r.buf, body_at, body_at + len(stored)), opts, diags, "inner_messages")
        fr.fields.append(inner)
    if not mr.at_end():
        diags.append(note("rocketmq.message_trailing", f"{mr.remaining} bytes after the message properties", mr.pos))
    facts = {"topic": topic, "queue_id": queue_id, "queue_offset": queue_offset, "msg_id": msg_id, "properties": props}
    return struct("message", fr.fields, start, total), facts


def _props(fr: FieldReader, r: WireReader) -> dict[str, str]:
    at = r.pos
    n = r.int16()
    if n < 0:
        raise BadLength(f"properties length {n}", at)
    r.need(n)
    f, props = properties_from_bytes(r.buf, r.pos, r.pos + n)
    r.pos += n
    fr.fields.append(Field("properties_length", n, at, 2))
    fr.fields.append(f)
    return props


def decode_batch_entry(r: WireReader, opts: Options, diags: list[Diagnostic]) -> tuple[Field, dict[str, Any]]:
    """One entry of a batch body: size, magic, body CRC, flag, body, properties."""
    start = r.pos
    total = r.int32()
    if total < MIN_BATCH_ENTRY:
        raise BadLength(f"batch entry size {total}", start)
    r.pos = start
    fr = FieldReader(r.sub(total))
    mr = fr.r
    fr.read("total_size", mr.int32)
    fr.read("magic", mr.int32)
    fr.read("body_crc", mr.int32)
    fr.read("flag", mr.int32)
    body_fields(fr, 0, opts, diags)
    props = _props(fr, mr)
    if not mr.at_end():
        diags.append(note("rocketmq.message_trailing", f"{mr.remaining} bytes after the message properties", mr.pos))
    return struct("message", fr.fields, start, total), {"properties": props}


Decoder = Callable[[WireReader, Options, list[Diagnostic]], tuple[Field, dict[str, Any]]]


def decode_all(r: WireReader, opts: Options, diags: list[Diagnostic], one: Decoder, name: str) -> tuple[Field, list[dict[str, Any]]]:
    """Messages back to back until r ends; a malformed one ends the list with a diagnostic and
    the rest kept raw."""
    start = r.pos
    items: list[Field] = []
    facts: list[dict[str, Any]] = []
    while not r.at_end():
        at = r.pos
        try:
            f, info = one(r, opts, diags)
        except DecodeError as e:
            off = e.offset if e.offset >= 0 else at
            diags.append(error("rocketmq.message_malformed", f"message {len(items)}: {e}", off))
            items.append(Field("undecoded", r.buf[at : r.end], at, r.end - at, hint=RAW))
            r.pos = r.end
            break
        items.append(f)
        facts.append(info)
    return array(name, items, start, r.pos - start), facts


def decode_messages(r: WireReader, opts: Options, diags: list[Diagnostic]) -> tuple[Field, list[dict[str, Any]]]:
    return decode_all(r, opts, diags, decode_stored, "messages")


def decode_batch(r: WireReader, opts: Options, diags: list[Diagnostic], name: str = "messages") -> Field:
    return decode_all(r, opts, diags, decode_batch_entry, name)[0]
