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
from kdissect.wire.codecs import XERIAL_BLOCK_COST, XERIAL_MAGIC, CodecError, CodecUnavailable, decompress

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


def test_xerial_tiny_blocks_count_against_the_cap() -> None:
    # Each block costs a call to the library whatever it holds: 30 MB of empty blocks (6 million)
    # took 34 s under the 64 MiB cap. A block before the last counts as XERIAL_BLOCK_COST bytes
    # at least; blocks as writers make them (full but the last) count as their output.
    empty = b"\x00\x00\x00\x01\x00"
    cap = 100 * XERIAL_BLOCK_COST
    assert decompress("snappy", XERIAL_MAGIC + bytes(8) + empty * 101, cap) == b""
    with pytest.raises(CodecError) as e:
        decompress("snappy", XERIAL_MAGIC + bytes(8) + empty * 102, cap)
    assert e.value.capped and e.value.produced == 101 * XERIAL_BLOCK_COST
    t0 = time.perf_counter()
    with pytest.raises(CodecError) as e:
        decompress("snappy", XERIAL_MAGIC + bytes(8) + empty * 6_000_000, CAP)
    assert e.value.capped and time.perf_counter() - t0 < 5
    text = bytes(range(256)) * 400
    assert decompress("snappy", xerial(text, XERIAL_BLOCK_COST), len(text)) == text
    assert decompress("snappy", xerial(text[:XERIAL_BLOCK_COST + 1], XERIAL_BLOCK_COST), XERIAL_BLOCK_COST + 1) \
        == text[:XERIAL_BLOCK_COST + 1]


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


@pytest.mark.parametrize(("codec", "stream"), [
    ("gzip", gzip.compress(b"", mtime=0)),
    ("zstd", zstandard.ZstdCompressor().compress(b"")),
    ("gzip", gzip.compress(b"ab", mtime=0)),
    ("zstd", zstandard.ZstdCompressor().compress(b"ab")),
])
def test_many_small_streams_cost_time_in_proportion_to_their_bytes(codec: str, stream: bytes) -> None:
    # 4 MB of streams of 9 to 22 bytes: each is read from a slice of the input, not from a copy
    # of everything after it (which took minutes for this input).
    n = (4 << 20) // len(stream)
    t0 = time.process_time()
    out = decompress(codec, stream * n, CAP)
    assert time.process_time() - t0 < 10.0
    assert out == decompress(codec, stream, CAP) * n


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_streams_of_every_size_one_after_another(codec: str) -> None:
    # Streams that end inside the first slice fed, in a later one, and at a slice's last byte.
    pack = gzip.compress if codec == "gzip" else zstandard.ZstdCompressor(level=1).compress
    texts = [bytes(range(256)) * k for k in (0, 1, 3, 40, 1000)] + [b"x" * 5_000_000, b"tail"]
    data = b"".join(pack(t) for t in texts)
    assert decompress(codec, data, 1 << 26) == b"".join(texts)
    assert decompress(codec, data + pack(b"!"), 1 << 26) == b"".join(texts) + b"!"


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


@pytest.mark.parametrize("codec, unit", [
    ("snappy", None),
    ("gzip", gzip.compress(b"x", mtime=0)),
    ("zstd", zstandard.ZstdCompressor().compress(b"x")),
])
def test_many_tiny_pieces_cost_no_memory_of_their_own(codec: str, unit: bytes | None) -> None:
    # Blocks, members or frames of an empty or one-byte output each: the pieces were joined with
    # bytes.join, which takes 80 bytes an item, so a 30 MB xerial payload of empty blocks took
    # 529 MB more to decompress (a 100 MB message, 1.7 GB).
    import tracemalloc

    if unit is None:
        data = XERIAL_MAGIC + bytes(8) + (b"\x00\x00\x00\x01\x00" + b"\x00\x00\x00\x03\x01\x00x") * 100_000
    else:
        data = unit * (1_200_000 // len(unit))
    tracemalloc.start()
    try:
        out = decompress(codec, data, 1 << 30)  # its 200,000 xerial blocks count as 1 KiB each
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == b"x" * len(out) and len(out) >= 40_000
    assert peak < 4 * len(out) + (1 << 20)
