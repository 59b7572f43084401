"""The capped codecs every protocol uses: round trips against the reference libraries, xerial
snappy framing, raw lz4 blocks, corrupt input, decompression bombs and a missing library."""

from __future__ import annotations

import gzip
import time
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard

from kdissect.wire import codecs
from kdissect.wire.codecs import XERIAL_MAGIC, CodecError, CodecUnavailable, decompress

TEXT = b"record payload " * 700
CAP = 64 * 1024 * 1024


def xerial(data: bytes, block: int = 1000) -> bytes:
    out = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    for i in range(0, len(data), block):
        c = snappy.compress(data[i : i + block])
        out += len(c).to_bytes(4, "big") + c
    return out


ENCODERS = {
    "gzip": gzip.compress,
    "zlib": zlib.compress,
    "snappy": snappy.compress,
    "lz4": lz4.frame.compress,
    "lz4-block": lambda d: lz4.block.compress(d, store_size=False),
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
}


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_round_trip(codec: str) -> None:
    assert decompress(codec, ENCODERS[codec](TEXT), CAP, len(TEXT)) == TEXT


def test_xerial_snappy_blocks() -> None:
    framed = xerial(TEXT)
    assert framed.count(b"\x00\x00") > 0 and len(framed) < len(TEXT)
    assert decompress("snappy", framed, CAP) == TEXT


def test_xerial_cut_block_is_a_problem() -> None:
    with pytest.raises(CodecError) as e:
        decompress("snappy", xerial(TEXT)[:-5], CAP)
    assert not e.value.capped and 0 < e.value.produced < len(TEXT)


def test_deflate_concatenated_members_either_header() -> None:
    assert decompress("gzip", gzip.compress(b"one") + gzip.compress(b"two"), CAP) == b"onetwo"
    assert decompress("gzip", zlib.compress(b"zlib"), CAP) == b"zlib"
    assert decompress("zlib", gzip.compress(b"gz"), CAP) == b"gz"


def test_zlib_is_one_stream() -> None:
    assert decompress("zlib", zlib.compress(b"one") + b"\x00\x01 trailing", CAP) == b"one"
    with pytest.raises(CodecError, match="^gzip: "):
        decompress("gzip", zlib.compress(b"one") + b"\x00\x01 trailing", CAP)


def test_zstd_frames_one_after_another() -> None:
    z = zstandard.ZstdCompressor()
    assert decompress("zstd", z.compress(b"one") + z.compress(b"two"), CAP) == b"onetwo"


@pytest.mark.parametrize(("codec", "cut", "text"), [
    ("zlib", -4, "zlib stream ends before its end marker"),
    ("gzip", -4, "gzip stream ends before its end marker"),
    ("lz4", -4, "lz4 frame ends before its end mark"),
    ("zstd", -4, "zstd frame ends before its last block"),
])
def test_a_stream_cut_short_is_a_problem(codec: str, cut: int, text: str) -> None:
    with pytest.raises(CodecError, match=text):
        decompress(codec, ENCODERS[codec](TEXT)[:cut], CAP)


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_corrupt_input_raises_codec_errors_only(codec: str) -> None:
    good = ENCODERS[codec](TEXT)
    for bad in (b"", b"\x00" * 7, good[: len(good) // 2], bytes(b ^ 0x55 for b in good)):
        try:
            out = decompress(codec, bad, CAP, len(TEXT))
        except CodecError as e:
            assert str(e) and e.produced >= 0
        else:
            assert bad == b"" or TEXT.startswith(out)


def test_error_messages_name_the_codec() -> None:
    with pytest.raises(CodecError, match=r"^zlib: "):
        decompress("zlib", b"\x78\x9c\xff\xff\xff\xff", CAP)
    with pytest.raises(CodecError, match=r"^gzip: "):
        decompress("gzip", b"\x1f\x8b\xff\xff\xff\xff", CAP)
    with pytest.raises(CodecError, match=r"^lz4: "):
        decompress("lz4-block", b"\xff" * 20, CAP, 100)
    with pytest.raises(CodecError, match="snappy: corrupt block"):
        decompress("snappy", b"\x0a\xff\xff\xff", CAP)


def test_unknown_codec() -> None:
    with pytest.raises(CodecError, match="^unknown compression brotli$"):
        decompress("brotli", b"abc", CAP)


@pytest.mark.parametrize("codec", ["gzip", "zlib", "lz4", "zstd", "snappy"])
def test_output_past_the_cap(codec: str) -> None:
    with pytest.raises(CodecError) as e:
        decompress(codec, ENCODERS[codec](TEXT), 1000)
    assert e.value.capped and (e.value.produced > 1000 or e.value.declared == len(TEXT))
    cap = "" if codec == "snappy" else " 1000-byte"
    assert str(e.value) == f"{codec} output exceeds the{cap} decompression cap"


def test_raw_snappy_declaring_a_huge_length_is_refused_before_decoding() -> None:
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # declares 4 GiB
    with pytest.raises(CodecError) as e:
        decompress("snappy", block, 1024)
    assert e.value.capped and e.value.declared == 0xFFFFFFFF and e.value.produced == 0


def test_lz4_block_needs_its_size_and_checks_it_against_the_cap() -> None:
    block = ENCODERS["lz4-block"](TEXT)
    with pytest.raises(CodecError, match="without its uncompressed size"):
        decompress("lz4-block", block, CAP)
    with pytest.raises(CodecError) as e:
        decompress("lz4-block", block, 100, len(TEXT))
    assert e.value.capped and e.value.declared == len(TEXT) and e.value.produced == 0


@pytest.mark.parametrize(("codec", "module"), [("snappy", "snappy"), ("lz4", "lz4.frame"),
                                                ("lz4-block", "lz4.block"), ("zstd", "zstandard")])
def test_a_missing_library_is_an_error_where_it_is_used(codec: str, module: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(codecs._LIBS, module, False)
    with pytest.raises(CodecUnavailable, match="package is not installed"):
        decompress(codec, ENCODERS[codec](TEXT), CAP, len(TEXT))
    assert decompress("gzip", gzip.compress(b"still"), CAP) == b"still"


BOMB_SIZE = 1 << 30  # 1 GiB of zeros


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    zeros = bytes(BOMB_SIZE)
    member = gzip.compress(zeros[: 16 << 20], 1)
    return {
        "gzip": member * (BOMB_SIZE // (16 << 20)),  # 64 gzip members of 16 MiB each
        "snappy": xerial(zeros[: 64 << 20], 32 << 20) + xerial(zeros[: 64 << 20], 32 << 20)[16:],
        "lz4": lz4.frame.compress(zeros),
        "zstd": zstandard.ZstdCompressor(level=3).compress(zeros),
    }


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_bomb_stays_under_the_cap(codec: str, bombs: dict[str, bytes]) -> None:
    cap = 8 * 1024 * 1024
    t0 = time.perf_counter()
    with pytest.raises(CodecError) as e:
        decompress(codec, bombs[codec], cap)
    assert time.perf_counter() - t0 < 2.0
    assert e.value.capped and e.value.produced <= 2 * cap
