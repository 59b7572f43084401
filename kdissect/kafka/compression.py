"""Kafka payload compression: gzip, snappy (raw and xerial framing), lz4 (frame format, with
the legacy header checksum of magic 0 messages) and zstd, each with an output-size cap.

`inflate()` never raises: a corrupt stream or one that would exceed the cap comes back as an
`Inflated` with `problem` (and `capped`) set, and whatever output was produced before that.
No codec ever produces more than `cap + 1` bytes, whatever the input declares.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import lz4.frame
import snappy
import zstandard

# Codec ids of the attributes' low three bits (MessageSet and RecordBatch alike).
CODECS: dict[int, str] = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
LZ4_MAGIC = b"\x04\x22\x4d\x18"


@dataclass(frozen=True, slots=True)
class Inflated:
    """The output of one decompression: data, and why it stopped early if it did."""

    data: bytes
    problem: str | None = None
    capped: bool = False


def codec_name(codec: int) -> str:
    return CODECS.get(codec, f"codec{codec}")


def inflate(codec: int, data: bytes, cap: int, legacy_lz4: bool = False) -> Inflated:
    """Decompress `data` with Kafka codec `codec`, producing at most `cap` bytes.
    `legacy_lz4`: a magic 0 message, whose lz4 frame may carry the pre-0.10 header checksum."""
    cap = max(cap, 0)
    if codec == 3:
        return _lz4(data, cap, legacy_lz4)
    fn = _DECODERS.get(codec)
    if fn is None:
        return Inflated(b"", f"unknown compression codec {codec}")
    return fn(data, cap)


def _capped(out: bytes, cap: int, codec: str) -> Inflated:
    return Inflated(out[:cap], f"{codec} output exceeds the {cap}-byte decompression cap", True)


# -- gzip ------------------------------------------------------------------------------


def _gzip(data: bytes, cap: int) -> Inflated:
    """gzip members one after another (zlib headers accepted too), never more than cap+1 out."""
    parts: list[bytes] = []
    total = 0
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(47)
            piece = d.decompress(rest, cap + 1 - total)
            parts.append(piece)
            total += len(piece)
            if total > cap:
                return _capped(b"".join(parts), cap, "gzip")
            if not d.eof:
                return Inflated(b"".join(parts), "gzip stream ends before its end marker")
            rest = d.unused_data
    except zlib.error as e:
        return Inflated(b"".join(parts), f"gzip: {e}")
    return Inflated(b"".join(parts))


# -- snappy ----------------------------------------------------------------------------


def _snappy_length(block: bytes) -> int | None:
    """The uncompressed length a raw snappy block declares (its leading uvarint)."""
    n = 0
    for i, b in enumerate(block[:5]):
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n
    return None


def _snappy_block(block: bytes, budget: int) -> tuple[bytes, str | None, bool]:
    size = _snappy_length(block)
    if size is None:
        return b"", "snappy block without a valid length", False
    if size > budget:
        return b"", "snappy output exceeds the decompression cap", True
    try:
        out = snappy.decompress(block)
    except snappy.UncompressError:
        return b"", "snappy: corrupt block", False
    return bytes(out), None, False


def _snappy(data: bytes, cap: int) -> Inflated:
    if data.startswith(XERIAL_MAGIC):
        return _xerial(data, cap)
    out, problem, capped = _snappy_block(data, cap)
    return Inflated(out, problem, capped)


def _xerial(data: bytes, cap: int) -> Inflated:
    """xerial framing: magic, int32 version, int32 compatible version, then blocks of
    int32 length + raw snappy."""
    if len(data) < 16:
        return Inflated(b"", "xerial snappy header cut short")
    parts: list[bytes] = []
    total = 0
    pos = 16
    while pos < len(data):
        if pos + 4 > len(data):
            return Inflated(b"".join(parts), "xerial snappy block length cut short")
        n = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if n > len(data) - pos:
            return Inflated(b"".join(parts), f"xerial snappy block of {n} bytes exceeds the data")
        out, problem, capped = _snappy_block(data[pos : pos + n], cap - total)
        if problem:
            return Inflated(b"".join(parts), problem, capped)
        parts.append(out)
        total += len(out)
        pos += n
    return Inflated(b"".join(parts))


# -- lz4 -------------------------------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (used here only for the few bytes of an lz4 frame descriptor)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def fix_legacy_lz4_header(data: bytes) -> bytes:
    """Kafka before 0.10 computed an lz4 frame's header checksum over the frame magic as well
    as the descriptor; rewrite that byte to the standard value (descriptor only)."""
    if len(data) < 7 or not data.startswith(LZ4_MAGIC):
        return data
    flg = data[4]
    hc_at = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if hc_at >= len(data):
        return data
    good = (xxh32(data[4:hc_at]) >> 8) & 0xFF
    if data[hc_at] == good:
        return data
    return data[:hc_at] + bytes([good]) + data[hc_at + 1 :]


def _lz4(data: bytes, cap: int, legacy: bool) -> Inflated:
    if legacy:
        data = fix_legacy_lz4_header(data)
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out = d.decompress(data, max_length=cap + 1)
    except RuntimeError as e:
        return Inflated(b"", f"lz4: {e}")
    if len(out) > cap:
        return _capped(out, cap, "lz4")
    if not d.eof:
        return Inflated(out, "lz4 frame ends before its end mark")
    return Inflated(out)


# -- zstd ------------------------------------------------------------------------------


_ZSTD_BLOCK = 128 * 1024  # the most output one zstd block can produce


def _zstd(data: bytes, cap: int) -> Inflated:
    """zstd frames one after another. The decompressor is fed input in slices small enough that
    even blocks of maximal ratio cannot carry the output far past the cap."""
    parts: list[bytes] = []
    total = 0
    rest = data
    try:
        while rest and total <= cap:
            d = zstandard.ZstdDecompressor().decompressobj()
            pos = 0
            while pos < len(rest) and not d.eof and total <= cap:
                step = max(16, 3 * ((cap - total) // _ZSTD_BLOCK))
                piece = d.decompress(rest[pos : pos + step])
                pos += step
                parts.append(piece)
                total += len(piece)
            if total <= cap and not d.eof:
                return Inflated(b"".join(parts), "zstd frame ends before its last block")
            rest = d.unused_data + rest[pos:]
    except zstandard.ZstdError as e:
        return Inflated(b"".join(parts)[:cap], f"zstd: {e}")
    out = b"".join(parts)
    if total > cap:
        return _capped(out, cap, "zstd")
    return Inflated(out)


_DECODERS: dict[int, Callable[[bytes, int], Inflated]] = {1: _gzip, 2: _snappy, 4: _zstd}
