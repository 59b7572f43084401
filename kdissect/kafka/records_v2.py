"""RecordBatch (magic 2): the 61-byte batch header, CRC32C, varint records with headers, and
control records (transaction markers)."""

from __future__ import annotations

import array as arrays
import struct

from kdissect import accel
from kdissect.errors import BadLength, DecodeError, Truncated
from kdissect.kafka.compression import codec_name
from kdissect.kafka.records_common import (
    LOG_APPEND_TIME,
    Ctx,
    flags_display,
    leaf,
    time_leaf,
)
from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, HEX, RAW, STRUCT, TIME_MS, Field, Row, array
from kdissect.model import struct as mkstruct
from kdissect.text import plural
from kdissect.wire.crc import crc32c
from kdissect.wire.reader import WireReader
from kdissect.wire.varint import varint_at

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_NAMES = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
          "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
          "base_sequence", "records_count")
_SIZES = (8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4)
_OFFSETS = tuple(sum(_SIZES[:i]) for i in range(len(_SIZES)))
_TIMES = {"base_timestamp", "max_timestamp"}
CRC_FROM = 21  # the CRC covers attributes to the end of the batch

TRANSACTIONAL, CONTROL, DELETE_HORIZON = 0x10, 0x20, 0x40
ATTRIBUTE_FLAGS = ((LOG_APPEND_TIME, "log_append_time"), (TRANSACTIONAL, "transactional"),
                   (CONTROL, "control"), (DELETE_HORIZON, "delete_horizon"))
# Control record types (key: int16 version, int16 type). Values of COMMIT/ABORT markers:
# int16 version, int32 coordinator_epoch.
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
MIN_RECORD = 7  # length, attributes, timestamp delta, offset delta, key, value, header count
RECORD_COLUMNS = (("length", None), ("attributes", None), ("timestamp_delta", None), ("offset_delta", None),
                  ("offset", None), ("timestamp", TIME_MS), ("key", BYTES), ("value", BYTES), ("headers", ARRAY))
CONTROL_COLUMNS = (*RECORD_COLUMNS, ("control", STRUCT))
HEADER_COLUMNS = (("key", None), ("value", BYTES))
# A record's and a header's spans are an array of C long long ("q"), not a tuple of ints: one
# object instead of a dozen for each of a capture's millions of records (their offsets are
# mostly past the small ints Python keeps).


def decode_batch(buf: bytes, start: int, end: int, ctx: Ctx, real: bool) -> Field:
    """One RecordBatch in [start, end) (its declared extent, already checked to fit). Its
    compiled twin is kdissect/kafka/_records_v2.pyx, as count_batch's."""
    ctx.batches += 1
    if end - start < HEADER_SIZE:
        ctx.add("records.bad_length", f"record batch of {end - start} bytes is shorter than its header",
                start if real else -1)
        return leaf("undecoded", bytes(buf[start:end]), start, end - start, real, RAW)
    vals = _HEADER.unpack_from(buf, start)
    hdr = dict(zip(_NAMES, vals, strict=True))
    children = [_header_field(n, v, start + o, s, real) for n, v, o, s in zip(_NAMES, vals, _OFFSETS, _SIZES, strict=True)]
    _check_crc(buf, start, end, hdr["crc"], ctx, real)
    children.append(_records(buf, start + HEADER_SIZE, end, hdr, ctx, real))
    attrs = hdr["attributes"]
    label = f"batch base_offset={hdr['base_offset']} records={hdr['records_count']} {flags_display(attrs, ATTRIBUTE_FLAGS)}"
    if attrs & DELETE_HORIZON:
        children[7].label = "base_timestamp (delete horizon)"
    return mkstruct("batch", children, start if real else -1, end - start, label)


def count_batch(buf: bytes, start: int, end: int, ctx: Ctx, real: bool) -> Field:
    """A RecordBatch's header and CRC only: its records are counted, not decoded (and their key
    and value sizes are not summed)."""
    if end - start < HEADER_SIZE:
        return decode_batch(buf, start, end, ctx, real)
    ctx.batches += 1
    vals = _HEADER.unpack_from(buf, start)
    _check_crc(buf, start, end, vals[4], ctx, real)
    count = vals[12]
    ctx.records += max(count, 0)
    label = f"batch base_offset={vals[0]} records={count} (records not decoded)"
    return Field("batch", None, start if real else -1, end - start, None, RAW, None, label)


def _header_field(name: str, value: int, off: int, size: int, real: bool) -> Field:
    if name in _TIMES:
        return time_leaf(name, value, off, size, real)
    if name == "attributes":
        return leaf(name, value, off, size, real, FLAGS, flags_display(value, ATTRIBUTE_FLAGS))
    if name == "crc":
        return leaf(name, value, off, size, real, HEX)
    return leaf(name, value, off, size, real)


def _check_crc(buf: bytes, start: int, end: int, crc: int, ctx: Ctx, real: bool) -> None:
    got = crc32c(memoryview(buf)[start + CRC_FROM : end])
    if got != crc:
        ctx.add("records.crc", f"record batch CRC32C 0x{crc:08x} does not match the computed 0x{got:08x}",
                start + 17 if real else -1)


def _records(buf: bytes, start: int, end: int, hdr: dict[str, int], ctx: Ctx, real: bool) -> Field:
    """The records array: decompressed first when the codec says so."""
    codec = hdr["attributes"] & 0x07
    rbuf, rstart, rend, rreal = buf, start, end, real
    if codec:
        data = ctx.inflate(codec, bytes(buf[start:end]), start if real else -1)
        if data is None:
            return leaf("records_data", bytes(buf[start:end]), start, end - start, real, RAW)
        rbuf, rstart, rend, rreal = data, 0, len(data), False
    count = declared = hdr["records_count"]
    where = start if real else -1
    if count < 0 or count * MIN_RECORD > rend - rstart:
        ctx.add("records.count", f"records_count {count} does not fit in {rend - rstart} bytes", where)
        count = max(0, min(count, (rend - rstart) // MIN_RECORD))
    elements = record_elements(rbuf, rstart, rend, count, declared, hdr["attributes"], hdr["base_offset"],
                               hdr["base_timestamp"], hdr["max_timestamp"], ctx, rreal, where)
    f = array("records", elements, start if real else -1, end - start)
    if codec:
        f.label = f"records ({codec_name(codec)}, {plural(len(rbuf), 'byte')} decompressed)"
    return f


def record_elements(buf: bytes, pos: int, end: int, count: int, declared: int, attributes: int,
                    base_offset: int, base_timestamp: int, max_timestamp: int, ctx: Ctx, real: bool,
                    where: int) -> list[Field]:
    """The records of one batch: up to `count` of them from buf[pos:end] (its header declares
    `declared`; attributes, base offset and timestamps come from it too). `real`: the bytes are
    the message's (else a decompressed buffer: the fields have offset -1 and the diagnostics
    `where`, the offset of the batch's records or -1). Each record is counted in ctx (records,
    key and value bytes) and against the message's budget; past the budget the rest are counted,
    not shown. A record that does not decode ends the list with a diagnostic; bytes after the
    last are noted. Its compiled twin is kdissect/kafka/_records_v2.pyx."""
    r = WireReader(buf, pos, end)
    elements: list[Field] = []
    for i in range(count):
        if ctx.over_limit(where):
            ctx.records += count - i  # counted from the header, not shown
            break
        try:
            elements.append(_record(r, attributes, base_offset, base_timestamp, max_timestamp, ctx, real))
        except DecodeError as e:
            ctx.add("records.truncated", f"record {len(elements)} of {declared}: {e}",
                    e.offset if real else where)
            break
        ctx.records += 1
    else:
        if r.remaining:
            ctx.add("records.trailing",
                    f"{plural(r.remaining, 'byte')} after the last of {count} records", r.pos if real else where)
    return elements


def _blob(buf: bytes, p: int, end: int) -> tuple[bytes | None, int, int]:
    """A varint length (-1: null) and that many bytes: (data, data offset, next offset)."""
    n, p = varint_at(buf, p, end)
    if n == -1:
        return None, p, p
    if n < 0 or p + n > end:
        raise (BadLength if n < 0 else Truncated)(f"length {n} with {end - p} bytes left", p)
    return buf[p : p + n], p, p + n


def _record(r: WireReader, attrs: int, base_offset: int, base_timestamp: int, max_timestamp: int,
            ctx: Ctx, real: bool) -> Field:
    """One record (varint length, attributes, timestamp and offset deltas, key, value,
    headers); `r` moves past it."""
    buf, start = r.buf, r.pos
    length, p = varint_at(buf, start, r.end)
    end = p + length
    if length < 0 or end > r.end:
        raise (BadLength if length < 0 else Truncated)(f"record of {length} bytes, {r.end - p} remain", start)
    at = p
    if p >= end:
        raise Truncated("record without attributes", p)
    p += 1
    ts_delta, p2 = varint_at(buf, p, end)
    off_delta, p3 = varint_at(buf, p2, end)
    key, kat, p = _blob(buf, p3, end)
    value, vat, p = _blob(buf, p, end)
    headers, p = _headers(buf, p, end, real, ctx)
    if p != end:
        raise DecodeError(f"{end - p} bytes after the record's headers", p)
    r.pos = end
    ts = max_timestamp if attrs & LOG_APPEND_TIME else base_timestamp + ts_delta
    offset = base_offset + off_delta
    klen, vlen = len(key or b""), len(value or b"")
    ctx.nbytes += klen + vlen
    values: tuple[object, ...] = (length, buf[at], ts_delta, off_delta, offset, ts, key, value, headers)
    spans = arrays.array("q", (start, at - start, at, 1, at + 1, p2 - at - 1, p2, p3 - p2, p2, p3 - p2,
                               at + 1, p2 - at - 1, kat, klen, vat, vlen, headers.offset, headers.length)) if real else None
    if attrs & CONTROL:
        kf = Field("key", key, kat if real else -1, klen, None, BYTES)
        vf = Field("value", value, vat if real else -1, vlen, None, BYTES)
        if spans is not None:
            spans.extend((-1, 0))
        return Row("record", CONTROL_COLUMNS, (*values, _control(key, value, real, kf, vf)),
                   spans, start if real else -1, end - start, f"offset {offset}")
    return Row("record", RECORD_COLUMNS, values, spans, start if real else -1, end - start, f"offset {offset}")


def _headers(buf: bytes, p: int, end: int, real: bool, ctx: Ctx) -> tuple[Field, int]:
    """A record's headers; each is an element of the message's budget, and out of decompressed
    bytes an entry of the capture's too. Past the message's budget the rest of the record (end)
    is not decoded."""
    start = p
    n, p = varint_at(buf, p, end)
    if n < 0 or 2 * n > end - p:
        raise BadLength(f"header count {n} with {end - p} bytes left", start)
    shown = ctx.budget.elements(n) if n else 0
    if shown < n:
        _header_limit(ctx, n, shown, start if real else -1)
    if not real:
        ctx.budget.decompressed_elements(shown)
    items: list[Field] = []
    for _ in range(shown):
        hstart = p
        kb, kat, p = _blob(buf, p, end)
        if kb is None:
            raise BadLength("null header key", hstart)
        value, vat, p = _blob(buf, p, end)
        spans = arrays.array("q", (kat, len(kb), vat, len(value or b""))) if real else None
        items.append(Row("header", HEADER_COLUMNS, (kb.decode("utf-8", "replace"), value), spans,
                         hstart if real else -1, p - hstart))
    if shown < n:
        p = end
    return Field("headers", None, start if real else -1, p - start, items, ARRAY), p


def _header_limit(ctx: Ctx, n: int, shown: int, offset: int) -> None:
    """Noted once per message: a record with more headers than the message may still decode."""
    if ctx.budget.first("kafka.records.header_limit"):
        ctx.add("records.header_limit",
                f"a record with {plural(n, 'header')}, past the {ctx.budget.elements_limit} elements a message "
                f"may decode: the first {shown} are shown, the rest of the record is not decoded", offset)


def _control(key: bytes | None, value: bytes | None, real: bool, kf: Field, vf: Field) -> Field:
    """A control record's key (version, type) and a marker's value (version, coordinator_epoch)."""
    children: list[Field] = []
    if key is not None and len(key) >= 4:
        ctype = int.from_bytes(key[2:4], "big", signed=True)
        children.append(leaf("version", int.from_bytes(key[0:2], "big", signed=True), kf.offset, 2, real))
        children.append(leaf("type", ctype, kf.offset + 2 if real else -1, 2, real, ENUM,
                             CONTROL_TYPES.get(ctype, f"unknown_{ctype}")))
        if ctype in (0, 1) and value is not None and len(value) >= 6:
            epoch = int.from_bytes(value[2:6], "big", signed=True)
            children.append(leaf("coordinator_epoch", epoch, vf.offset + 2 if real else -1, 4, real))
    # The struct spans the key, the value's length varint and the value.
    length = vf.offset + vf.length - kf.offset if real and value is not None else kf.length + vf.length
    return mkstruct("control", children, kf.offset, length)


accel.bind(globals(), "kdissect.kafka._records_v2", ("decode_batch", "count_batch", "record_elements"))
