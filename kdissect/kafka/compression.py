"""Kafka's compression codec ids (the attributes' low three bits) and its one quirk: the lz4
header checksum of magic 0 messages. The codecs themselves, each capped, are wire/codecs.py's.
"""

from __future__ import annotations

from kdissect.wire.codecs import CodecError, decompress

# Codec ids of the attributes' low three bits (MessageSet and RecordBatch alike).
CODECS: dict[int, str] = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

LZ4_MAGIC = b"\x04\x22\x4d\x18"


def codec_name(codec: int) -> str:
    return CODECS.get(codec, f"codec{codec}")


def inflate(codec: int, data: bytes, cap: int, legacy_lz4: bool = False) -> bytes:
    """Decompress `data` with Kafka codec `codec`, producing at most `cap` bytes; CodecError
    when it cannot. `legacy_lz4`: a magic 0 message, whose lz4 frame may carry the pre-0.10
    header checksum."""
    name = CODECS.get(codec) if codec else None
    if name is None:
        raise CodecError(f"unknown compression codec {codec}")
    if codec == 3 and legacy_lz4:
        data = fix_legacy_lz4_header(data)
    return decompress(name, data, cap)


# -- the legacy lz4 header checksum ----------------------------------------------------

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
