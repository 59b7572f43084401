from __future__ import annotations

import struct
import zlib

import lz4.block
import pytest
import snappy
import zstandard
from pulsar_testlib import MESSAGE, SEND, batch, keys, payload_frame, pb, root, run, value

from kdissect.dissect.base import Options
from kdissect.model import Group, Severity

SEND_BODY = pb((1, 1), (2, 42), (3, 3))


def _meta(*extra: tuple[int, object]) -> bytes:
    return pb((1, "prod"), (2, 42), (3, 1700000000000), *extra)  # type: ignore[arg-type]


def _smm(key: str, size: int, *extra: tuple[int, object]) -> bytes:
    return pb((1, [pb((1, "k"), (2, key))]), (2, f"pk-{key}"), (3, size), *extra)  # type: ignore[arg-type]


BATCH = batch(
    (_smm("a", 5, (5, 1700000000001), (7, b"ord")), b"first"),
    (_smm("b", 6, (8, 43)), b"second"),
    (_smm("c", 0, (9, True)), b""),
)


def test_plain_payload_checksum_correct() -> None:
    msg = run(payload_frame(SEND, SEND_BODY, _meta((6, "key-1")), b"hello"))
    assert value(msg, "checksum_status") == "correct"
    assert value(msg, "payload") == b"hello"
    assert value(msg, "metadata.partition_key") == "key-1"
    assert value(msg, "metadata.producer_name") == "prod"
    assert msg.summary == "SEND producer=1 seq=42 1 message"
    assert not [d for d in msg.diagnostics if d.severity == Severity.ERROR]


def test_checksum_mismatch_is_a_checksum_error() -> None:
    msg = run(payload_frame(SEND, SEND_BODY, _meta(), b"hello", crc=0x12345678))
    bad = [d for d in msg.diagnostics if d.group == Group.CHECKSUM]
    assert len(bad) == 1 and bad[0].severity == Severity.ERROR and bad[0].key == "pulsar.checksum"
    assert value(msg, "checksum") == 0x12345678
    assert str(value(msg, "checksum_status")).startswith("incorrect")
    assert value(msg, "payload") == b"hello"  # still decoded


def test_uncompressed_batch_split() -> None:
    msg = run(payload_frame(SEND, SEND_BODY, _meta((11, 3)), BATCH))
    msgs = root(msg, "messages")
    assert msgs is not None and len(msgs.children or []) == 3
    first, second, third = msgs.children or []
    assert first.get("payload") == b"first" and first.get("partition_key") == "pk-a"
    assert first.get("properties.key") == "k" and first.get("properties.value") == "a"
    assert first.get("event_time") == 1700000000001 and first.get("ordering_key") == b"ord"
    assert second.get("sequence_id") == 43 and second.get("payload") == b"second"
    assert third.get("null_value") is True and third.get("payload") is None
    # offsets point into the frame for an uncompressed batch
    data = msg.data
    p = next(c for c in second.children or [] if c.name == "payload")
    assert data[p.offset : p.offset + p.length] == b"second"
    assert msg.summary == "SEND producer=1 seq=42 3 messages"


CODECS = {
    1: ("lz4", lambda b: lz4.block.compress(b, store_size=False)),
    2: ("zlib", zlib.compress),
    3: ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
    4: ("snappy", snappy.compress),
}


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches(codec: int) -> None:
    name, compress = CODECS[codec]
    body = compress(BATCH)
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, codec), (9, len(BATCH)), (11, 3)), body))
    assert [d for d in msg.diagnostics if d.severity == Severity.ERROR] == []
    msgs = root(msg, "messages")
    assert msgs is not None
    assert [c.get("payload") for c in msgs.children or []] == [b"first", b"second", None]
    assert msg.summary == f"SEND producer=1 seq=42 3 messages ({name})"


def test_compressed_single_message() -> None:
    text = b"x" * 300
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 300)), zlib.compress(text)))
    p = root(msg, "payload")
    assert p is not None and p.value == text and p.label and "zlib" in p.label


def test_uncompressed_size_mismatch_and_corruption() -> None:
    body = zlib.compress(b"abc" * 10)
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 31)), body))
    assert "pulsar.decompress" in keys(msg)
    assert value(msg, "payload") == body  # kept compressed
    bad = run(payload_frame(SEND, SEND_BODY, _meta((8, 1), (9, 100)), b"\xff" * 20))
    assert "pulsar.decompress" in keys(bad)


def test_decompression_cap() -> None:
    body = zlib.compress(b"z" * 5000)
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 5000)), body), opts=Options(max_decompressed=1000))
    d = [d for d in msg.diagnostics if d.key == "pulsar.decompress_cap"]
    assert len(d) == 1 and d[0].group == Group.UNDECODED
    assert value(msg, "payload") == body


def test_snappy_declared_size_is_capped_before_decompressing() -> None:
    bogus = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # claims 4 GB
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, 4), (9, 10)), bogus), opts=Options(max_decompressed=1000))
    assert "pulsar.decompress" in keys(msg)


def test_decompress_messages() -> None:
    body = zlib.compress(b"abc" * 10)
    short = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 31)), body))
    long = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 20)), body))
    bogus = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # snappy, claims 4 GB
    huge = run(payload_frame(SEND, SEND_BODY, _meta((8, 4), (9, 10)), bogus), opts=Options(max_decompressed=1000))
    one = run(payload_frame(SEND, SEND_BODY, _meta((8, 2), (9, 2)), zlib.compress(b"a")))
    assert [[d.message for d in m.diagnostics if d.key == "pulsar.decompress"] for m in (short, long, huge, one)] == [
        ["zlib: 30 bytes decompressed, metadata says 31"],
        ["zlib: 21 bytes decompressed, metadata says 20"],
        ["snappy: declared size 4294967295 exceeds the cap of 1000 bytes"],
        ["zlib: 1 byte decompressed, metadata says 2"],
    ]


def test_a_missing_library_is_a_diagnostic(monkeypatch: pytest.MonkeyPatch) -> None:
    from kdissect.wire import codecs

    monkeypatch.setitem(codecs._LIBS, "zstandard", False)
    body = zstandard.ZstdCompressor().compress(BATCH)
    msg = run(payload_frame(SEND, SEND_BODY, _meta((8, 3), (9, len(BATCH)), (11, 3)), body))
    d = [d for d in msg.diagnostics if d.key == "pulsar.codec_unavailable"]
    assert len(d) == 1 and d[0].group == Group.UNDECODED and d[0].severity == Severity.WARNING
    assert d[0].message == "zstd: the zstandard package is not installed: payload not decoded"
    assert value(msg, "payload") == body


def test_encrypted_payload_is_marked() -> None:
    enc = pb((1, "key-a"), (2, b"\x01\x02"))
    msg = run(payload_frame(SEND, SEND_BODY, _meta((13, [enc, pb((1, "key-b"), (2, b"\x03"))]), (8, 1), (9, 50)),
                            b"\x99" * 20))
    assert "pulsar.encrypted" in keys(msg)
    p = root(msg, "payload")
    assert p is not None and p.value == b"\x99" * 20 and p.label == "payload (encrypted)"
    assert value(msg, "metadata.encryption_keys.key") == "key-a"
    assert msg.summary == "SEND producer=1 seq=42 1 message (lz4, encrypted)"
    assert "key-a, key-b" in next(d.message for d in msg.diagnostics if d.key == "pulsar.encrypted")


def test_chunk_is_shown_not_decompressed() -> None:
    meta = _meta((8, 1), (9, 5000), (26, "uuid-1"), (27, 3), (28, 4000), (29, 1))
    msg = run(payload_frame(SEND, SEND_BODY, meta, b"\x00" * 30))
    assert value(msg, "metadata.uuid") == "uuid-1"
    assert value(msg, "metadata.chunk_id") == 1 and value(msg, "metadata.num_chunks_from_msg") == 3
    assert msg.summary == "SEND producer=1 seq=42 1 message (lz4, chunk 2/3)"
    assert "pulsar.decompress" not in keys(msg)


def test_broker_entry_metadata_on_message() -> None:
    entry = pb((1, 1700000000123), (2, 77))
    frame = payload_frame(MESSAGE, pb((1, 5), (2, pb((1, 3), (2, 4)))), _meta(), b"data", broker_entry=entry)
    msg = run(frame, to_server=False)
    bem = root(msg, "broker_entry_metadata")
    assert bem is not None and bem.get("broker_timestamp") == 1700000000123 and bem.get("index") == 77
    assert value(msg, "checksum_status") == "correct"
    assert msg.kind == "event" and msg.expects_response is False
    assert msg.summary == "MESSAGE consumer=5 id=3:4 1 message"


def test_payload_without_magic_is_read_as_old_format() -> None:
    cmd = pb((1, SEND), (SEND, SEND_BODY))
    meta = _meta()
    section = struct.pack(">I", len(meta)) + meta + b"old"
    frame = struct.pack(">II", 4 + len(cmd) + len(section), len(cmd)) + cmd + section
    msg = run(frame)
    assert value(msg, "payload") == b"old"
    assert "pulsar.no_checksum" in keys(msg)


def test_bad_batch_count_is_a_diagnostic() -> None:
    msg = run(payload_frame(SEND, SEND_BODY, _meta((11, 50)), BATCH))
    assert "pulsar.batch" in keys(msg)
    assert msg.summary.startswith("SEND producer=1 seq=42 50 messages")


def test_decode_records_off_keeps_payload_raw() -> None:
    msg = run(payload_frame(SEND, SEND_BODY, _meta((11, 3)), BATCH), opts=Options(decode_records=False))
    assert root(msg, "messages") is None and value(msg, "payload") == BATCH
