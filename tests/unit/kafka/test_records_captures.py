"""Records in real captures: every batch or message whose CRC checks out decodes without a
diagnostic and to the same values kafka-python reads from the same bytes, plus field-level
facts about what the capturing scripts produced (keys, null keys and values, headers, explicit
timestamps, codecs, relative offsets, the pre-0.10 lz4 header, control records, 300 KB values).

The bytes come from the captures through dpkt and a plain per-direction TCP concatenation, so
these tests do not depend on the project's pipeline (except the last ones, marked as such)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import crc32c
import dpkt
import lz4.frame
import pytest
from kafka.record.memory_records import MemoryRecords
from support import SHARED_CAPTURES

from kdissect.dissect.base import Options
from kdissect.kafka.records import decode_records
from kdissect.model import Field, Group, Severity, format_ms

ROOT = Path(__file__).resolve().parents[3]
SHARED = SHARED_CAPTURES / "kafka"
OWN = ROOT / "captures" / "kafka"
OPTS = Options()
Rec = tuple[int, object, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def capture(name: str) -> Path:
    for d in (SHARED, OWN):
        if (d / name).exists():
            return d / name
    pytest.skip(f"{name} is not present")


# -- bytes out of a capture ----------------------------------------------------------------


def _ip_of(linktype: int, raw: bytes) -> object:
    if linktype == 1:
        return dpkt.ethernet.Ethernet(raw).data
    if linktype == 113:
        return dpkt.sll.SLL(raw).data
    if linktype == 276:  # Linux cooked v2: a 20-byte header
        return dpkt.ip.IP(raw[20:])
    return dpkt.ip.IP(raw)


def streams(path: Path) -> list[bytes]:
    """The payload of each TCP direction, in sequence order, retransmissions dropped."""
    with open(path, "rb") as f:
        reader = dpkt.pcapng.Reader(f) if path.suffix == ".pcapng" else dpkt.pcap.Reader(f)
        segs: dict[tuple[object, ...], dict[int, bytes]] = {}
        for _, raw in reader:
            ip = _ip_of(reader.datalink(), raw)
            tcp = getattr(ip, "data", None)
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.data:
                key = (bytes(ip.src), tcp.sport, bytes(ip.dst), tcp.dport)  # type: ignore[attr-defined]
                segs.setdefault(key, {}).setdefault(tcp.seq, bytes(tcp.data))
    out = []
    for parts in segs.values():
        seq = min(parts)
        buf = bytearray()
        for s in sorted(parts):
            if s + len(parts[s]) > seq >= s:
                buf += parts[s][seq - s :]
                seq = s + len(parts[s])
        out.append(bytes(buf))
    return out


def kafka_messages(path: Path) -> Iterator[bytes]:
    for data in streams(path):
        pos = 0
        while pos + 4 <= len(data):
            n = struct.unpack_from(">i", data, pos)[0]
            if n < 0 or pos + 4 + n > len(data):
                break
            yield data[pos : pos + 4 + n]
            pos += 4 + n


def entries(msg: bytes) -> Iterator[tuple[int, int]]:
    """[start, end) of each batch or message in `msg` whose CRC checks out."""
    for p in range(4, len(msg) - 26):
        magic = msg[p + 16]
        size = struct.unpack_from(">i", msg, p + 8)[0]
        if magic > 2 or size < 14 or p + 12 + size > len(msg):
            continue
        end = p + 12 + size
        if magic == 2:
            ok = size >= 49 and crc32c.crc32c(msg[p + 21 : end]) == struct.unpack_from(">I", msg, p + 17)[0]
        else:
            ok = zlib.crc32(msg[p + 16 : end]) == struct.unpack_from(">I", msg, p + 12)[0]
        if ok:
            yield p, end


def all_entries(path: Path) -> list[tuple[bytes, int, int]]:
    return [(m, s, e) for m in kafka_messages(path) for s, e in entries(m)]


# -- reading our fields ------------------------------------------------------------------


def _rec(r: Field) -> Rec:
    h = r.child("headers")
    headers = [(x.children[0].value, x.children[1].value) for x in (h.children or [])] if h else []  # type: ignore[index]
    ts = r.child("timestamp")
    return (r.get("offset"), ts.value if ts else None, r.get("key"), r.get("value"), headers)


def records_of(f: Field) -> list[Rec]:
    out: list[Rec] = []
    for b in f.children or []:
        inner = b.child("records")
        if inner is not None:
            out += [_rec(r) for r in inner.children or []]
        elif b.name == "message":
            out.append(_rec(b))
    return out


def oracle(data: bytes) -> list[Rec]:
    mr = MemoryRecords(data)
    out: list[Rec] = []
    while (batch := mr.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers or [])) for r in batch]
    return out


def decode_capture(name: str) -> list[tuple[Field, bytes, int]]:
    out = []
    for msg, s, e in all_entries(capture(name)):
        f, diags, _ = decode_records(msg, s, e, OPTS)
        assert diags == [], (name, s, diags)
        out.append((f, msg, s))
    return out


# -- every verified batch of every capture -------------------------------------------------

WITH_RECORDS = [
    "gen__mock_ck_codec_none.pcap", "gen__mock_ck_codec_gzip.pcap", "gen__mock_ck_codec_snappy.pcap",
    "gen__mock_ck_codec_lz4.pcap", "gen__mock_ck_codec_zstd.pcap", "gen__mock_ck_msgset_v1.pcap",
    "gen__mock_ck_old_protocol_v0.pcap", "gen__mock_ck_produce_basic.pcap", "gen__mock_ck_idempotent.pcap",
    "gen__mock_kp_basic.pcap", "gen__mock_kp_api_0_10.pcap", "gen__mock_kp_api_0_8_2.pcap",
    "segmentio__kafka-go__v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.pcapng", "segmentio__kafka-go__v1c-v1c.pcapng",
    "segmentio__kafka-go__v2c-v2c.pcapng", "segmentio__kafka-go__v2bc-v1-v1c.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__fetch.pcapng", "deepflowio__deepflow__00-produce-v9.pcap",
    "mock_ck_msgset_v1_codecs.pcap", "mock_ck_transactions.pcap", "mock_ck_large_values.pcap",
]


@pytest.mark.parametrize("name", WITH_RECORDS)
def test_capture_batches_match_kafka_python(name: str) -> None:
    decoded = decode_capture(name)
    assert decoded, "no verified batch found"
    for f, msg, s in decoded:
        end = s + f.length
        assert records_of(f) == oracle(msg[s:end]), (name, s)


# -- field-level facts -----------------------------------------------------------------------


def _all_records(name: str) -> list[Rec]:
    return [r for f, _, _ in decode_capture(name) for r in records_of(f)]


def test_produce_basic_keys_nulls_headers_and_timestamps() -> None:
    decoded = decode_capture("gen__mock_ck_produce_basic.pcap")
    recs = [r for f, _, _ in decoded for r in records_of(f)]
    # the script's explicit timestamps: 1700000000000 + i, key b"k", value b"ts-msg-<i>"
    explicit = sorted((r[1], r[3]) for r in recs if r[2] == b"k")
    assert explicit == [(1700000000000 + i, b"ts-msg-%d" % i) for i in range(6)]
    assert (None, b"msg-4 payload " + b"x" * 12) in [(r[2], r[3]) for r in recs]  # null key
    assert (b"key-6", None) in [(r[2], r[3]) for r in recs]  # null value
    hdrs = [r[4] for r in recs if r[2] == b"key-3"]
    assert hdrs == [[("h1", b"v1"), ("trace-id", b"3"), ("empty", b""), ("nullhdr", None)]]
    ts_field = next(
        r.child("timestamp") for f, _, _ in decoded for b in f.children or []
        for r in b.child("records").children or [] if r.get("key") == b"k" and r.get("value") == b"ts-msg-3"  # type: ignore[union-attr]
    )
    assert ts_field is not None and format_ms(ts_field.value) == "2023-11-14T22:13:20.003Z"


@pytest.mark.parametrize("codec,bit", [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_codec_captures(codec: str, bit: int) -> None:
    decoded = decode_capture(f"gen__mock_ck_codec_{codec}.pcap")
    batches = [b for f, _, _ in decoded for b in f.children or []]
    assert {b.get("attributes") & 7 for b in batches} == {bit}  # type: ignore[operator]
    assert {b.child("attributes").display for b in batches} == {codec}  # type: ignore[union-attr]
    values = {r[3] for f, _, _ in decoded for r in records_of(f)}
    expected = {b"%s-%d payload %s" % (codec.encode(), i, b"x" * (i * 3)) for i in range(60) if i % 7 != 6}
    assert expected <= values and None in values


def test_msgset_v1_snappy_wrappers_with_relative_offsets() -> None:
    wrappers = [b for f, _, _ in decode_capture("gen__mock_ck_msgset_v1.pcap") for b in f.children or []
                if b.get("attributes")]
    assert wrappers and {w.child("attributes").display for w in wrappers} == {"snappy"}  # type: ignore[union-attr]
    for w in wrappers:
        inner = w.child("records").children  # type: ignore[union-attr]
        assert inner and {m.get("magic") for m in inner} == {1}
        rel = [m.get("relative_offset") for m in inner]
        assert rel == list(range(len(inner)))
        offsets = [m.get("offset") for m in inner]
        if w.get("offset"):  # stored by the broker: the wrapper carries the last inner offset
            assert offsets[-1] == w.get("offset") and offsets == list(range(offsets[0], offsets[0] + len(inner)))


def test_old_protocol_v0_gzip_wrappers() -> None:
    batches = [b for f, _, _ in decode_capture("gen__mock_ck_old_protocol_v0.pcap") for b in f.children or []]
    wrappers = [b for b in batches if b.get("attributes") == 1]
    assert wrappers and {b.get("magic") for b in batches} == {0}
    assert all(m.child("timestamp") is None for w in wrappers for m in w.child("records").children or [])  # type: ignore[union-attr]


def test_magic0_lz4_with_the_pre_010_header_checksum() -> None:
    decoded = decode_capture("mock_ck_msgset_v0_codecs.pcap")
    lz4_msgs = [b for f, _, _ in decoded for b in f.children or [] if b.get("attributes") == 3]
    assert len(lz4_msgs) == 1 and lz4_msgs[0].get("magic") == 0
    frame = lz4_msgs[0].get("compressed")
    with pytest.raises(RuntimeError):  # a standard lz4 decoder refuses the frame
        lz4.frame.decompress(frame)
    inner = lz4_msgs[0].child("records").children  # type: ignore[union-attr]
    assert [(m.get("key"), m.get("value")) for m in inner or []] == [
        (b"lz4-key-0", b"lz4 value 0 "), (b"lz4-key-1", b"lz4 value 1 " * 2),
        (b"lz4-key-2", b"lz4 value 2 " * 3), (None, b"lz4 value 3 " * 4)]


def test_msgset_v1_codecs_produced_by_the_client() -> None:
    decoded = decode_capture("mock_ck_msgset_v1_codecs.pcap")
    codecs = {b.child("attributes").display for f, _, _ in decoded for b in f.children or []}  # type: ignore[union-attr]
    assert codecs == {"none", "gzip", "snappy", "lz4"}


def test_large_value() -> None:
    recs = _all_records("mock_ck_large_values.pcap")
    assert len(recs) == 2  # the Produce request and the Fetch response
    for _, _, key, value, _ in recs:
        assert key == b"big" and value is not None and len(value) == 300_000
        assert value.endswith(b"large-value|large-value|")


# -- through the pipeline --------------------------------------------------------------------


def _pipeline_messages(name: str) -> list[object]:
    import json

    from kdissect.pipeline import dissect_file
    from kdissect.protocols import DissectorRegistry

    path = capture(name)
    ports = json.loads(path.with_suffix(".json").read_text())["ports"]
    return list(dissect_file(str(path), DissectorRegistry(decode_as={p: "kafka" for p in ports})))


def _walk(fields: list[Field]) -> Iterator[Field]:
    for f in fields:
        yield f
        yield from _walk(f.children or [])


def test_transaction_markers_in_fetch_responses() -> None:
    """The mock writes COMMIT/ABORT control batches (with a CRC of 0: a checksum error)."""
    markers = []
    for m in _pipeline_messages("mock_ck_transactions.pcap"):
        for f in _walk(m.fields):  # type: ignore[attr-defined]
            if f.name == "control":
                markers.append(tuple(c.display or c.value for c in f.children or []))
                crc = [d for d in m.diagnostics if d.key == "kafka.records.crc"]  # type: ignore[attr-defined]
                assert [(d.severity, d.group) for d in crc] == [(Severity.ERROR, Group.CHECKSUM)]
    assert sorted(set(markers)) == [(0, "ABORT", 0), (0, "COMMIT", 0)]


def test_large_value_spans_many_segments() -> None:
    kinds = []
    for m in _pipeline_messages("mock_ck_large_values.pcap"):
        values = [f.value for f in _walk(m.fields) if f.name == "value" and isinstance(f.value, bytes)]  # type: ignore[attr-defined]
        if any(len(v) == 300_000 for v in values):
            assert len(m.frames) > 3 and not m.diagnostics  # type: ignore[attr-defined]
            kinds.append(m.kind)  # type: ignore[attr-defined]
    assert sorted(kinds) == ["request", "response"]
