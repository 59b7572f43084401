"""Messages inside bodies: the stored-message layout (pull, query and view responses) and the
batch layout of SEND_BATCH_MESSAGE bodies (also used inside inner-batch stored messages)."""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable
from typing import Any

from kdissect.dissect.base import Budget, Options
from kdissect.dissect.partial import inline_partial
from kdissect.errors import BadLength, DecodeError, Truncated
from kdissect.model import (
    BYTES,
    ENUM,
    FLAGS,
    HEX,
    RAW,
    TIME_MS,
    Diagnostic,
    Field,
    array,
    struct,
)
from kdissect.rocketmq.diagnostics import DIAGNOSTICS
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
from kdissect.text import plural
from kdissect.wire.codecs import CodecError, CodecUnavailable, decompress
from kdissect.wire.reader import WireReader

# The smallest stored message: fixed fields (IPv4 hosts), empty body, topic and properties.
MIN_STORED = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
MIN_BATCH_ENTRY = 4 * 5 + 2

# The compression types of the sysflag -> the codecs of wire/codecs.py (ZLIB: java.util.zip's
# Deflater; LZ4 and ZSTD: frames).
CODECS = {"ZLIB": "zlib", "LZ4": "lz4", "ZSTD": "zstd"}


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


def body_fields(fr: FieldReader, sysflag: int, opts: Options, diags: list[Diagnostic],
                budget: Budget | None = None) -> bytes:
    """An int32-length body; decompressed per sysflag. Returns the payload (stored bytes when
    it does not decompress)."""
    r = fr.r
    fr.read("body_length", r.int32)
    n = fr.fields[-1].value
    if n < 0:
        raise BadLength(f"body length {n}", r.pos - 4)
    at = r.pos
    stored = r.raw(n)
    payload = decompress_body(stored, sysflag, opts, diags, at, budget)
    fr.fields.append(Field("body", payload, at, n, hint=BYTES))
    return stored


def decompress_body(stored: bytes, sysflag: int, opts: Options, diags: list[Diagnostic], at: int,
                    budget: Budget | None = None) -> bytes:
    """The body decompressed within what is left of the message's budget (all its stored
    messages together); once the budget is spent, bodies stay compressed (noted once)."""
    if not sysflag & SYSFLAG_COMPRESSED:
        return stored
    b = budget if budget is not None else Budget(opts)
    if b.inflate_left <= 0:
        if b.first("rocketmq.decompression_budget"):
            diags.append(DIAGNOSTICS("decompression_budget",
                                     f"{b.which()} is spent: bodies from here on stay compressed", at))
        return stored
    codec = COMPRESSION_TYPES.get((sysflag & COMPRESSION_MASK) >> 8, "UNKNOWN")
    left = b.inflate_left
    try:
        if codec not in CODECS:
            raise CodecError(f"unknown compression {codec}")
        out = decompress(CODECS[codec], stored, left)
    except CodecUnavailable as e:
        diags.append(DIAGNOSTICS("codec_unavailable", f"{e}: the body stays compressed", at))
        return stored
    except CodecError as e:
        b.spend(e.produced, False)
        why = f"{codec} output exceeds the {left} bytes left of {b.which()}" if e.capped else str(e)
        diags.append(DIAGNOSTICS("decompress", f"body does not decompress: {why}", at))
        return stored
    b.spend(len(out), True)
    return out


def _check_crc(stored: bytes, crc: int, at: int, diags: list[Diagnostic]) -> None:
    actual = zlib.crc32(stored)
    if crc not in (actual, actual & 0x7FFFFFFF, actual - (1 << 32)):
        diags.append(DIAGNOSTICS("body_crc", f"body CRC 0x{crc & 0xFFFFFFFF:08x} != computed 0x{actual:08x}", at))


def decode_stored(r: WireReader, opts: Options, diags: list[Diagnostic],
                  budget: Budget | None = None) -> tuple[Field, dict[str, Any]]:
    """One stored message at r.pos (r moves past it). Returns its field and facts."""
    start = r.pos
    total = r.int32()
    if total < MIN_STORED:
        raise BadLength(f"stored message size {total}", start)
    return _sized(r, start, total, lambda fr: _stored(fr, r, opts, diags, budget))


def _sized(r: WireReader, start: int, total: int,
           fill: Callable[[FieldReader], dict[str, Any]]) -> tuple[Field, dict[str, Any]]:
    """The message of `total` bytes at `start` (r moves past it) as a struct of the fields `fill`
    reads, and the facts it returns. A message that breaks part-way (cut short, a size that
    overruns what remains) raises with the fields read before the break as its partial."""
    room = r.end - start
    r.pos = start
    fr = FieldReader(r.sub(total) if total <= room else WireReader(r.buf, start, r.end))
    try:
        facts = fill(fr)
        if total > room:
            raise BadLength(f"message size {total} exceeds the {room} bytes that remain", fr.r.pos)
    except DecodeError as e:
        r.pos = r.end
        raise inline_partial(e, fr.fields, "message", start) from None
    return struct("message", fr.fields, start, total), facts


def _stored(fr: FieldReader, r: WireReader, opts: Options, diags: list[Diagnostic],
            budget: Budget | None) -> dict[str, Any]:
    mr = fr.r
    fr.read("total_size", mr.int32)
    magic = fr.read("magic", mr.uint32, ENUM)
    fr.fields[-1].display = MAGIC_NAMES.get(magic, "UNKNOWN")
    crc_at = mr.pos
    crc = fr.read("body_crc", mr.int32, HEX)
    queue_id = fr.read("queue_id", mr.int32)
    fr.read("flag", mr.int32, HEX)
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
    stored = body_fields(fr, sysflag, opts, diags, budget)
    _check_crc(stored, crc, crc_at, diags)
    topic = fr.read("topic", mr.string16 if magic == MAGIC_V2 else lambda: mr.text(mr.uint8()))
    props = _props(fr, mr)
    msg_id = (store + phys.to_bytes(8, "big", signed=True)).hex().upper()
    fr.fields.append(Field("msg_id", msg_id))
    if sysflag & SYSFLAG_INNER_BATCH and sysflag & SYSFLAG_NEED_UNWRAP and not sysflag & SYSFLAG_COMPRESSED:
        inner = decode_batch(WireReader(r.buf, body_at, body_at + len(stored)), opts, diags, "inner_messages",
                             budget)
        fr.fields.append(inner)
    if not mr.at_end():
        diags.append(DIAGNOSTICS("message_trailing", f"{plural(mr.remaining, 'byte')} after the message properties", mr.pos))
    return {"topic": topic, "queue_id": queue_id, "queue_offset": queue_offset, "msg_id": msg_id, "properties": props}


def _props(fr: FieldReader, r: WireReader) -> dict[str, str]:
    at = r.pos
    n = r.int16()
    if n < 0:
        raise BadLength(f"properties length {n}", at)
    fr.fields.append(Field("properties_length", n, at, 2))
    if n > r.remaining:
        # Cut short: the items whose separator arrived stay, then the error.
        whole = r.buf.rfind(b"\x02", r.pos, r.end) + 1
        if whole > r.pos:
            fr.fields.append(properties_from_bytes(r.buf, r.pos, whole)[0])
        raise Truncated(f"properties: needs {n} bytes, {r.remaining} remain", max(whole, r.pos))
    f, props = properties_from_bytes(r.buf, r.pos, r.pos + n)
    r.pos += n
    fr.fields.append(f)
    return props


def decode_batch_entry(r: WireReader, opts: Options, diags: list[Diagnostic],
                       budget: Budget | None = None) -> tuple[Field, dict[str, Any]]:
    """One entry of a batch body: size, magic, body CRC, flag, body, properties."""
    start = r.pos
    total = r.int32()
    if total < MIN_BATCH_ENTRY:
        raise BadLength(f"batch entry size {total}", start)
    return _sized(r, start, total, lambda fr: _entry(fr, opts, diags, budget))


def _entry(fr: FieldReader, opts: Options, diags: list[Diagnostic], budget: Budget | None) -> dict[str, Any]:
    mr = fr.r
    fr.read("total_size", mr.int32)
    fr.read("magic", mr.int32, HEX)
    fr.read("body_crc", mr.int32, HEX)
    fr.read("flag", mr.int32, HEX)
    body_fields(fr, 0, opts, diags, budget)
    props = _props(fr, mr)
    if not mr.at_end():
        diags.append(DIAGNOSTICS("message_trailing", f"{plural(mr.remaining, 'byte')} after the message properties", mr.pos))
    return {"properties": props}


Decoder = Callable[[WireReader, Options, list[Diagnostic], Budget], tuple[Field, dict[str, Any]]]


def decode_all(r: WireReader, opts: Options, diags: list[Diagnostic], one: Decoder, name: str,
               budget: Budget | None = None) -> tuple[Field, list[dict[str, Any]]]:
    """Messages back to back until r ends; a malformed one ends the list with a diagnostic, its
    fields read before the break, and the rest kept raw. Each message counts against the frame's budget (one entry, and its
    fields and properties as elements); past it the rest is not decoded (noted once)."""
    b = budget if budget is not None else Budget(opts)
    start = r.pos
    items: list[Field] = []
    facts: list[dict[str, Any]] = []
    limited = False
    while not r.at_end():
        at = r.pos
        if b.entries_left <= 0 or b.elements_left <= 0:
            limited = True
            if b.first("rocketmq.message_limit"):
                why = (b.entries_spent("messages") if b.elements_left > 0 else
                       f"more than the {b.elements_limit} fields a frame may show")
                diags.append(DIAGNOSTICS("message_limit", f"{why}: {len(items)} shown, the last "
                                         f"{r.end - at} bytes are not decoded", at))
            r.pos = r.end
            break
        try:
            f, info = one(r, opts, diags, b)
        except DecodeError as e:
            off = e.offset if e.offset >= 0 else at
            diags.append(DIAGNOSTICS("message_malformed", f"message {len(items)}: {e}", off))
            if isinstance(e.partial, Field):
                items.append(e.partial)  # the message it breaks, up to the break
            rest = off if at <= off <= r.end and e.partial is not None else at
            if rest < r.end:
                items.append(Field("undecoded", r.buf[rest : r.end], rest, r.end - rest, hint=RAW))
            r.pos = r.end
            break
        b.entry()
        b.elements_left -= _size(f)
        items.append(f)
        facts.append(info)
    out = array(name, items, start, r.pos - start)
    if limited:
        out.label = f"{name} (first {len(items)})"
    return out, facts


def _size(f: Field) -> int:
    """The fields of a decoded message, its properties included."""
    kids = f.children or []
    return len(kids) + sum(len(k.children or ()) for k in kids if k.name == "properties")


def decode_messages(r: WireReader, opts: Options, diags: list[Diagnostic],
                    budget: Budget | None = None) -> tuple[Field, list[dict[str, Any]]]:
    return decode_all(r, opts, diags, decode_stored, "messages", budget)


def decode_batch(r: WireReader, opts: Options, diags: list[Diagnostic], name: str = "messages",
                 budget: Budget | None = None) -> Field:
    return decode_all(r, opts, diags, decode_batch_entry, name, budget)[0]
