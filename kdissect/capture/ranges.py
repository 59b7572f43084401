"""Reading a capture file by byte ranges, each range by its own reader (a worker of a cluster).

A reader of the range [start, end) finds where records start in it, reads the records that
start in it (past `end` just far enough to finish the last one) and says where the following
range's first record must start. `stitch` checks that the ranges of a file agree and gives
the frame numbers they start at, so that their frames, concatenated, are the sequential
reader's (pcapfile.CaptureFile). The first range starts where the file's head says records
start; a later one scans for a candidate boundary that chains to the following records. A
wrong guess is caught by `stitch`, which then says to read the file whole.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

from kdissect.capture.pcapfile import (
    BYTE_ORDER_MAGICS,
    MAX_RECORD,
    PCAP_MAGICS,
    PCAPNG_SHB,
    Interface,
    RawFrame,
    parse_idb,
    parse_packet_block,
)

HEAD = 1 << 20  # bytes the coordinator reads from the file's start to learn its layout
_K = 8  # records a candidate boundary must chain to (fewer when the chain reaches the file's end)
_LOOK = 1 << 20  # bytes past a candidate that validating it may look at
_CHUNK = 256 * 1024  # bytes read from the file at a time
_SNAP = 262144  # a classic record is plausible up to this or the file's snaplen if larger
_GAP = 86400  # seconds at most between the times of consecutive classic records of a plausible chain
_IMPLAUSIBLE = (0, 0, False)
_SHB_TYPE = 0x0A0D0D0A
_IDB_TYPE = 1
_PACKET_BLOCKS = (6, 3, 2)
# pcapng block types a candidate boundary may have: section header, interface description,
# obsolete packet, simple packet, name resolution, interface statistics, enhanced packet,
# IRIG timestamp, ARINC 429, systemd journal export, decryption secrets, custom (two kinds).
_BLOCK_TYPES = frozenset((_SHB_TYPE, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xBAD, 0x40000BAD))


@dataclass(frozen=True, slots=True)
class Layout:
    """What reading a range of a capture needs from the head of its file."""

    kind: str  # "pcap" or "pcapng"
    order: str  # "<" or ">"
    data_start: int  # the first record (pcap), or the first block after the head's SHB and IDBs
    linktype: int = 0  # pcap
    unit: float = 1e-6  # pcap: seconds per timestamp fraction tick
    snaplen: int = 0  # pcap
    interfaces: tuple[Interface | None, ...] = ()  # pcapng: the interfaces of the head's section


def layout(head: bytes) -> Layout | None:
    """The layout from the first bytes of a file (up to HEAD); None when the file cannot be read by
    ranges: gzip, not a capture, a pcap header cut short, a pcapng whose first section header and
    interface blocks (everything before its first block of another kind) do not fit in `head`."""
    if head[:4] in PCAP_MAGICS:
        return _pcap_layout(head)
    if head[:4] == PCAPNG_SHB:
        return _pcapng_layout(head)
    return None


def _pcap_layout(head: bytes) -> Layout | None:
    if len(head) < 24:
        return None
    order, unit = PCAP_MAGICS[head[:4]]
    snaplen, linktype = struct.unpack_from(order + "II", head, 16)
    return Layout("pcap", order, 24, linktype & 0x0FFFFFFF, unit, snaplen)


def _pcapng_layout(head: bytes) -> Layout | None:
    """The section header and the interface blocks after it, with the sequential reader's checks."""
    order = BYTE_ORDER_MAGICS.get(head[8:12])
    if order is None:
        return None
    unpack = struct.Struct(order + "II").unpack_from
    ifaces: list[Interface | None] = []
    pos = 0
    while len(head) - pos >= 8:
        btype, blen = unpack(head, pos)
        if pos and btype != _IDB_TYPE:
            break
        if not (12 if pos else 16) <= blen <= MAX_RECORD or pos + blen > len(head):
            return None
        if pos:
            ifaces.append(parse_idb(head[pos + 8 : pos + blen - 4], order))
        pos += blen
    return Layout("pcapng", order, pos, interfaces=tuple(ifaces))


@dataclass(slots=True)
class Span:
    """What reading one range found."""

    first: int | None = None  # the first record/block starting in the range (None: none starts in it)
    next: int | None = None  # just past the last record/block starting in the range, where the following
    # range's first must start; None when the sequential reader would stop inside this range
    frames: int = 0
    bytes_read: int = 0  # bytes read from the file by this range, scanning included
    late: bool = False  # pcapng: a section header or interface block in the range (reading stops there)


class _Window:
    """The bytes of a file up to `size`, read forward a chunk at a time from `base` (past `end`,
    only the bytes asked for); `read` counts the bytes taken from the file. `size` shrinks if
    the file turns out shorter."""

    def __init__(self, f: BinaryIO, size: int, base: int, end: int) -> None:
        self._f = f
        self.size = size
        self._end = end
        self._base = base  # the file offset of _buf[0]
        self._keep = base  # bytes before this may be dropped
        self._buf = b""
        self.read = 0

    def take(self, pos: int, n: int) -> bytes:
        """The file's bytes [pos, pos + n), fewer at its end; pos must not precede the last drop."""
        have = self._base + len(self._buf)
        want = min(pos + n, self.size)
        if want > have:
            self._fill(have, want)
        at = pos - self._base
        return self._buf[at : at + n]

    def drop(self, pos: int) -> None:
        """Bytes before pos will not be asked for again."""
        self._keep = pos

    def _fill(self, have: int, want: int) -> None:
        self._f.seek(have)
        data = self._f.read(min(max(min(_CHUNK, self._end - have), want - have), self.size - have))
        self.read += len(data)
        if have + len(data) < want:
            self.size = have + len(data)
        cut = max(0, min(self._keep, have) - self._base)
        self._buf = self._buf[cut:] + data
        self._base += cut


class RangeReader:
    """The frames of the records that start in [start, end) of a seekable file.

    head: whether the range starts at the file's head (else its first record is looked for;
    by default, whether it starts no later than the head says records do). more: the bytes
    end at `size` but the file goes on (a block of it, where nothing past the block can be
    read): a record cut there ends the range (`span.next`: its start), and a boundary candidate
    whose chain reaches it is refused (the bytes before a block's first record are put
    together with those of the block before)."""

    def __init__(self, f: BinaryIO, lay: Layout, start: int, end: int, size: int, *,
                 head: bool | None = None, more: bool = False) -> None:
        self._f = f
        self._lay = lay
        self._start = start
        self._end = end
        self._size = size
        self._head = start <= lay.data_start if head is None else head
        self._more = more
        self.span = Span()
        if lay.kind == "pcap":
            self._cap = min(MAX_RECORD, max(lay.snaplen, _SNAP))
            self._frac = round(1 / lay.unit) - 1
            self._header, self._align = 16, 1
            self._filter = _pcap_filter(lay.order, self._frac, self._cap)
            self._plausible, self._records = self._pcap_plausible, self._pcap
        else:
            self._header, self._align = 8, 4  # pcapng blocks are 32-bit aligned
            self._filter = re.compile(b"(?=" + b"|".join(re.escape(struct.pack(lay.order + "I", t))
                                                         for t in sorted(_BLOCK_TYPES)) + b")")
            self._plausible, self._records = self._pcapng_plausible, self._pcapng

    def __iter__(self) -> Iterator[RawFrame]:
        self.span = span = Span()
        lay = self._lay
        base = max(self._start, min(lay.data_start, self._size)) if self._head else self._start
        src = _Window(self._f, self._size, base, self._end)
        try:
            first = lay.data_start if self._head else self._scan(src)
            if first is None or first >= self._end:
                return
            span.first = first
            span.next = yield from self._records(src, first)
        finally:
            span.bytes_read = src.read

    # -- finding the first record --------------------------------------------------------

    def _scan(self, src: _Window) -> int | None:
        """The first offset in the range where a chain of plausible records starts."""
        pos = self._start
        while pos < min(self._end, src.size):
            n = min(_CHUNK, self._end - pos)
            for m in self._filter.finditer(src.take(pos, n + self._header - 1)):
                at = pos + m.start()
                if m.start() >= n:
                    break
                if at % self._align == 0 and self._chains(src, at):
                    return at
            pos += n
            src.drop(pos)
        return None

    def _chains(self, src: _Window, p: int) -> bool:
        """Whether K plausible records follow each other from p (fewer ending exactly at the file's
        end, or at least two before leaving the look-ahead window), their times at most _GAP apart
        and none of them a ghost."""
        limit = p + _LOOK
        q, last = p, -1
        for n in range(_K):
            if q >= src.size:
                return q == src.size and n > 0 and not self._more
            record = self._plausible(src, q, limit)
            if record is None:
                return n >= 2
            length, sec, ghost = record
            if not length or ghost or last >= 0 and abs(sec - last) > _GAP:
                return False
            q, last = q + length, sec
        return True

    def _pcap_plausible(self, src: _Window, q: int, limit: int) -> tuple[int, int, bool] | None:
        """(length, seconds, whether it may be a ghost) of a classic record at q, the length 0 if
        implausible; None if its header lies past `limit` (before the file's end). Plausible: a
        fraction below one second, 0 < caplen <= wirelen <= max(snaplen, _SNAP). A ghost: a
        header read four bytes late has the real caplen as its fraction and the real wirelen as
        its caplen, so in a capture taken whole it chains exactly like the real one; its fraction
        equals its caplen (as in one real record in a million)."""
        if q + 16 > limit:
            return None if limit < src.size else _IMPLAUSIBLE
        h = src.take(q, 16)
        if len(h) < 16:
            return _IMPLAUSIBLE
        sec, frac, caplen, wirelen = struct.unpack(self._lay.order + "IIII", h)
        if frac <= self._frac and 0 < caplen <= wirelen <= self._cap:
            return 16 + caplen, sec, frac == caplen
        return _IMPLAUSIBLE

    def _pcapng_plausible(self, src: _Window, q: int, limit: int) -> tuple[int, int, bool] | None:
        """(length, 0, False) of a pcapng block at q, the length 0 if implausible; None if its end
        lies past `limit` (before the file's end). Plausible: a known type, 12 <= length <=
        MAX_RECORD, a multiple of 4, repeated at the block's end."""
        if q + 8 > limit:
            return None if limit < src.size else _IMPLAUSIBLE
        h = src.take(q, 8)
        if len(h) < 8:
            return _IMPLAUSIBLE
        btype, blen = struct.unpack(self._lay.order + "II", h)
        if btype not in _BLOCK_TYPES or not 12 <= blen <= MAX_RECORD or blen % 4:
            return _IMPLAUSIBLE
        if q + blen > src.size and self._more:
            return _IMPLAUSIBLE
        if q + blen > limit:
            return None if limit < src.size else _IMPLAUSIBLE
        return (blen, 0, False) if src.take(q + blen - 4, 4) == h[4:8] else _IMPLAUSIBLE

    # -- reading the records, as the sequential reader does ------------------------------

    def _pcap(self, src: _Window, pos: int) -> Generator[RawFrame, None, int | None]:
        lay, span = self._lay, self.span
        unpack = struct.Struct(lay.order + "IIII").unpack
        while pos < self._end:
            src.drop(pos)
            h = src.take(pos, 16)
            if len(h) < 16:
                return pos if not h or self._more else None
            sec, frac, caplen, wirelen = unpack(h)
            if caplen > MAX_RECORD:
                return None
            data = src.take(pos + 16, caplen)
            if len(data) < caplen:
                return pos if self._more else None
            pos += 16 + caplen
            span.frames += 1
            yield RawFrame(span.frames, sec + frac * lay.unit, lay.linktype, data,
                           wirelen if wirelen > caplen else caplen)
        return pos

    def _pcapng(self, src: _Window, pos: int) -> Generator[RawFrame, None, int | None]:
        lay, span = self._lay, self.span
        unpack = struct.Struct(lay.order + "II").unpack
        while pos < self._end:
            src.drop(pos)
            h = src.take(pos, 8)
            if len(h) < 8:
                return pos if not h or self._more else None
            btype, blen = unpack(h)
            if btype in (_SHB_TYPE, _IDB_TYPE):
                span.late = True
                return None
            if not 12 <= blen <= MAX_RECORD:
                return None
            body = src.take(pos + 8, blen - 12)
            if len(body) < blen - 12 or len(src.take(pos + blen - 4, 4)) < 4:
                return pos if self._more else None
            pos += blen
            if btype in _PACKET_BLOCKS:
                frame = parse_packet_block(btype, body, lay.order, lay.interfaces, span.frames + 1)
                if frame is not None:
                    span.frames += 1
                    yield frame
        return pos


def _pcap_filter(order: str, frac_max: int, cap_max: int) -> re.Pattern[bytes]:
    """A quick test of a classic record header, in C: the two most significant bytes of its
    timestamp fraction and lengths within bounds, the captured length not 0 (the exact test
    follows)."""
    classes = [b"."] * 16
    for field, most in ((4, frac_max), (8, cap_max), (12, cap_max)):
        hi, lo = _top_classes(most)
        at_hi, at_lo = (field + 3, field + 2) if order == "<" else (field, field + 1)
        classes[at_hi], classes[at_lo] = hi, lo
    return re.compile(b"(?=" + b"".join(classes) + b")(?!.{8}\\x00{4})", re.DOTALL)  # caplen > 0


def _top_classes(most: int) -> tuple[bytes, bytes]:
    """Regex classes for the most and next most significant bytes of a 32-bit value <= most."""
    hi = most >> 24
    if hi:
        return b"[\\x00-\\x%02x]" % hi, b"."
    return b"\\x00", b"[\\x00-\\x%02x]" % (most >> 16 & 0xFF)


def stitch(lay: Layout, ranges: Sequence[tuple[int, int, Span]]) -> list[int | None] | None:
    """Given every range of a file in order (start, end, span), tiling [lay.data_start, size): the number of
    frames before each range (None: the range's frames are to be dropped, because the sequential reader
    stopped before it or no record starts in it), or None when the ranges disagree (a range's first record is
    not where the one before it says, a late pcapng block): then the file must be read whole."""
    expected: int | None = lay.data_start  # where the next record starts (None: the reading stopped)
    at = ranges[0][0] if ranges else lay.data_start
    if at > lay.data_start:
        return None
    offsets: list[int | None] = []
    frames = 0
    for start, end, span in ranges:
        if start != at:
            return None
        at = end
        if expected is None or expected >= end:
            offsets.append(None)
            continue
        if span.first != expected or span.late:
            return None
        offsets.append(frames)
        frames += span.frames
        expected = span.next
    return offsets if expected is None or expected == at else None


# -- blocks: a file cut at places nobody chose, each piece read without the others ----------

@dataclass(slots=True)
class Block:
    """What reading one block found: its span (`first` and `next` counted from the block's
    start, `bytes_read` its length), the bytes before its first record (`head`, None when too
    many to keep) and those from `next` to its end (`tail`: a record the block cut)."""

    span: Span
    head: bytes | None
    tail: bytes


def read_block(data: bytes, lay: Layout, at_head: bool, keep: int) -> tuple[list[RawFrame], Block]:
    """The frames of the records a block of a file holds whole (at_head: the block the file
    starts with), and what `join` needs of it; keep: the most bytes kept before its first record.
    A block ends with a newline that may not be the file's (the last block's, when the file does
    not end with one): the records are read up to it, and one that needs it is left to `join`."""
    end = max(0, len(data) - 1)
    reader = RangeReader(io.BytesIO(data), lay, 0, end, end, head=at_head, more=True)
    frames = list(reader)
    span = reader.span
    span.bytes_read = len(data)
    first = len(data) if span.first is None else span.first
    head = data[:first] if first <= keep else None
    tail = data[span.next:] if span.next is not None else b""
    return frames, Block(span, head, tail)


@dataclass(slots=True)
class Joined:
    """The blocks of a file put together: the frames before each block's (None: its frames
    are dropped, the sequential reader having stopped before), and the frames of the records
    that no block held whole, numbered as in the file."""

    offsets: list[int | None]
    frames: list[RawFrame]


def join(lay: Layout, size: int, blocks: Sequence[Block]) -> Joined | None:
    """The blocks of a file, in order (their bytes, end to end, are the file's, plus one newline
    when it does not end with one), put together; None when they disagree (not the file's size,
    a record boundary found inside a record, a late pcapng block, a head not kept): then the
    file must be read whole."""
    total = sum(b.span.bytes_read for b in blocks)
    if total not in (size, size + 1) or not blocks:
        return None
    pieces = _Pieces(blocks)
    rec = replace(lay, data_start=0)
    expected: int | None = lay.data_start  # where the next record starts (None: the reading stopped)
    out = Joined([], [])
    count = 0
    at = 0
    for b in blocks:
        span = b.span
        if span.late:
            return None
        if expected is None or span.first is None or at + span.first < expected:
            if expected is not None and span.first is not None:
                return None  # a boundary inside a record that started before it
            out.offsets.append(None)
            at += span.bytes_read
            continue
        gap = pieces.take(expected, at + span.first)
        if gap is None:
            return None
        frames, got = _records(gap, rec, count)
        if got.next != len(gap):
            return None
        out.frames += frames
        count += len(frames)
        out.offsets.append(count)
        count += span.frames
        expected = None if span.next is None else at + span.next
        at += span.bytes_read
    if expected is not None and expected < size:
        rest = pieces.take(expected, size)
        if rest is None:
            return None
        frames, got = _records(rest, rec, count)  # the file ends, maybe inside a record
        if got.late:
            return None
        out.frames += frames
    return out


def _records(data: bytes, lay: Layout, before: int) -> tuple[list[RawFrame], Span]:
    """The records of bytes that start with one, numbered after `before` frames, and the span
    (`next`: where they end; None: the sequential reader would stop inside them)."""
    if not data:
        return [], Span(next=0)
    reader = RangeReader(io.BytesIO(data), lay, 0, len(data), len(data), head=True)
    frames = [RawFrame(before + f.number, f.ts, f.linktype, f.data, f.wirelen) for f in reader]
    return frames, reader.span


class _Pieces:
    """The kept bytes of a file's blocks (their heads and tails) by file offset, taken in order."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self._kept: list[tuple[int, bytes]] = []
        at = 0
        for b in blocks:
            if b.head is not None:
                self._kept.append((at, b.head))
            if b.tail:
                self._kept.append((at + b.span.bytes_read - len(b.tail), b.tail))
            at += b.span.bytes_read
        self._i = 0

    def take(self, start: int, end: int) -> bytes | None:
        """The bytes [start, end), None unless kept pieces cover them all; later calls must ask
        for later bytes."""
        kept, out, at = self._kept, [], start
        while at < end:
            while self._i < len(kept) and kept[self._i][0] + len(kept[self._i][1]) <= at:
                self._i += 1
            if self._i == len(kept) or kept[self._i][0] > at:
                return None
            base, data = kept[self._i]
            piece = data[at - base : end - base]
            out.append(piece)
            at += len(piece)
        return b"".join(out)
