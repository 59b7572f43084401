"""CaptureSource for files: classic pcap (microsecond and nanosecond, both byte orders) and
pcapng (several sections, several interfaces each with its own link type and timestamp
resolution), plain or gzip-compressed. Records are read one at a time: memory stays flat.

The format is recognised from the first bytes without seeking, so standard input (`-`), pipes
and FIFOs are read like files. Both formats are read with struct, not a packet library: a file
cut mid-record (a killed tcpdump) or a damaged gzip stream decodes up to the cut and reports it
once, and pcapng is read block by block, each interface with its own link type.
"""

from __future__ import annotations

import heapq
import io
import os
import stat
import struct
import sys
import zlib
from array import array
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import BinaryIO, Protocol

from kdissect.errors import UsageError

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC = b"\x1f\x8b"
GZIP_CUT = "gzip data cut short"
# A record larger than this is corruption (Wireshark refuses a packet past 256 KiB on the link
# types kdissect reads; a segmentation-offload frame is at most 64 KiB, or 512 KiB with BIG TCP).
# A record is held two or three times over as it is read and decoded: a 256 MiB record of a few
# hundred KB of gzip took 442 MB.
MAX_RECORD = 64 * 1024 * 1024
STDIN = "-"  # the path that means standard input, as for tshark -r -
_CHUNK = 64 * 1024  # bytes read from the file at a time
_BIG = 1024 * 1024  # a record larger than this is read in pieces (its length may be a lie)
BYTE_ORDER_MAGICS = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}
# A gzip capture is read past FREE_RECORDS records (pcap records or pcapng blocks) only while
# it has at most one for every compressed byte: a real capture's varying times and addresses
# take several compressed bytes a record, while a repeated record compresses to a fraction of a
# byte (a megabyte of gzip inflates to 67 million empty records, each costing a few µs).
FREE_RECORDS = 1 << 20
_CHECK_EVERY = 0xFFFF  # records between two checks of that bound, less one (a power of two)
# ... and past FREE_INFLATED bytes only while it has inflated to at most INFLATED_PER_BYTE bytes
# a compressed byte: real captures deflate a few to one, where a megabyte of gzip inflates to a
# gigabyte of large records of zeros (few records, each taking the TCP and framing layers' time).
FREE_INFLATED = 256 * 1024 * 1024
INFLATED_PER_BYTE = 100
_CHECK_BYTES = 16 * 1024 * 1024  # bytes read between two checks at most

# A pcapng interface: link type, seconds per tick, offset (s), and ticks per second when that is a
# power of ten (else 0): a time is then whole seconds + the rest * tick, as the classic format's
# and the live capture's are, so the same instant gives the same float from every source.
Interface = tuple[int, float, int, int]


class Interfaces:
    """The interfaces of a pcapng section, in four arrays (28 bytes each: a section may describe
    millions of them), read as Interface tuples (None: a block too short to describe one)."""

    __slots__ = ("_links", "_ticks", "_offsets", "_per_second", "_last")

    def __init__(self) -> None:
        self._links = array("i")  # -1: not described
        self._ticks = array("d")
        self._offsets = array("q")
        self._per_second = array("q")
        self._last: tuple[int, Interface | None] = (-1, None)  # the one looked up last

    def append(self, iface: Interface | None) -> None:
        link, tick, offset, per_second = iface if iface is not None else (-1, 0.0, 0, 0)
        self._links.append(link)
        self._ticks.append(tick)
        self._offsets.append(offset)
        self._per_second.append(per_second)

    def __len__(self) -> int:
        return len(self._links)

    def __getitem__(self, i: int) -> Interface | None:
        last = self._last
        if last[0] == i:
            return last[1]
        link = self._links[i]
        iface = None if link < 0 else (link, self._ticks[i], self._offsets[i], self._per_second[i])
        self._last = (i, iface)
        return iface


class RawFrame:
    """One captured frame: its number (1-based, like Wireshark's frame numbers), time (seconds
    since the epoch), link type, captured bytes, and length on the wire (> len(data) when cut by
    the snaplen). Compared, hashed and shown as a frozen dataclass of those five fields, and not
    to be assigned: an extension type with read-only fields when compiled (pcapfile.pxd), whose
    __init__ sets them in C (a dataclass's generated __init__ runs as Python code, once a frame)."""

    __slots__ = ("number", "ts", "linktype", "data", "wirelen")
    __match_args__ = ("number", "ts", "linktype", "data", "wirelen")

    def __init__(self, number: int, ts: float, linktype: int, data: bytes, wirelen: int) -> None:
        self.number = number
        self.ts = ts
        self.linktype = linktype
        self.data = data
        self.wirelen = wirelen

    def _values(self) -> tuple[int, float, int, bytes, int]:
        return (self.number, self.ts, self.linktype, self.data, self.wirelen)

    def __eq__(self, other: object) -> bool:
        """Field by field, as a dataclass's."""
        if not isinstance(other, RawFrame) or type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return (f"RawFrame(number={self.number!r}, ts={self.ts!r}, linktype={self.linktype!r}, "
                f"data={self.data!r}, wirelen={self.wirelen!r})")

    def __reduce__(self) -> tuple[type[RawFrame], tuple[int, float, int, bytes, int]]:
        return (RawFrame, self._values())


class _Source(io.RawIOBase):
    """The bytes of a capture from a file object that need not be seekable: first `head` (the
    bytes already read to recognise the format), then the rest, inflated on the fly when the
    file is gzip (several members, zero padding between them). Damage to the gzip stream ends
    it: `error` says what happened, and everything inflated before it has been delivered (zlib
    drops the output of a call that fails, so the failing input is fed again a byte at a time)."""

    def __init__(self, f: BinaryIO, head: bytes, gz: bool) -> None:
        super().__init__()
        self._read = getattr(f, "read1", f.read)
        self._readinto = getattr(f, "readinto1", None) or getattr(f, "readinto", None)
        self._pending = head
        self.consumed = len(head)  # bytes taken from the file (compressed bytes for gzip)
        self.delivered = 0  # bytes handed on (inflated bytes for gzip)
        self.error: str | None = None
        self.gz = gz
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
        self._tail = b""  # input the last call left unconsumed (its output reached the limit)
        self._careful: memoryview | None = None  # input being fed again a byte at a time
        self._at = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def _more(self) -> bytes:
        if self._careful is not None:
            data = bytes(self._careful[self._at : self._at + 1])
            self._at += 1
            if self._at >= len(self._careful):
                self._careful = None
            return data
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        data = self._read(_CHUNK)
        self.consumed += len(data)
        return data

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        n = len(b)
        if self._z is None:
            if self._pending:
                data, self._pending = self._pending[:n], self._pending[n:]
            elif self._readinto is not None:
                got = self._readinto(b) or 0
                self.consumed += got
                self.delivered += got
                return got
            else:
                data = self._read(n)
                self.consumed += len(data)
        else:
            data = self._inflate(n)
        b[: len(data)] = data
        self.delivered += len(data)
        return len(data)

    def _inflate(self, n: int) -> bytes:
        while not self._done:
            z = self._z
            assert z is not None
            retrying = self._careful is not None  # (taking its last byte ends the retry)
            if z.eof:  # the end of a member: another one may follow, after zero padding
                src = z.unused_data.lstrip(b"\0")
                while not src:
                    src = self._more()
                    if not src:
                        self._done = True
                        return b""
                    src = src.lstrip(b"\0")
                z = self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                src = self._tail or self._more()
            if not src:
                self._done = True
                self.error = GZIP_CUT
                return b""
            before = None if retrying else z.copy()
            try:
                out = z.decompress(src, n)
            except zlib.error as e:
                if before is None:
                    self._done = True
                    self.error = f"corrupt gzip data ({e})"
                    return b""
                self._z = before  # again, a byte at a time, to deliver what precedes the damage
                self._careful, self._at, self._tail = memoryview(src), 0, b""
                continue
            self._tail = z.unconsumed_tail
            if out:
                return out
        return b""


class CaptureFile:
    """Iterate RawFrames of a capture file. `warnings` collects problems with the file itself.

    `path` "-" reads standard input; `stream`, if given, is read instead of opening `path`
    (which then only names the capture in messages)."""

    def __init__(self, path: str, stream: BinaryIO | None = None) -> None:
        self.path = path
        self.name = capture_name(path) if stream is None else path
        self.warnings: list[str] = []
        self.bytes_read = 0
        self._owned: BinaryIO | None = None
        if stream is None:
            stream = _stdin() if path == STDIN else self._open(path)
        try:
            head = _head(stream)
            self._src = _Source(stream, head, head[:2] == GZIP_MAGIC)
            self._f = io.BufferedReader(self._src, _CHUNK)
            self._magic = self._f.read(4)
        except OSError as e:
            self.close()
            raise UsageError(f"{self.name}: not a readable capture ({e.strerror or e})") from None
        if self._magic not in PCAP_MAGICS and self._magic != PCAPNG_SHB:
            self.close()
            if self._src.error is not None:
                raise UsageError(f"{self.name}: not a readable capture ({self._src.error})")
            raise UsageError(f"{self.name}: not a pcap or pcapng capture")
        if self._magic in PCAP_MAGICS:
            self._pcap_header = self._f.read(20)
            if len(self._pcap_header) < 20:
                self.close()
                raise UsageError(f"{self.name}: pcap header cut short")

    def _open(self, path: str) -> BinaryIO:
        if os.path.isdir(path):
            raise UsageError(f"cannot open {path}: it is a directory, not a capture file")
        try:
            self._owned = open(path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise UsageError(f"cannot open {path}: {e.strerror or e}") from None
        return self._owned

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> CaptureFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def position(self) -> int:
        """Bytes consumed from the file so far (compressed bytes for .gz; for progress)."""
        return self._src.consumed

    def __iter__(self) -> Iterator[RawFrame]:
        try:
            if self._magic == PCAPNG_SHB:
                yield from self._pcapng()
            else:
                yield from self._pcap()
        except (OSError, EOFError) as e:
            self.warnings.append(f"{self.name}: read error after {self.bytes_read} bytes: {e}")
        if self._src.error is not None:
            what = "cut" if self._src.error == GZIP_CUT else "damage"
            self.warnings.append(f"{self.name}: {self._src.error} after {self._src.delivered} bytes of "
                                 f"capture; decoded up to the {what}")

    def _cut(self, what: str) -> None:
        if self._src.error is None:  # else the damaged gzip stream is reported, once, at the end
            self.warnings.append(f"{self.name}: file cut inside {what}; decoded up to the cut")

    def _bomb(self, records: int) -> bool:
        """Whether a gzip capture has inflated to more records or bytes than its compressed bytes
        allow (FREE_RECORDS, FREE_INFLATED); if so it is reported."""
        src = self._src
        if not src.gz:
            return False
        if records > FREE_RECORDS and records > src.consumed:
            what = f"{records} records inflated from {src.consumed} bytes of gzip (more than one a compressed byte)"
        elif src.delivered > FREE_INFLATED and src.delivered > INFLATED_PER_BYTE * src.consumed:
            what = (f"{src.delivered} bytes inflated from {src.consumed} bytes of gzip (more than "
                    f"{INFLATED_PER_BYTE} a compressed byte)")
        else:
            return False
        self.warnings.append(f"{self.name}: {what}: stopped, as a decompression bomb")
        return True

    def _read_big(self, n: int) -> bytes:
        """n bytes (fewer at the end of the file) without trusting n for one allocation."""
        parts = []
        while n > 0:
            part = self._f.read(min(n, _BIG))
            if not part:
                break
            parts.append(part)
            n -= len(part)
        return b"".join(parts)

    # -- classic pcap ------------------------------------------------------------------

    def _pcap(self) -> Iterator[RawFrame]:
        order, unit = PCAP_MAGICS[self._magic]
        # after the magic: version (2 + 2), thiszone, sigfigs, snaplen, linktype (4 each)
        linktype = struct.unpack_from(order + "I", self._pcap_header, 16)[0] & 0x0FFFFFFF
        unpack = struct.Struct(order + "IIII").unpack
        read = self._f.read
        big, frame = _BIG, RawFrame  # (locals: this loop runs once per packet)
        number = 0
        self.bytes_read = 24
        check = _CHECK_BYTES  # bytes read at the next check for a bomb
        while True:
            h = read(16)
            if len(h) < 16:
                if h:
                    self._cut("a record header")
                return
            sec, frac, caplen, wirelen = unpack(h)
            if caplen > MAX_RECORD:
                self.warnings.append(f"{self.name}: record {number + 1} claims {caplen} bytes; stopped")
                return
            data = read(caplen) if caplen <= big else self._read_big(caplen)
            self.bytes_read += 16 + len(data)
            if len(data) < caplen:
                self._cut(f"frame {number + 1}")
                return
            number += 1
            if not number & _CHECK_EVERY or self.bytes_read >= check:
                check = self.bytes_read + _CHECK_BYTES
                if self._bomb(number):
                    return
            yield frame(number, sec + frac * unit, linktype, data, wirelen if wirelen > caplen else caplen)

    # -- pcapng ------------------------------------------------------------------------

    def _pcapng(self) -> Iterator[RawFrame]:
        ifaces = Interfaces()
        number = 0
        skipped = 0
        for btype, body, order in self._blocks():
            if btype == 0x0A0D0D0A:  # a new section: interface ids start again
                ifaces = Interfaces()
            elif btype == 1:  # Interface Description Block
                ifaces.append(parse_idb(body, order))
            elif btype in (6, 3, 2):
                frame = parse_packet_block(btype, body, order, ifaces, number + 1)
                if frame is None:
                    skipped += 1
                    continue
                number += 1
                yield frame
        if skipped:
            blocks = "packet block" if skipped == 1 else "packet blocks"
            self.warnings.append(f"{self.name}: {skipped} {blocks} skipped (too short, or on an interface "
                                 "the capture does not describe)")

    def _blocks(self) -> Iterator[tuple[int, bytes, str]]:
        """(block type, body, byte order) of each pcapng block; stops at a cut or bad block."""
        read = self._f.read
        order = "<"
        blocks = 0
        check = _CHECK_BYTES  # bytes read at the next check for a bomb
        h = self._magic + read(4)
        while len(h) == 8:
            blocks += 1
            if not blocks & _CHECK_EVERY or self.bytes_read >= check:
                check = self.bytes_read + _CHECK_BYTES
                if self._bomb(blocks):
                    return
            if h[0:4] == PCAPNG_SHB:
                bom = read(4)
                if len(bom) == 4 and bom not in BYTE_ORDER_MAGICS:
                    self.warnings.append(f"{self.name}: bad pcapng section header; stopped")
                    return
                order = BYTE_ORDER_MAGICS.get(bom, "<")
                btype, blen, head = 0x0A0D0D0A, struct.unpack(order + "I", h[4:8])[0], bom
            else:
                btype, blen = struct.unpack(order + "II", h)
                head = b""
            if not 12 + len(head) <= blen <= MAX_RECORD:
                self.warnings.append(f"{self.name}: bad pcapng block length {blen}; stopped")
                return
            want = blen - 12 - len(head)
            body = head + (read(want) if want <= _BIG else self._read_big(want))
            trailer = read(4)
            self.bytes_read += 12 + len(body)
            if len(body) < blen - 12 or len(trailer) < 4:
                self._cut("a pcapng block")
                return
            yield btype, body, order
            h = read(8)
        if h:
            self._cut("a block header")


def parse_idb(body: bytes, order: str) -> Interface | None:
    """(link type, seconds per tick, offset in seconds, ticks per second or 0) of an Interface
    Description Block; None when the block is too short for its fixed part. An option cut by the
    block's end is ignored."""
    if len(body) < 8:
        return None
    linktype = struct.unpack_from(order + "H", body, 0)[0]
    tick = 1e-6
    per_second = 1_000_000
    offset = 0
    pos = 8
    while pos + 4 <= len(body):
        code, length = struct.unpack_from(order + "HH", body, pos)
        value = body[pos + 4 : pos + 4 + length]
        if code == 0 or len(value) < length:
            break
        if code == 9 and length >= 1:  # if_tsresol
            v = value[0]
            tick = 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -(v & 0x7F)
            per_second = 0 if v & 0x80 or (v & 0x7F) > 18 else 10 ** (v & 0x7F)
        elif code == 14 and length >= 8:  # if_tsoffset
            offset = struct.unpack_from(order + "q", value, 0)[0]
        pos += 4 + ((length + 3) & ~3)
    return linktype, tick, offset, per_second


def parse_packet_block(btype: int, body: bytes, order: str, ifaces: Sequence[Interface | None] | Interfaces,
                       number: int) -> RawFrame | None:
    """The frame of a packet block (type 6, 3 or 2); None when the block is too short or its
    interface is not described."""
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
    described = ifaces[iface] if iface < len(ifaces) else None
    if described is None:
        return None
    linktype, tick, offset, per_second = described
    ticks = (hi << 32) | lo
    if per_second:
        sec, rest = divmod(ticks, per_second)
        ts = sec + rest * tick + offset
    else:
        ts = ticks * tick + offset
    return RawFrame(number, ts, linktype, data, max(wirelen, len(data)))


class CaptureSource(Protocol):
    """What the pipeline reads frames from: one capture file, or several merged."""

    name: str
    warnings: list[str]

    def __iter__(self) -> Iterator[RawFrame]: ...

    def position(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> CaptureSource: ...

    def __exit__(self, *exc: object) -> None: ...


class MergedCapture:
    """Several capture files read as one, in time order, as `mergecap` merges them: a streaming
    k-way merge on the timestamps (each file is taken in its own order; at equal times the file
    named first comes first). Frames are numbered in the merged order, as in mergecap's output.
    One record per file is held at a time: memory stays flat."""

    def __init__(self, paths: Sequence[str]) -> None:
        if list(paths).count(STDIN) > 1:
            raise UsageError("standard input (-) can be read once only")
        self.files: list[CaptureFile] = []
        try:
            for p in paths:
                self.files.append(CaptureFile(p))
        except UsageError:
            self.close()
            raise
        self.name = captures_name(paths)
        self.warnings: list[str] = []

    def __iter__(self) -> Iterator[RawFrame]:
        frame = RawFrame
        merged = heapq.merge(*self.files, key=attrgetter("ts"))
        for number, f in enumerate(merged, 1):
            yield frame(number, f.ts, f.linktype, f.data, f.wirelen)
        for cap in self.files:
            self.warnings.extend(cap.warnings)

    def position(self) -> int:
        """Bytes consumed from all the files so far (for progress)."""
        return sum(f.position() for f in self.files)

    def close(self) -> None:
        for f in self.files:
            f.close()

    def __enter__(self) -> MergedCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_capture(paths: str | Sequence[str]) -> CaptureSource:
    """One capture file, or several merged in time order (`-` is standard input)."""
    if isinstance(paths, str):
        return CaptureFile(paths)
    if not paths:
        raise UsageError("no capture file given")
    return CaptureFile(paths[0]) if len(paths) == 1 else MergedCapture(paths)


def capture_name(path: str) -> str:
    """How messages name the capture at `path`."""
    return "standard input" if path == STDIN else path


def captures_name(paths: str | Sequence[str]) -> str:
    """How messages name one capture or several merged."""
    if isinstance(paths, str):
        return capture_name(paths)
    return ", ".join(capture_name(p) for p in paths)


def captures_size(paths: str | Sequence[str]) -> int:
    """The total size of the regular files among `paths` (for progress)."""
    if isinstance(paths, str):
        return capture_size(paths)
    return sum(capture_size(p) for p in paths)


def capture_size(path: str) -> int:
    """The size of a regular file, else 0 (standard input, pipes, FIFOs: not known in advance)."""
    if path == STDIN:
        return 0
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _head(stream: BinaryIO) -> bytes:
    """The first bytes of a capture, four at least unless it is shorter, and whatever more the
    stream already holds: a buffered stream asked later for more than it holds would wait for
    more to come, so that the bytes of a live pipe would be decoded only once the next arrive."""
    read1 = getattr(stream, "read1", None)
    if read1 is None:
        return stream.read(4)
    head = b""
    while len(head) < 4:
        more = read1(_CHUNK)
        if not more:
            break
        head += more
    return head


def _stdin() -> BinaryIO:
    """Standard input as bytes, for the path "-"."""
    if sys.stdin is None:
        raise UsageError("no standard input to read a capture from")
    if sys.stdin.isatty():
        raise UsageError("standard input is a terminal: pipe a capture into it, or name a file")
    return sys.stdin.buffer
