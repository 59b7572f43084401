"""Decompression for every protocol, each codec capped in output size.

`decompress(codec, data, cap, size)` returns at most `cap` bytes, or raises `CodecError`: the
input is corrupt or ends early, its output would pass the cap (`capped`), or the library the
codec needs is not installed (`CodecUnavailable`, raised where the codec is used, so nothing
else stops decoding). No codec produces more than a bounded overshoot of `cap`, whatever the
input declares.

| codec | what |
|---|---|
| `gzip` | deflate streams with a gzip (or zlib) header, one after another |
| `zlib` | one deflate stream with a zlib (or gzip) header; bytes after it are ignored |
| `snappy` | a raw snappy block, or xerial framing (magic `\\x82SNAPPY\\x00`, two int32 versions, int32-length raw blocks; a block before the last counts as at least `XERIAL_BLOCK_COST` bytes of output) |
| `lz4` | an lz4 frame |
| `lz4-block` | a raw lz4 block; `size` is the output it holds (blocks do not carry it) |
| `zstd` | zstd frames one after another |

A protocol maps its own codec ids onto these names, and spends the output (`len` of the result,
or `CodecError.produced`) against its message's `Budget`.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any

from kdissect.errors import DecodeError
from kdissect.wire.varint import uvarint_at

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# A xerial block before the last counts against the cap as at least this many bytes: each block
# costs a call to the library whatever it holds, and writers fill every block but the last
# (snappy-java: 32 KiB), so only tiny blocks made to cost work without output are charged more.
XERIAL_BLOCK_COST = 1024


class CodecError(DecodeError):
    """Decompression stopped. `produced`: the bytes of output made before it stopped (the work
    it cost); `capped`: the output would pass the cap; `declared`: the output size the input
    declared, when that alone was refused (nothing was decoded)."""

    def __init__(self, message: str, produced: int = 0, capped: bool = False,
                 declared: int | None = None) -> None:
        super().__init__(message)
        self.produced = produced
        self.capped = capped
        self.declared = declared


class CodecUnavailable(CodecError):
    """The library a codec needs is not installed."""


# module -> the package that provides it
_PACKAGES = {"snappy": "python-snappy", "lz4.frame": "lz4", "lz4.block": "lz4", "zstandard": "zstandard"}
_LIBS: dict[str, Any] = {}


def _lib(module: str, codec: str) -> Any:
    """The library module, imported on first use; CodecUnavailable when it is not installed."""
    lib = _LIBS.get(module)
    if lib is None:
        try:
            lib = importlib.import_module(module)
        except ImportError:
            lib = False
        _LIBS[module] = lib
    if lib is False:
        raise CodecUnavailable(f"{codec}: the {_PACKAGES[module]} package is not installed")
    return lib


def _capped(codec: str, cap: int, produced: int, declared: int | None = None) -> CodecError:
    return CodecError(f"{codec} output exceeds the {cap}-byte decompression cap", produced, True, declared)


# -- gzip / zlib -----------------------------------------------------------------------


# Input is fed to a decompressor in slices, from _FIRST_SLICE bytes for each stream or frame
# and twice as many each time up to _MOST_SLICE: what a decompressor keeps of a slice past the end
# of its stream (unused_data, a copy) stays proportional to the stream, so many small streams one
# after another cost time in proportion to their bytes, not to their number times what follows.
_FIRST_SLICE = 256
_MOST_SLICE = 1 << 20


def _deflate(codec: str, data: bytes, cap: int, size: int | None) -> bytes:
    """A deflate stream with a gzip or a zlib header, never more than cap+1 out. gzip: members
    one after another; zlib: one stream, whatever follows it is ignored (java.util.zip's
    Inflater, which the protocols that call it zlib use)."""
    parts = bytearray()  # not a list joined: bytes.join costs 80 bytes an item, and a piece may be empty
    total = 0
    view = memoryview(data)
    pos = 0
    try:
        while pos < len(view):
            d = zlib.decompressobj(47)  # 32 + 15: a gzip or a zlib header
            step = _FIRST_SLICE
            while True:
                piece = d.decompress(view[pos : pos + step], cap + 1 - total)
                parts += piece
                total += len(piece)
                if total > cap:
                    raise _capped(codec, cap, total)
                fed = min(step, len(view) - pos)
                if d.eof:
                    pos += fed - len(d.unused_data)
                    break
                pos += fed  # all of it taken in: only reaching max_length leaves input unread
                if pos >= len(view):
                    raise CodecError(f"{codec} stream ends before its end marker", total)
                step = min(2 * step, _MOST_SLICE)
            if codec != "gzip":
                break
    except zlib.error as e:
        raise CodecError(f"{codec}: {e}", total) from None
    return bytes(parts)


# -- snappy ----------------------------------------------------------------------------


def _snappy_length(block: bytes) -> int | None:
    """The uncompressed length a raw snappy block declares (its leading uvarint, at most 5
    bytes)."""
    try:
        return uvarint_at(block, 0, min(len(block), 5))[0]
    except DecodeError:
        return None


def _snappy_block(block: bytes, cap: int, done: int) -> bytes:
    """One raw block, refused before decoding when the length it declares passes the cap
    (`done` bytes of the cap already produced)."""
    size = _snappy_length(block)
    if size is None:
        raise CodecError("snappy block without a valid length", done)
    if size > cap - done:
        raise CodecError("snappy output exceeds the decompression cap", done, True, size)
    snappy = _lib("snappy", "snappy")
    try:
        return bytes(snappy.decompress(block))
    except snappy.UncompressError:
        raise CodecError("snappy: corrupt block", done) from None


def _snappy(codec: str, data: bytes, cap: int, size: int | None) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, cap, 0)
    if len(data) < 16:
        raise CodecError("xerial snappy header cut short")
    parts = bytearray()
    total = 0
    pos = 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise CodecError("xerial snappy block length cut short", total)
        n = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if n > len(data) - pos:
            raise CodecError(f"xerial snappy block of {n} bytes exceeds the data", total)
        out = _snappy_block(data[pos : pos + n], cap, total)
        parts += out
        pos += n
        total += len(out) if pos == len(data) else max(len(out), XERIAL_BLOCK_COST)
        if total > cap:
            raise _capped("xerial snappy", cap, total)
    return bytes(parts)


# -- lz4 -------------------------------------------------------------------------------


def _lz4_frame(codec: str, data: bytes, cap: int, size: int | None) -> bytes:
    d = _lib("lz4.frame", "lz4").LZ4FrameDecompressor()
    try:
        out = bytes(d.decompress(data, max_length=cap + 1))
    except RuntimeError as e:
        raise CodecError(f"lz4: {e}") from None
    if len(out) > cap:
        raise _capped("lz4", cap, len(out))
    if not d.eof:
        raise CodecError("lz4 frame ends before its end mark", len(out))
    return out


def _lz4_block(codec: str, data: bytes, cap: int, size: int | None) -> bytes:
    if size is None or size < 0:
        raise CodecError("lz4: a raw block without its uncompressed size")
    if size > cap:
        raise _capped("lz4", cap, 0, size)
    block = _lib("lz4.block", "lz4")
    try:
        return bytes(block.decompress(data, uncompressed_size=size))
    except (block.LZ4BlockError, ValueError) as e:
        raise CodecError(f"lz4: {e}") from None


# -- zstd ------------------------------------------------------------------------------


_ZSTD_BLOCK = 128 * 1024  # the most output one zstd block can produce


def _zstd(codec: str, data: bytes, cap: int, size: int | None) -> bytes:
    """zstd frames one after another. The decompressor is fed input in slices small enough that
    even blocks of maximal ratio cannot carry the output far past the cap."""
    zstandard = _lib("zstandard", "zstd")
    parts = bytearray()
    total = 0
    view = memoryview(data)
    pos = 0
    decompressor = zstandard.ZstdDecompressor()  # one context, reset for each frame
    try:
        while pos < len(view) and total <= cap:
            d = decompressor.decompressobj()
            grow = _FIRST_SLICE
            while pos < len(view) and not d.eof and total <= cap:
                step = min(grow, max(16, 3 * ((cap - total) // _ZSTD_BLOCK)))
                piece = d.decompress(view[pos : pos + step])
                pos += min(step, len(view) - pos)
                parts += piece
                total += len(piece)
                grow = min(2 * grow, _MOST_SLICE)
            if total <= cap and not d.eof:
                raise CodecError("zstd frame ends before its last block", total)
            pos -= len(d.unused_data)  # the next frame starts where this one ended
    except zstandard.ZstdError as e:
        raise CodecError(f"zstd: {e}", total) from None
    if total > cap:
        raise _capped("zstd", cap, total)
    return bytes(parts)


_Codec = Callable[[str, bytes, int, int | None], bytes]

CODECS: dict[str, _Codec] = {
    "gzip": _deflate,
    "zlib": _deflate,
    "snappy": _snappy,
    "lz4": _lz4_frame,
    "lz4-block": _lz4_block,
    "zstd": _zstd,
}


def decompress(codec: str, data: bytes, cap: int, size: int | None = None) -> bytes:
    """`data` decompressed with `codec` (a key of CODECS): at most `cap` bytes, or CodecError.
    `size`: the output size the container announces (needed by `lz4-block`)."""
    fn = CODECS.get(codec)
    if fn is None:
        raise CodecError(f"unknown compression {codec}")
    return fn(codec, data, max(cap, 0), size)
