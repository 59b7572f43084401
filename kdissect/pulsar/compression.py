"""Pulsar payload codecs, each capped: NONE, LZ4 (raw block), ZLIB, ZSTD, SNAPPY (raw).

A codec gets the compressed bytes, the size MessageMetadata.uncompressed_size announces and a
cap; it returns the decompressed bytes or raises CodecError. The announced size is checked
against the cap before anything is allocated, and the result against the announced size.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable

import lz4.block
import snappy
import zstandard


class CodecError(Exception):
    """Decompression failed; the message says why."""


def _lz4(data: bytes, size: int, cap: int) -> bytes:
    try:
        return bytes(lz4.block.decompress(data, uncompressed_size=size))
    except (lz4.block.LZ4BlockError, ValueError) as e:
        raise CodecError(f"lz4: {e}") from None


def _zlib(data: bytes, size: int, cap: int) -> bytes:
    d = zlib.decompressobj()
    try:
        return d.decompress(data, min(cap, size) + 1)
    except zlib.error as e:
        raise CodecError(f"zlib: {e}") from None


def _zstd(data: bytes, size: int, cap: int) -> bytes:
    # Streaming with a read limit: a frame header may announce any content size.
    want = min(cap, size) + 1
    parts: list[bytes] = []
    got = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            while got < want:
                chunk = reader.read(want - got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
    except zstandard.ZstdError as e:
        raise CodecError(f"zstd: {e}") from None
    return b"".join(parts)


def _snappy(data: bytes, size: int, cap: int) -> bytes:
    declared = _snappy_length(data)
    if declared > cap:
        raise CodecError(f"snappy: declared size {declared} exceeds the cap of {cap} bytes")
    try:
        return bytes(snappy.uncompress(data))
    except snappy.UncompressError as e:
        raise CodecError(f"snappy: {e or 'corrupt input'}") from None


def _snappy_length(data: bytes) -> int:
    """The uncompressed length raw snappy data starts with (a varint of at most 5 bytes)."""
    n = shift = 0
    for b in data[:5]:
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise CodecError("snappy: bad length preamble")


Codec = Callable[[bytes, int, int], bytes]

CODECS: dict[str, Codec] = {"LZ4": _lz4, "ZLIB": _zlib, "ZSTD": _zstd, "SNAPPY": _snappy}


def decompress(codec: str, data: bytes, size: int, cap: int) -> bytes:
    """Decompress `data` announced as `size` bytes; CodecError on failure or size mismatch."""
    fn = CODECS.get(codec)
    if fn is None:
        raise CodecError(f"unknown compression {codec}")
    if size > cap:
        raise CodecError(f"{codec.lower()}: uncompressed size {size} exceeds the cap of {cap} bytes")
    out = fn(data, size, cap)
    if len(out) != size:
        raise CodecError(f"{codec.lower()}: {len(out)} bytes decompressed, metadata says {size}")
    return out
