"""Record batches and message sets built by an independent encoder (kafka-python's record
builders) decode to the same values; header fields, attributes, control records, timestamps,
relative offsets, the broker's cut versus a truncation, CRC mismatches, decompression caps."""

from __future__ import annotations

import array
import struct
import zlib
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kdissect.dissect import base
from kdissect.dissect.base import Options
from kdissect.kafka.records import decode_records
from kdissect.model import ARRAY, FLAGS, TIME_MS, Diagnostic, Field, Group, Row, Severity, format_ms
from kdissect.model import format_ms as time_display

OPTS = Options()
TS = 1700000000000
Rec = tuple[int, Any, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


# -- helpers ---------------------------------------------------------------------------


def v2_batch(codec: int = 0, transactional: bool = False, base_offset: int = 0, n: int = 4,
             producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, transactional, *producer, batch_size=1 << 20)
    for i in range(n):
        key = None if i == 1 else b"key-%d" % i
        value = None if i == 2 else b"value %d " % i * (i + 1)
        headers = [("h1", b"v1"), ("empty", b""), ("nullhdr", None)] if i % 2 == 0 else []
        b.append(i, TS + i * 10, key, value, headers)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)  # the offset is outside the CRC
    return bytes(data)


def legacy_set(magic: int, codec: int, n: int = 3, wrapper_offset: int | None = None) -> bytes:
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(n):
        b.append(i, TS + i if magic else None, b"k%d" % i if i != 1 else None, b"legacy value %d" % i)
    data = bytearray(b.build())
    if wrapper_offset is not None:
        struct.pack_into(">q", data, 0, wrapper_offset)
    return bytes(data)


def recrc_v2(data: bytearray, at: int = 0) -> None:
    size = struct.unpack_from(">i", data, at + 8)[0]
    struct.pack_into(">I", data, at + 17, crc32c.crc32c(bytes(data[at + 21 : at + 12 + size])))


def decode(data: bytes, opts: Options = OPTS, **kw: Any) -> tuple[Field, list[Diagnostic], dict[str, int]]:
    return decode_records(data, 0, len(data), opts, **kw)


def _headers(r: Field) -> list[tuple[str, bytes | None]]:
    h = r.child("headers")
    return [(x.children[0].value, x.children[1].value) for x in (h.children or [])] if h and h.children else []


def _rec(r: Field) -> Rec:
    ts = r.child("timestamp")
    return (r.get("offset"), ts.value if ts else None, r.get("key"), r.get("value"), _headers(r))


def ours(f: Field) -> list[Rec]:
    out: list[Rec] = []
    for b in f.children or []:
        if b.name not in ("batch", "message"):
            continue
        inner = b.child("records")
        if b.name == "batch" or inner is not None:
            out += [_rec(r) for r in (inner.children if inner and inner.children else [])]
        else:
            out.append(_rec(b))
    return out


def oracle(data: bytes) -> list[Rec]:
    """kafka-python's own reading of the same bytes."""
    mr = MemoryRecords(data)
    out: list[Rec] = []
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers or [])))
    return out


def keys(diags: list[Diagnostic]) -> list[str]:
    return [d.key for d in diags]


# -- agreement with kafka-python -------------------------------------------------------


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("transactional", [False, True])
def test_v2_batches_match_kafka_python(codec: int, transactional: bool) -> None:
    data = v2_batch(codec, transactional, base_offset=1000, producer=(42, 3, 17)) + v2_batch(codec, base_offset=1004)
    f, diags, stats = decode(data)
    assert diags == []
    assert ours(f) == oracle(data)
    assert stats == {"records": 8, "batches": 2, "bytes": sum(len(r[2] or b"") + len(r[3] or b"") for r in oracle(data))}
    assert [r[0] for r in ours(f)] == list(range(1000, 1008))


@pytest.mark.parametrize("magic,codec", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_legacy_message_sets_match_kafka_python(magic: int, codec: int) -> None:
    data = legacy_set(magic, codec) + legacy_set(magic, 0)
    f, diags, stats = decode(data)
    assert diags == []
    assert ours(f) == oracle(data)
    assert stats["records"] == 6
    assert stats["batches"] == (6 if codec == 0 else 1 + 3)


# -- RecordBatch header and attributes -------------------------------------------------


def test_v2_header_fields_and_displays() -> None:
    data = v2_batch(3, True, base_offset=77, producer=(9001, 2, 5))
    f, _, _ = decode(data)
    b = f.children[0]
    names = [c.name for c in b.children]
    assert names == ["base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
                     "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                     "producer_epoch", "base_sequence", "records_count", "records"]
    assert (b.get("base_offset"), b.get("batch_length"), b.get("magic")) == (77, len(data) - 12, 2)
    assert (b.get("producer_id"), b.get("producer_epoch"), b.get("base_sequence")) == (9001, 2, 5)
    assert (b.get("last_offset_delta"), b.get("records_count")) == (3, 4)
    attrs = b.child("attributes")
    assert attrs is not None and attrs.hint == FLAGS and attrs.display == "lz4|transactional"
    ts = b.child("base_timestamp")
    assert ts is not None and ts.hint == TIME_MS and format_ms(ts.value) == "2023-11-14T22:13:20.000Z"
    assert format_ms(b.child("max_timestamp").value) == "2023-11-14T22:13:20.030Z"  # type: ignore[union-attr]
    assert b.child("crc").offset == 17 and b.child("crc").value == crc32c.crc32c(data[21:])  # type: ignore[union-attr]


def test_v2_record_fields_are_offsets_into_the_message() -> None:
    data = b"\xaa" * 5 + v2_batch(0, base_offset=10) + b"\xbb" * 3
    f, diags, _ = decode_records(data, 5, len(data) - 3, OPTS)
    assert diags == []
    rec = f.children[0].child("records").children[0]  # type: ignore[union-attr,index]
    key = rec.child("key")
    assert key is not None and data[key.offset : key.offset + key.length] == b"key-0"
    hdr = rec.child("headers").children[0]  # type: ignore[union-attr,index]
    assert [c.value for c in hdr.children] == ["h1", b"v1"]  # type: ignore[union-attr]
    assert rec.get("timestamp") == TS and format_ms(rec.child("timestamp").value) == "2023-11-14T22:13:20.000Z"  # type: ignore[union-attr]


def test_v2_record_spans_are_one_array_of_long_longs() -> None:
    # A record's and a header's spans are one array("q"), not a tuple of a dozen ints (one
    # object a record, not one per offset), and still give their Fields' offsets.
    data = b"\xaa" * 5 + v2_batch(0, base_offset=10)
    f, _, _ = decode_records(data, 5, len(data), OPTS)
    rec = f.children[0].child("records").children[0]  # type: ignore[union-attr,index]
    assert type(rec) is Row and not rec.materialized
    hdr = rec.values[8].children[0]
    for row, n in ((rec, 18), (hdr, 4)):
        assert type(row.spans) is array.array and row.spans.typecode == "q" and len(row.spans) == n
    assert [rec.spans[12], rec.spans[13]] == [data.index(b"key-0"), 5]
    assert [(c.offset, c.length) for c in rec.children] == [(rec.spans[2 * i], rec.spans[2 * i + 1]) for i in range(9)]
    assert [(c.offset, c.length) for c in hdr.children] == [(hdr.spans[0], 2), (hdr.spans[2], 2)]


def test_compressed_records_have_no_message_offsets() -> None:
    f, _, _ = decode(v2_batch(1))
    recs = f.children[0].child("records")  # type: ignore[index]
    assert recs is not None and recs.offset == 61 and recs.hint == ARRAY
    assert all(c.offset == -1 for r in recs.children or [] for c in r.children or [])


def test_log_append_time_uses_max_timestamp() -> None:
    data = bytearray(v2_batch(0))
    struct.pack_into(">h", data, 21, 0x08)
    struct.pack_into(">q", data, 35, TS + 99999)
    recrc_v2(data)
    f, diags, _ = decode(bytes(data))
    assert diags == []
    assert [r[1] for r in ours(f)] == [TS + 99999] * 4
    assert f.children[0].child("attributes").display == "log_append_time"  # type: ignore[union-attr,index]


def test_delete_horizon_flag() -> None:
    data = bytearray(v2_batch(0))
    struct.pack_into(">h", data, 21, 0x40)
    recrc_v2(data)
    f, diags, _ = decode(bytes(data))
    b = f.children[0]
    assert diags == [] and b.child("attributes").display == "delete_horizon"  # type: ignore[union-attr]
    assert b.child("base_timestamp").label == "base_timestamp (delete horizon)"  # type: ignore[union-attr]


@pytest.mark.parametrize("ctype,name", [(0, "ABORT"), (1, "COMMIT")])
def test_control_record_markers(ctype: int, name: str) -> None:
    b = DefaultRecordBatchBuilder(2, 0, True, 5000, 4, -1, 1 << 20)
    b.append(0, TS, struct.pack(">hh", 0, ctype), struct.pack(">hi", 0, 23), [])
    data = bytearray(b.build())
    struct.pack_into(">h", data, 21, 0x30)
    recrc_v2(data)
    f, diags, stats = decode(bytes(data))
    assert diags == [] and stats["records"] == 1
    batch = f.children[0]
    assert batch.child("attributes").display == "transactional|control"  # type: ignore[union-attr]
    row = batch.child("records").children[0]  # type: ignore[union-attr,index]
    assert type(row.spans) is array.array and row.spans.typecode == "q" and list(row.spans[-2:]) == [-1, 0]
    ctrl = row.child("control")
    assert ctrl is not None
    assert [(c.name, c.value, c.display) for c in ctrl.children or []] == [
        ("version", 0, None), ("type", ctype, name), ("coordinator_epoch", 23, None)]


# -- MessageSet ------------------------------------------------------------------------


def test_magic1_wrapper_relative_offsets() -> None:
    data = legacy_set(1, 1, n=3, wrapper_offset=41)
    f, diags, _ = decode(data)
    assert diags == []
    inner = f.children[0].child("records")  # type: ignore[index]
    assert inner is not None
    assert [(m.get("offset"), m.get("relative_offset")) for m in inner.children or []] == [(39, 0), (40, 1), (41, 2)]
    assert f.children[0].child("attributes").display == "gzip"  # type: ignore[union-attr,index]


def test_magic1_wrapper_log_append_time_overrides_inner_timestamps() -> None:
    data = bytearray(legacy_set(1, 1, n=2, wrapper_offset=1))
    data[17] |= 0x08
    struct.pack_into(">q", data, 18, TS + 5000)
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    f, diags, _ = decode(bytes(data))
    assert diags == []
    assert [r[1] for r in ours(f)] == [TS + 5000, TS + 5000]


def test_magic0_fields() -> None:
    data = legacy_set(0, 0, n=1)
    f, diags, stats = decode(data)
    m = f.children[0]
    assert diags == [] and stats == {"records": 1, "batches": 1, "bytes": 2 + 14}
    assert [c.name for c in m.children or []] == ["offset", "message_size", "crc", "magic", "attributes", "key", "value"]
    assert m.get("value") == b"legacy value 0" and m.get("crc") == zlib.crc32(data[16:])


# -- cut at the fetch size versus truncation ----------------------------------------------


@pytest.mark.parametrize("make", [lambda: v2_batch(0), lambda: v2_batch(4), lambda: legacy_set(1, 0, n=1),
                                  lambda: legacy_set(0, 2)])
def test_partial_entry_at_the_end_is_a_note(make: Any) -> None:
    first, second = make(), make()
    for cut in range(1, len(second)):
        f, diags, stats = decode(first + second[:cut])
        assert [(d.severity, d.key) for d in diags] == [(Severity.NOTE, "kafka.records.partial")], cut
        assert f.children[-1].name == "partial" and f.children[-1].offset == len(first)
        assert ours(f) == oracle(first)


def test_partial_entry_in_a_request_is_an_error() -> None:
    data = v2_batch(0)
    _, diags, _ = decode(data[:-3], partial_ok=False)
    assert [(d.severity, d.group, d.key) for d in diags] == [(Severity.ERROR, Group.MALFORMED, "kafka.records.truncated")]


def test_truncation_inside_a_batch_whose_length_fits_is_an_error() -> None:
    data = bytearray(v2_batch(0))
    cut = 9
    struct.pack_into(">i", data, 8, len(data) - 12 - cut)
    data = data[:-cut]
    recrc_v2(data)
    f, diags, stats = decode(bytes(data))
    assert [(d.severity, d.key) for d in diags] == [(Severity.ERROR, "kafka.records.truncated")]
    assert stats["records"] == 3 and len(f.children[0].child("records").children) == 3  # type: ignore[union-attr,arg-type]


def test_records_count_larger_than_the_bytes_allow() -> None:
    data = bytearray(v2_batch(0))
    struct.pack_into(">i", data, 57, 1_000_000)
    recrc_v2(data)
    _, diags, stats = decode(bytes(data))
    assert keys(diags)[0] == "kafka.records.count" and stats["records"] == 4


# -- checksums, codecs, caps -----------------------------------------------------------


def test_v2_crc_mismatch_is_a_checksum_error() -> None:
    data = bytearray(v2_batch(0))
    data[data.index(b"value 3")] ^= 0x20
    f, diags, _ = decode(bytes(data))
    assert [(d.severity, d.group, d.offset) for d in diags] == [(Severity.ERROR, Group.CHECKSUM, 17)]
    assert ours(f)[3][3] == b"Value 3 " + b"value 3 " * 3  # still decoded


def test_legacy_crc_mismatch_is_a_checksum_error() -> None:
    data = bytearray(legacy_set(1, 0, n=1))
    data[-1] ^= 0x01
    _, diags, _ = decode(bytes(data))
    assert [(d.group, d.key) for d in diags] == [(Group.CHECKSUM, "kafka.records.crc")]


def test_decompression_cap() -> None:
    b = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 30)
    b.append(0, TS, None, bytes(4 << 20), [])
    data = bytes(b.build())
    f, diags, stats = decode(data, Options(max_decompressed=1 << 20))
    assert [(d.severity, d.group, d.key) for d in diags] == [
        (Severity.WARNING, Group.UNDECODED, "kafka.records.decompression_cap")]
    assert f.children[0].child("records_data") is not None and stats["records"] == 0  # type: ignore[index]


def test_corrupt_compressed_payload() -> None:
    data = bytearray(v2_batch(4))
    data[70] ^= 0xFF
    recrc_v2(data)
    _, diags, _ = decode(bytes(data))
    assert keys(diags) == ["kafka.records.decompress"]


def test_unknown_magic_and_tiny_length() -> None:
    data = bytearray(v2_batch(0))
    data[16] = 7
    _, diags, _ = decode(bytes(data))
    assert keys(diags) == ["kafka.records.magic"]
    _, diags, _ = decode(struct.pack(">qi", 0, 3) + b"abc")
    assert keys(diags) == ["kafka.records.bad_length"]


def test_record_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ENTRIES", 7)
    f, diags, stats = decode(v2_batch(0) + v2_batch(0) + v2_batch(0))
    # 7 shown: batch, 4 records, batch, 1 record; the rest counted from the batch headers
    assert keys(diags) == ["kafka.records.limit"] and (stats["records"], stats["batches"]) == (12, 3)
    assert [len(b.child("records").children or []) for b in f.children or []] == [4, 1]
    tiny = struct.pack(">qiib", 0, 14, 0, 2) + bytes(9)  # impossible RecordBatches, 26 bytes each
    _, diags, stats = decode(tiny * 50)
    assert keys(diags).count("kafka.records.bad_length") == 7 and keys(diags)[-1] == "kafka.records.limit"


def test_record_headers_spend_the_element_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 5)
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 20)
    b.append(0, TS, b"k", b"v", [(f"h{i}", b"x") for i in range(4)])
    b.append(1, TS, b"k", b"v", [(f"g{i}", None) for i in range(1000)])
    b.append(2, TS, b"k", b"v", [("late", b"y")])
    f, diags, stats = decode(b.build())
    recs = f.children[0].child("records").children  # type: ignore[index,union-attr]
    # 4 headers, then 1 of the 1000 (the rest of that record is skipped), then none
    assert [len(r.child("headers").children) for r in recs] == [4, 1, 0]
    assert [(r.get("offset"), r.get("value")) for r in recs] == [(0, b"v"), (1, b"v"), (2, b"v")]
    assert keys(diags) == ["kafka.records.header_limit"] and stats["records"] == 3
    assert "1000 headers" in diags[0].message and "the first 1 are shown" in diags[0].message


def test_decode_records_off_keeps_raw_bytes() -> None:
    data = v2_batch(0)
    f, diags, stats = decode(data, Options(decode_records=False))
    assert f.value == data and f.children is None and stats["records"] == 0 and diags == []


def test_empty_records() -> None:
    f, diags, stats = decode(b"")
    assert f.children == [] and diags == [] and stats == {"records": 0, "batches": 0, "bytes": 0}


def test_time_display() -> None:
    assert time_display(0) == "1970-01-01T00:00:00.000Z"
    assert time_display(1700000000123) == "2023-11-14T22:13:20.123Z"
    assert time_display(-1) == "none"
    assert time_display(-5) is None and time_display(1 << 62) is None
