"""LEB128 varints over a buffer position: the one implementation behind WireReader, Kafka
records and the protobuf walker. Each returns (value, next position)."""

from __future__ import annotations

from kdissect import accel
from kdissect.errors import BadValue, Truncated


def uvarint_at(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at pos (at most 10 bytes, before end)."""
    if pos < end and buf[pos] < 0x80:  # the common one-byte case, without the loop
        return buf[pos], pos + 1
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise Truncated("varint past the end", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise BadValue("varint longer than 10 bytes", start)


def zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def varint_at(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The zig-zag signed varint at pos (Kafka records, protobuf sint)."""
    if pos < end and buf[pos] < 0x80:
        v = buf[pos]
        return (v >> 1) ^ -(v & 1), pos + 1
    v, pos = uvarint_at(buf, pos, end)
    return (v >> 1) ^ -(v & 1), pos


accel.bind(globals(), "kdissect.wire._varint", ("uvarint_at", "varint_at"))
