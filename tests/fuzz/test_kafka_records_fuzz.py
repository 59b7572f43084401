"""Fuzzing the record decoders, the codecs and the SASL decoder: random bytes, truncation at
every offset and mutations of real batches give diagnostics only, in bounded time."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kdissect.dissect.base import Options
from kdissect.kafka.compression import inflate
from kdissect.kafka.records import decode_records
from kdissect.kafka.sasl import decode_sasl_auth_bytes
from kdissect.wire.codecs import CodecError

OPTS = Options(max_decompressed=1 << 20)


def _v2(codec: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, codec % 2 == 1, 7, 1, 0, 1 << 20)
    for i in range(5):
        b.append(i, 1700000000000 + i, b"k%d" % i if i % 2 else None, b"value-%d" % i * 5,
                 [("h", b"x"), ("n", None)] if i % 2 else [])
    return bytes(b.build())


def _legacy(magic: int, codec: int) -> bytes:
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(4):
        b.append(i, 1700000000000 + i if magic else None, b"k%d" % i, b"legacy-%d" % i * 4)
    return bytes(b.build())


SAMPLES = [_v2(c) for c in range(5)] + [_legacy(m, c) for m in (0, 1) for c in (0, 1, 2)] + [_legacy(1, 3)]
SAMPLES.append(SAMPLES[0] + SAMPLES[6] + SAMPLES[3])  # mixed formats in one records field


def _check(data: bytes, partial_ok: bool = True) -> None:
    t0 = time.perf_counter()
    field, diags, stats = decode_records(data, 0, len(data), OPTS, partial_ok=partial_ok)
    assert time.perf_counter() - t0 < 2.0
    assert field.name == "records" and all(d.key.startswith("kafka.records.") for d in diags)
    assert stats["records"] >= 0 and stats["batches"] >= 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    _check(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=17, max_size=300), st.sampled_from([0, 1, 2]))
def test_random_bytes_behind_a_plausible_header(body: bytes, magic: int) -> None:
    data = bytearray(body)
    data[8:12] = (len(data) - 12).to_bytes(4, "big")
    data[16] = magic
    _check(bytes(data))


def test_truncation_at_every_offset() -> None:
    for sample in SAMPLES:
        for cut in range(len(sample) + 1):
            _check(sample[:cut])
            _check(sample[:cut], partial_ok=False)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(SAMPLES))), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                                        min_size=1, max_size=6))
def test_mutations_of_real_batches(which: int, edits: list[tuple[int, int]]) -> None:
    data = bytearray(SAMPLES[which])
    for pos, value in edits:
        data[pos % len(data)] = value
    _check(bytes(data))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 7), st.binary(max_size=300), st.booleans())
def test_inflate_raises_codec_errors_only(codec: int, data: bytes, legacy: bool) -> None:
    try:
        out = inflate(codec, data, 1 << 16, legacy)
    except CodecError:
        return
    assert len(out) <= 1 << 16


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([None, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]),
       st.one_of(st.binary(max_size=200), st.text(max_size=120).map(lambda s: s.encode())),
       st.booleans())
def test_sasl_never_raises(mechanism: str | None, data: bytes, is_request: bool) -> None:
    fields = decode_sasl_auth_bytes(mechanism, data, 10, is_request, Options())
    assert fields and fields[0].name == "mechanism"
