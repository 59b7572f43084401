"""Kafka compression codecs: round trips against the reference libraries, xerial snappy
framing, the pre-0.10 lz4 header checksum, corrupt input and decompression bombs."""

from __future__ import annotations

import gzip
import time
import zlib

import lz4.frame
import pytest
import snappy
import zstandard

from kdissect.kafka.compression import XERIAL_MAGIC, fix_legacy_lz4_header, inflate, xxh32

TEXT = b"kafka record payload " * 500
CAP = 64 * 1024 * 1024


def _xerial(data: bytes, block: int = 1000) -> bytes:
    out = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    for i in range(0, len(data), block):
        c = snappy.compress(data[i : i + block])
        out += len(c).to_bytes(4, "big") + c
    return out


ENCODERS = {
    1: lambda d: gzip.compress(d),
    2: lambda d: snappy.compress(d),
    3: lambda d: lz4.frame.compress(d),
    4: lambda d: zstandard.ZstdCompressor().compress(d),
}


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_round_trip(codec: int) -> None:
    out = inflate(codec, ENCODERS[codec](TEXT), CAP)
    assert (out.data, out.problem, out.capped) == (TEXT, None, False)


def test_xerial_snappy_blocks() -> None:
    framed = _xerial(TEXT)
    assert framed.count(b"\x00\x00") > 0 and len(framed) < len(TEXT)
    assert inflate(2, framed, CAP).data == TEXT


def test_xerial_cut_block_is_a_problem() -> None:
    out = inflate(2, _xerial(TEXT)[:-5], CAP)
    assert out.problem is not None and not out.capped
    assert TEXT.startswith(out.data)


def test_gzip_concatenated_members_and_zlib_header() -> None:
    assert inflate(1, gzip.compress(b"one") + gzip.compress(b"two"), CAP).data == b"onetwo"
    assert inflate(1, zlib.compress(b"zlib"), CAP).data == b"zlib"


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
    assert inflate(3, broken, CAP).problem is not None  # a standard decoder refuses it
    assert inflate(3, broken, CAP, legacy_lz4=True).data == TEXT


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_corrupt_input_is_a_problem_not_an_exception(codec: int) -> None:
    good = ENCODERS[codec](TEXT)
    for bad in (b"", b"\x00" * 7, good[: len(good) // 2], bytes(b ^ 0x55 for b in good)):
        out = inflate(codec, bad, CAP)
        assert out.problem is not None or bad == b"" or TEXT.startswith(out.data)


def test_unknown_codec() -> None:
    assert inflate(7, b"abc", CAP).problem == "unknown compression codec 7"


BOMB_SIZE = 1 << 30  # 1 GiB of zeros


@pytest.fixture(scope="module")
def bombs() -> dict[int, bytes]:
    zeros = bytes(BOMB_SIZE)
    member = gzip.compress(zeros[: 16 << 20], 1)
    return {
        1: member * (BOMB_SIZE // (16 << 20)),  # 64 gzip members of 16 MiB each
        2: _xerial(zeros[: 64 << 20], 32 << 20) + _xerial(zeros[: 64 << 20], 32 << 20)[16:],
        3: lz4.frame.compress(zeros),
        4: zstandard.ZstdCompressor(level=3).compress(zeros),
    }


@pytest.mark.slow
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_stays_under_the_cap(codec: int, bombs: dict[int, bytes]) -> None:
    cap = 8 * 1024 * 1024
    t0 = time.perf_counter()
    out = inflate(codec, bombs[codec], cap)
    assert time.perf_counter() - t0 < 2.0
    assert out.capped and out.problem is not None
    assert len(out.data) <= cap


def test_raw_snappy_declaring_a_huge_length_is_refused_before_decoding() -> None:
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # declares 4 GiB
    out = inflate(2, block, 1024)
    assert out.capped and out.data == b""
