"""CaptureSource for files: classic pcap (microsecond and nanosecond, both byte orders) and
pcapng (several sections, several interfaces each with its own link type and timestamp
resolution), plain or gzip-compressed. Records are read one at a time: memory stays flat.

The classic-pcap global header is parsed with dpkt's FileHdr; the record loop is our own so
that a file cut mid-record (a killed tcpdump) decodes up to the cut and reports it once, and
pcapng is read block by block because dpkt's pcapng reader knows one interface only.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import dpkt

from kdissect.errors import UsageError

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC = b"\x1f\x8b"
MAX_RECORD = 256 * 1024 * 1024  # a record larger than this is corruption


@dataclass(frozen=True, slots=True)
class RawFrame:
    number: int  # 1-based, like Wireshark's frame numbers
    ts: float  # seconds since the epoch
    linktype: int
    data: bytes
    wirelen: int  # the packet's length on the wire (> len(data) when cut by the snaplen)


class CaptureFile:
    """Iterate RawFrames of a capture file. `warnings` collects problems with the file itself."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        self.bytes_read = 0
        try:
            raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise UsageError(f"cannot open {path}: {e.strerror or e}") from None
        head = raw.read(4)
        raw.seek(0)
        self._f: BinaryIO = gzip.open(raw) if head[:2] == GZIP_MAGIC else raw  # type: ignore[assignment]  # noqa: SIM115
        self._raw = raw
        try:
            self._magic = self._f.read(4)
        except (OSError, EOFError) as e:
            raise UsageError(f"{path}: not a readable capture ({e})") from None
        if self._magic not in PCAP_MAGICS and self._magic != PCAPNG_SHB:
            raise UsageError(f"{path}: not a pcap or pcapng capture")

    def close(self) -> None:
        self._f.close()
        self._raw.close()

    def __enter__(self) -> CaptureFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def size(self) -> int:
        """Size of the file on disk (compressed size for .gz)."""
        import os

        return os.path.getsize(self.path)

    def position(self) -> int:
        """Bytes consumed from the file on disk so far (for progress)."""
        return self._raw.tell()

    def __iter__(self) -> Iterator[RawFrame]:
        try:
            if self._magic == PCAPNG_SHB:
                yield from self._pcapng()
            else:
                yield from self._pcap()
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            self.warnings.append(f"{self.path}: read error after {self.bytes_read} bytes: {e}")

    def _cut(self, what: str) -> None:
        self.warnings.append(f"{self.path}: file cut inside {what}; decoded up to the cut")

    # -- classic pcap ------------------------------------------------------------------

    def _pcap(self) -> Iterator[RawFrame]:
        order, unit = PCAP_MAGICS[self._magic]
        rest = self._f.read(20)
        if len(rest) < 20:
            raise UsageError(f"{self.path}: pcap header cut short")
        hdr_cls = dpkt.pcap.LEFileHdr if order == "<" else dpkt.pcap.FileHdr
        fh = hdr_cls(self._magic + rest)
        linktype = fh.linktype & 0x0FFFFFFF
        rec = struct.Struct(order + "IIII")
        read = self._f.read
        number = 0
        self.bytes_read = 24
        while True:
            h = read(16)
            if len(h) < 16:
                if h:
                    self._cut("a record header")
                return
            sec, frac, caplen, wirelen = rec.unpack(h)
            if caplen > MAX_RECORD:
                self.warnings.append(f"{self.path}: record {number + 1} claims {caplen} bytes; stopped")
                return
            data = read(caplen)
            self.bytes_read += 16 + len(data)
            if len(data) < caplen:
                self._cut(f"frame {number + 1}")
                return
            number += 1
            yield RawFrame(number, sec + frac * unit, linktype, data, max(wirelen, caplen))

    # -- pcapng ------------------------------------------------------------------------

    def _pcapng(self) -> Iterator[RawFrame]:
        ifaces: list[tuple[int, float, int]] = []  # (linktype, seconds per tick, offset s)
        number = 0
        for btype, body, order in self._blocks():
            if btype == 0x0A0D0D0A:  # a new section: interface ids start again
                ifaces = []
            elif btype == 1:  # Interface Description Block
                ifaces.append(_idb(body, order))
            elif btype in (6, 3, 2):
                frame = _packet_block(btype, body, order, ifaces, number + 1)
                if frame is not None:
                    number += 1
                    yield frame

    def _blocks(self) -> Iterator[tuple[int, bytes, str]]:
        """(block type, body, byte order) of each pcapng block; stops at a cut or bad block."""
        read = self._f.read
        order = "<"
        h = self._magic + read(4)
        while len(h) == 8:
            if h[0:4] == PCAPNG_SHB:
                bom = read(4)
                order = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
                btype, blen, head = 0x0A0D0D0A, struct.unpack(order + "I", h[4:8])[0], bom
            else:
                btype, blen = struct.unpack(order + "II", h)
                head = b""
            if not 12 + len(head) <= blen <= MAX_RECORD:
                self.warnings.append(f"{self.path}: bad pcapng block length {blen}; stopped")
                return
            body = head + read(blen - 12 - len(head))
            trailer = read(4)
            self.bytes_read += 12 + len(body)
            if len(body) < blen - 12 or len(trailer) < 4:
                self._cut("a pcapng block")
                return
            yield btype, body, order
            h = read(8)
        if h:
            self._cut("a block header")


def _idb(body: bytes, order: str) -> tuple[int, float, int]:
    linktype = struct.unpack_from(order + "H", body, 0)[0]
    tick = 1e-6
    offset = 0
    pos = 8
    while pos + 4 <= len(body):
        code, length = struct.unpack_from(order + "HH", body, pos)
        value = body[pos + 4 : pos + 4 + length]
        if code == 0:
            break
        if code == 9 and length >= 1:  # if_tsresol
            v = value[0]
            tick = 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -(v & 0x7F)
        elif code == 14 and length >= 8:  # if_tsoffset
            offset = struct.unpack(order + "q", value[:8])[0]
        pos += 4 + ((length + 3) & ~3)
    return linktype, tick, offset


def _packet_block(btype: int, body: bytes, order: str, ifaces: list[tuple[int, float, int]],
                  number: int) -> RawFrame | None:
    if btype == 6:  # Enhanced Packet Block
        if len(body) < 20:
            return None
        iface, hi, lo, caplen, wirelen = struct.unpack_from(order + "IIIII", body, 0)
        data = body[20 : 20 + caplen]
    elif btype == 3:  # Simple Packet Block: interface 0, no timestamp
        if len(body) < 4:
            return None
        iface, hi, lo = 0, 0, 0
        wirelen = struct.unpack_from(order + "I", body, 0)[0]
        data = body[4 : 4 + wirelen]
    else:  # obsolete Packet Block
        if len(body) < 20:
            return None
        iface = struct.unpack_from(order + "H", body, 0)[0]
        hi, lo, caplen, wirelen = struct.unpack_from(order + "IIII", body, 4)
        data = body[20 : 20 + caplen]
    if iface >= len(ifaces):
        return None
    linktype, tick, offset = ifaces[iface]
    ts = ((hi << 32) | lo) * tick + offset
    return RawFrame(number, ts, linktype, data, max(wirelen, len(data)))
