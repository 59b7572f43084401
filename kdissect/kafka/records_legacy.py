"""MessageSet (magic 0 and 1): messages with a CRC32, and compressed wrapper messages whose
value is an inner message set (with offsets relative to the wrapper for magic 1)."""

from __future__ import annotations

import zlib

from kdissect.errors import DecodeError
from kdissect.kafka.records_common import (
    LOG_APPEND_TIME,
    Ctx,
    EntryDecoder,
    bytes_leaf,
    flags_display,
    leaf,
    time_leaf,
    walk,
)
from kdissect.model import FLAGS, HEX, RAW, Field, array, struct
from kdissect.text import plural
from kdissect.wire.reader import WireReader

ATTRIBUTE_FLAGS = ((LOG_APPEND_TIME, "log_append_time"),)
MIN_SIZE = {0: 14, 1: 22}  # crc, magic, attributes, [timestamp], key and value lengths


def decode_message(buf: bytes, start: int, end: int, ctx: Ctx, real: bool) -> Field:
    """A top-level message: counts as one batch; a wrapper's inner messages are decoded."""
    ctx.batches += 1
    return _message(buf, start, end, ctx, real, True)


def _inner_message(buf: bytes, start: int, end: int, ctx: Ctx, real: bool) -> Field:
    return _message(buf, start, end, ctx, real, False)


_INNER: dict[int, EntryDecoder] = {0: _inner_message, 1: _inner_message}


def _message(buf: bytes, start: int, end: int, ctx: Ctx, real: bool, top: bool) -> Field:
    at = start if real else -1
    magic = buf[start + 16]
    if end - start - 12 < MIN_SIZE[magic]:
        ctx.add("records.bad_length", f"magic {magic} message of {end - start - 12} bytes is too short", at)
        return leaf("undecoded", bytes(buf[start:end]), start, end - start, real, RAW)
    offset = int.from_bytes(buf[start : start + 8], "big", signed=True)
    crc = int.from_bytes(buf[start + 12 : start + 16], "big")
    attrs = buf[start + 17]
    children = [
        leaf("offset", offset, start, 8, real),
        leaf("message_size", end - start - 12, start + 8, 4, real),
        leaf("crc", crc, start + 12, 4, real, HEX),
        leaf("magic", magic, start + 16, 1, real),
        leaf("attributes", attrs, start + 17, 1, real, FLAGS, flags_display(attrs, ATTRIBUTE_FLAGS)),
    ]
    pos = start + 18
    if magic == 1:
        ts = int.from_bytes(buf[pos : pos + 8], "big", signed=True)
        children.append(time_leaf("timestamp", ts, pos, 8, real))
        pos += 8
    got = zlib.crc32(memoryview(buf)[start + 16 : end])
    if got != crc:
        ctx.add("records.crc", f"message CRC32 0x{crc:08x} does not match the computed 0x{got:08x}",
                start + 12 if real else -1)
    try:
        children += _key_value(buf, pos, end, magic, attrs, ctx, real, top)
    except DecodeError as e:
        ctx.add("records.truncated", f"message at offset {offset}: {e}", e.offset if real else at)
        return struct("message", children, at, end - start, f"offset {offset} (malformed)")
    if attrs & 0x07:
        _wrapper_fixups(children, magic, offset, attrs)
    return struct("message", children, at, end - start, f"offset {offset}")


def _key_value(buf: bytes, pos: int, end: int, magic: int, attrs: int, ctx: Ctx, real: bool,
               top: bool) -> list[Field]:
    r = WireReader(buf, pos, end)
    kat = r.pos + 4
    key = r.bytes32()
    vat = r.pos + 4
    value = r.bytes32()
    if r.remaining:
        ctx.add("records.trailing", f"{plural(r.remaining, 'byte')} after the message value",
                r.pos if real else -1)
    out = [bytes_leaf("key", key, kat, len(key or b""), real)]
    codec = attrs & 0x07
    if not codec:
        ctx.records += 1
        ctx.nbytes += len(key or b"") + len(value or b"")
        out.append(bytes_leaf("value", value, vat, len(value or b""), real))
        return out
    out.append(leaf("compressed", value, vat, len(value or b""), real, RAW))
    if not top:
        ctx.add("records.nested", "a compressed message inside a compressed message set", vat if real else -1)
    elif value is not None:
        data = ctx.inflate(codec, value, vat if real else -1, legacy_lz4=magic == 0)
        if data is not None:
            inner = walk(data, 0, len(data), ctx, False, False, _INNER)
            f = array("records", inner, vat if real else -1, len(value))
            f.label = f"records ({plural(len(inner), 'message')}, {plural(len(data), 'byte')} decompressed)"
            out.append(f)
    return out


def _wrapper_fixups(children: list[Field], magic: int, offset: int, attrs: int) -> None:
    """Inner messages of a magic 1 wrapper carry offsets relative to the wrapper's (the offset
    of the last inner message), and take the wrapper's timestamp when the broker set it."""
    inner = next((c.children for c in children if c.name == "records"), None)
    if not inner or magic != 1:
        return
    msgs = [m for m in inner if m.children]
    last = msgs[-1].child("offset") if msgs else None
    last_rel = last.value if last is not None else 0
    # A wrapper offset of 0 (some producers) or below the last inner offset: no base to add.
    base = offset - last_rel if offset >= last_rel and offset != 0 else 0
    wrapper_ts = next((c.value for c in children if c.name == "timestamp"), None)
    for m in msgs:
        off = m.child("offset")
        if off is None or m.children is None:
            continue
        rel = off.value
        off.value = base + rel
        m.children.insert(1, Field("relative_offset", rel, -1, 8))
        m.label = f"offset {off.value}"
        ts = m.child("timestamp")
        if attrs & LOG_APPEND_TIME and ts is not None and wrapper_ts is not None:
            ts.value = wrapper_ts
