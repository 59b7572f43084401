"""Kafka's side of compression: its codec ids, the pre-0.10 lz4 header checksum, and what the
records decoder says when a codec fails or its library is missing. The codecs themselves are
tested in tests/unit/wire/test_codecs.py."""

from __future__ import annotations

import gzip

import lz4.frame
import pytest
import snappy
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder

from kdissect.dissect.base import Options
from kdissect.kafka.compression import fix_legacy_lz4_header, inflate, xxh32
from kdissect.kafka.records import decode_records
from kdissect.model import Group, Severity
from kdissect.wire import codecs
from kdissect.wire.codecs import CodecError

TEXT = b"kafka record payload " * 500
CAP = 64 * 1024 * 1024

ENCODERS = {
    1: gzip.compress,
    2: snappy.compress,
    3: lz4.frame.compress,
    4: lambda d: zstandard.ZstdCompressor().compress(d),
}


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_codec_ids(codec: int) -> None:
    assert inflate(codec, ENCODERS[codec](TEXT), CAP) == TEXT


@pytest.mark.parametrize("codec", [0, 5, 7])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(CodecError, match=f"^unknown compression codec {codec}$"):
        inflate(codec, b"abc", CAP)


def test_xxh32_known_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_legacy_lz4_header_checksum_is_repaired() -> None:
    frame = lz4.frame.compress(TEXT)
    hc_at = 6 + (8 if frame[4] & 0x08 else 0)
    legacy = (xxh32(frame[0:hc_at]) >> 8) & 0xFF  # Kafka < 0.10 hashed the magic too
    broken = frame[:hc_at] + bytes([legacy]) + frame[hc_at + 1 :]
    assert broken != frame
    assert fix_legacy_lz4_header(broken) == frame
    with pytest.raises(CodecError):  # a standard decoder refuses it
        inflate(3, broken, CAP)
    assert inflate(3, broken, CAP, legacy_lz4=True) == TEXT


def _batch(codec: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i in range(3):
        b.append(i, 1700000000000 + i, None, b"value %d" % i * 50, [])
    return bytes(b.build())


def test_a_missing_library_is_a_diagnostic_and_other_codecs_still_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(codecs._LIBS, "snappy", False)
    data = _batch(2) + _batch(2) + _batch(1)
    f, diags, stats = decode_records(data, 0, len(data), Options())
    assert [(d.severity, d.group, d.key) for d in diags] == [
        (Severity.WARNING, Group.UNDECODED, "kafka.records.codec_unavailable")]  # once per message
    assert diags[0].message == ("snappy payload: snappy: the python-snappy package is not installed: "
                                "records not decoded")
    assert [c.children[-1].name for c in f.children or [] if c.children] == ["records_data", "records_data", "records"]
    assert stats["records"] == 3
