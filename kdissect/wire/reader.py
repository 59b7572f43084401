"""WireReader: bounds-checked big-endian primitives over bytes, like Wireshark's tvb_get_*.

Every read checks what remains before it allocates, and raises Truncated or BadLength with the
offset. `pos` is the offset of the next byte, relative to the start of `buf`.
"""

from __future__ import annotations

import struct
import uuid as _uuid

from kdissect.errors import BadLength, BadValue, Truncated
from kdissect.wire.varint import uvarint_at, zigzag

_I8 = struct.Struct(">b").unpack_from
_U8 = struct.Struct(">B").unpack_from
_I16 = struct.Struct(">h").unpack_from
_U16 = struct.Struct(">H").unpack_from
_I32 = struct.Struct(">i").unpack_from
_U32 = struct.Struct(">I").unpack_from
_I64 = struct.Struct(">q").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_F64 = struct.Struct(">d").unpack_from


class WireReader:
    """A cursor over an immutable byte buffer. `end` bounds every read (a sub-view's limit)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else min(end, len(buf))

    # -- bookkeeping -------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def need(self, n: int) -> None:
        if n < 0:
            raise BadLength(f"negative length {n}", self.pos)
        if self.pos + n > self.end:
            raise Truncated(f"needs {n} bytes, {self.end - self.pos} remain", self.pos)

    def skip(self, n: int) -> None:
        self.need(n)
        self.pos += n

    def sub(self, n: int) -> WireReader:
        """A reader over the next n bytes; this reader moves past them."""
        self.need(n)
        r = WireReader(self.buf, self.pos, self.pos + n)
        self.pos += n
        return r

    # -- fixed-width integers ----------------------------------------------------------

    def int8(self) -> int:
        p = self.pos
        if p + 1 > self.end:
            raise Truncated("int8 past the end", p)
        self.pos = p + 1
        return int(_I8(self.buf, p)[0])

    def uint8(self) -> int:
        p = self.pos
        if p + 1 > self.end:
            raise Truncated("uint8 past the end", p)
        self.pos = p + 1
        return int(self.buf[p])

    def int16(self) -> int:
        p = self.pos
        if p + 2 > self.end:
            raise Truncated("int16 past the end", p)
        self.pos = p + 2
        return int(_I16(self.buf, p)[0])

    def uint16(self) -> int:
        p = self.pos
        if p + 2 > self.end:
            raise Truncated("uint16 past the end", p)
        self.pos = p + 2
        return int(_U16(self.buf, p)[0])

    def int32(self) -> int:
        p = self.pos
        if p + 4 > self.end:
            raise Truncated("int32 past the end", p)
        self.pos = p + 4
        return int(_I32(self.buf, p)[0])

    def uint32(self) -> int:
        p = self.pos
        if p + 4 > self.end:
            raise Truncated("uint32 past the end", p)
        self.pos = p + 4
        return int(_U32(self.buf, p)[0])

    def int64(self) -> int:
        p = self.pos
        if p + 8 > self.end:
            raise Truncated("int64 past the end", p)
        self.pos = p + 8
        return int(_I64(self.buf, p)[0])

    def uint64(self) -> int:
        p = self.pos
        if p + 8 > self.end:
            raise Truncated("uint64 past the end", p)
        self.pos = p + 8
        return int(_U64(self.buf, p)[0])

    def float64(self) -> float:
        p = self.pos
        if p + 8 > self.end:
            raise Truncated("float64 past the end", p)
        self.pos = p + 8
        return float(_F64(self.buf, p)[0])

    def boolean(self) -> bool:
        return self.uint8() != 0

    # -- variable-length integers ------------------------------------------------------

    def uvarint(self) -> int:
        """Unsigned LEB128 (protobuf, Kafka); at most 10 bytes."""
        v, self.pos = uvarint_at(self.buf, self.pos, self.end)
        return v

    def varint(self) -> int:
        """Zig-zag signed varint (Kafka records)."""
        return zigzag(self.uvarint())

    def uvarint32(self) -> int:
        """Unsigned varint that must fit in 32 bits (Kafka compact lengths)."""
        v = self.uvarint()
        if v > 0xFFFFFFFF:
            raise BadValue(f"varint {v} exceeds 32 bits", self.pos)
        return v

    # -- byte strings ------------------------------------------------------------------

    def raw(self, n: int) -> bytes:
        if n < 0:
            raise BadLength(f"negative length {n}", self.pos)
        p = self.pos
        if p + n > self.end:
            raise Truncated(f"{n} bytes needed, {self.end - p} remain", p)
        self.pos = p + n
        return bytes(self.buf[p : p + n])

    def rest(self) -> bytes:
        p = self.pos
        self.pos = self.end
        return bytes(self.buf[p : self.end])

    def peek(self, n: int) -> bytes:
        return bytes(self.buf[self.pos : min(self.pos + n, self.end)])

    def text(self, n: int) -> str:
        return self.raw(n).decode("utf-8", "replace")

    def string16(self) -> str | None:
        """int16 length + UTF-8; -1 is null."""
        n = self.int16()
        if n == -1:
            return None
        if n < -1:
            raise BadLength(f"string length {n}", self.pos - 2)
        return self.text(n)

    def bytes32(self) -> bytes | None:
        """int32 length + bytes; -1 is null."""
        n = self.int32()
        if n == -1:
            return None
        if n < -1:
            raise BadLength(f"bytes length {n}", self.pos - 4)
        return self.raw(n)

    def compact_string(self) -> str | None:
        """uvarint (length + 1) + UTF-8; 0 is null."""
        n = self.uvarint32()
        if n == 0:
            return None
        return self.text(n - 1)

    def uuid(self) -> str:
        return str(_uuid.UUID(bytes=self.raw(16)))

    # -- counts ------------------------------------------------------------------------

    def count(self, n: int, min_size: int = 1) -> int:
        """Check an element count against what remains (each element takes >= min_size bytes)."""
        if n < 0:
            raise BadLength(f"negative count {n}", self.pos)
        if n * min_size > self.end - self.pos:
            raise BadLength(f"count {n} exceeds the {self.end - self.pos} bytes that remain", self.pos)
        return n
