"""Message-body decompression (ZLIB, LZ4 frame, ZSTD frame), capped in output size."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable

import lz4.frame
import zstandard


class DecompressError(Exception):
    """The body does not decompress, or decompresses to more than the cap."""


class TooLarge(DecompressError):
    """The body decompresses to more than the cap (which was all spent trying)."""


def _zlib(data: bytes, cap: int) -> bytes:
    d = zlib.decompressobj()
    try:
        return d.decompress(data, cap + 1)
    except zlib.error as e:
        raise DecompressError(f"zlib: {e}") from None


def _lz4(data: bytes, cap: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        return bytes(d.decompress(data, max_length=cap + 1))
    except RuntimeError as e:
        raise DecompressError(f"lz4: {e}") from None


def _zstd(data: bytes, cap: int) -> bytes:
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
            return bytes(r.read(cap + 1))
    except zstandard.ZstdError as e:
        raise DecompressError(f"zstd: {e}") from None


_CODECS: dict[str, Callable[[bytes, int], bytes]] = {"ZLIB": _zlib, "LZ4": _lz4, "ZSTD": _zstd}


def decompress(data: bytes, codec: str, cap: int) -> bytes:
    """The decompressed bytes; raises DecompressError (also when the output exceeds cap)."""
    fn = _CODECS.get(codec)
    if fn is None:
        raise DecompressError(f"unknown compression {codec}")
    out = fn(data, cap)
    if len(out) > cap:
        raise TooLarge(f"{codec} output exceeds the {cap}-byte limit")
    return out
