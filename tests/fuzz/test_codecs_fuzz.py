"""Fuzzing the shared codecs: random bytes and mutations of real streams give a CodecError or
at most `cap` bytes, never another exception, in bounded time."""

from __future__ import annotations

import gzip
import time
import zlib

import lz4.block
import lz4.frame
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.wire.codecs import CODECS, XERIAL_MAGIC, CodecError, decompress

TEXT = b"fuzzed payload " * 40
CAP = 1 << 12
SAMPLES = {
    "gzip": gzip.compress(TEXT),
    "zlib": zlib.compress(TEXT),
    "snappy": XERIAL_MAGIC + bytes(8) + len(s := snappy.compress(TEXT)).to_bytes(4, "big") + s,
    "lz4": lz4.frame.compress(TEXT),
    "lz4-block": lz4.block.compress(TEXT, store_size=False),
    "zstd": zstandard.ZstdCompressor().compress(TEXT),
}


def _check(codec: str, data: bytes, cap: int, size: int | None) -> None:
    t0 = time.perf_counter()
    try:
        out = decompress(codec, data, cap, size)
    except CodecError as e:
        assert str(e) and e.produced >= 0
    else:
        assert len(out) <= cap
    assert time.perf_counter() - t0 < 2.0


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(CODECS)), st.binary(max_size=400), st.integers(0, CAP),
       st.one_of(st.none(), st.integers(-1, 2 * CAP)))
def test_random_bytes(codec: str, data: bytes, cap: int, size: int | None) -> None:
    _check(codec, data, cap, size)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SAMPLES)), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                                  min_size=1, max_size=6), st.integers(0, 2 * len(TEXT)))
def test_mutations_of_real_streams(codec: str, edits: list[tuple[int, int]], cap: int) -> None:
    data = bytearray(SAMPLES[codec])
    for pos, value in edits:
        data[pos % len(data)] = value
    _check(codec, bytes(data), cap, len(TEXT))


def test_truncation_at_every_offset() -> None:
    for codec, sample in SAMPLES.items():
        for cut in range(len(sample) + 1):
            _check(codec, sample[:cut], CAP, len(TEXT))
