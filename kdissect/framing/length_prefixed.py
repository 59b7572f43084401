"""Framers: sans-io splitters of one TCP direction into PDUs, like Wireshark's tcp_dissect_pdus.

All four protocols frame with a 4-byte big-endian length that excludes itself. A framer is fed
in-order chunks (with the frame number and timestamp that carried them) and gaps (bytes lost
from the capture); it returns complete PDUs. After a gap that it cannot step over, and for a
stream captured from its middle, it resynchronises: it scans for the next offset where a
plausible length is followed by bytes the protocol's boundary probe accepts.
"""

from __future__ import annotations

import re
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import cache
from typing import Protocol

from kdissect import accel
from kdissect.diagnostics import TRANSPORT
from kdissect.model import Diagnostic, Pdu
from kdissect.stream.reassembly import Buffered
from kdissect.text import plural

BoundaryProbe = Callable[[bytes], bool]

_be32 = struct.Struct(">I").unpack_from
# Bytes handed to a boundary probe: the length prefix plus the start of the message.
PROBE_HEAD = 64
# An unconfirmed boundary is accepted once this much data waits behind it.
RESYNC_WINDOW = 1024 * 1024
# Candidates that wait for more data before they can be judged, at most.
MAX_WAITING = 64


@cache
def _plausible_lengths(min_frame: int, max_frame: int) -> re.Pattern[bytes]:
    """Offsets whose 4-byte length may lie in min_frame..max_frame: the first byte is at most
    max_frame's, and the length is not below min_frame (checked exactly for min_frame <= 256)."""
    top = min(max_frame >> 24, 255)
    pattern = b"(?=[\\x00-" + b"\\x%02x" % top + b"])"
    if 0 < min_frame <= 256:
        pattern += b"(?!\\x00\\x00\\x00[\\x00-" + b"\\x%02x" % (min_frame - 1) + b"])"
    return re.compile(pattern, re.DOTALL)


def next_length(buf: bytearray, i: int, last: int, min_frame: int, max_frame: int) -> int:
    """The first offset from i to last (and with four bytes behind it in buf) whose 4-byte
    big-endian length lies in min_frame..max_frame; -1 if none. (Its compiled twin,
    _length_prefixed.pyx, reads the bytes in C: a regular expression takes 20-50 ns a byte.)"""
    last = min(last, len(buf) - 4)
    find = _plausible_lengths(min_frame, max_frame).search
    while i <= last:
        m = find(buf, i)  # skips, at C speed, offsets whose length cannot be right
        if m is None or m.start() > last:
            return -1
        i = m.start()
        if min_frame <= int.from_bytes(buf[i : i + 4], "big") <= max_frame:
            return i
        i += 1
    return -1


def gap_diag(lost: int, frame_before: int, frame_after: int) -> Diagnostic:
    """The `tcp.gap` diagnostic: `lost` bytes of the stream were not captured."""
    return TRANSPORT(
        "tcp.gap",
        f"{plural(lost, 'byte')} missing from the capture between frames {frame_before} and {frame_after}",
    )


def overlap_diag(length: int, first: int, last: int, count: int) -> Diagnostic:
    """The `tcp.overlap` diagnostic: `count` retransmissions (frames first to last) carried
    `length` bytes that differ from those first captured."""
    if count == 1:
        what = f"frame {first} retransmits {plural(length, 'byte')}"
    else:
        what = f"frames {first}-{last}: {count} retransmissions of {plural(length, 'byte')} in all"
    return TRANSPORT("tcp.overlap", f"{what} that differ from those first captured (the first-seen bytes are used)")


def resync_diag(skipped: int, first: int | None, last: int | None) -> Diagnostic:
    """The `framing.resync` diagnostic: `skipped` bytes (of frames first to last) were skipped."""
    where = f" (frames {first}-{last})" if first is not None else ""
    return TRANSPORT("framing.resync", f"skipped {plural(skipped, 'byte')} to the next message boundary{where}")


class Framer(Protocol):
    def feed(self, data: bytes, frame: int, ts: float) -> list[Pdu]: ...

    def gap(self, lost: int, frame_before: int, frame_after: int) -> list[Pdu]: ...

    def note(self, diag: Diagnostic) -> None: ...

    def overlap(self, length: int, frame: int) -> None: ...

    def flush(self) -> list[Pdu]: ...

    def set_probe(self, probe: BoundaryProbe | None, synced: bool) -> None: ...

    def set_pool(self, pool: Buffered) -> None: ...


class ChunkIndex:
    """Which frames carried which byte ranges of a stream: (absolute end, frame, ts) per chunk,
    in three arrays (24 bytes a chunk: a message may come in a million one-byte segments), the
    ends ascending; those before `_first` are dropped."""

    __slots__ = ("_ends", "_frames", "_ts", "_first")

    def __init__(self) -> None:
        self._ends = array("q")
        self._frames = array("q")
        self._ts = array("d")
        self._first = 0

    def add(self, end: int, frame: int, ts: float) -> None:
        self._ends.append(end)
        self._frames.append(frame)
        self._ts.append(ts)

    def is_end(self, offset: int) -> bool:
        """Whether a chunk (a TCP segment, usually) ends at this absolute offset."""
        ends = self._ends
        i = bisect_left(ends, offset, self._first)
        return i < len(ends) and ends[i] == offset

    def span(self, start: int, end: int) -> tuple[list[int], float, float]:
        """Frames, first ts and last ts of the chunks covering [start, end)."""
        ends, chunk_frames, stamps, first = self._ends, self._frames, self._ts, self._first
        frames: list[int] = []
        ts0 = ts1 = 0.0
        i = bisect_right(ends, start, first)  # the first chunk that ends past start
        while i < len(ends) and (ends[i - 1] if i > first else -1) < end:
            frame = chunk_frames[i]
            if not frames:
                ts0 = stamps[i]
            if not frames or frames[-1] != frame:
                frames.append(frame)
            ts1 = stamps[i]
            i += 1
        return frames, ts0, ts1

    def chunk(self, offset: int) -> tuple[int, int, float]:
        """End, frame and ts of the chunk holding the byte at offset (an end of -1 if none)."""
        i = bisect_right(self._ends, offset, self._first)
        if i >= len(self._ends):
            return -1, 0, 0.0
        return self._ends[i], self._frames[i], self._ts[i]

    def drop_before(self, offset: int) -> None:
        ends = self._ends
        first = self._first = bisect_right(ends, offset, self._first)
        if first > 1024 and 2 * first > len(ends):
            del ends[:first], self._frames[:first], self._ts[:first]
            self._first = 0


class LengthPrefixedFramer:
    """4-byte big-endian length prefix, then that many bytes."""

    def __init__(self, max_frame: int, to_server: bool = True, min_frame: int = 0, empty: bool = True,
                 short_ok: Callable[[], bool] | None = None) -> None:
        self.max_frame = max_frame
        self.min_frame = min_frame
        # Whether a message may be empty (a length of 0: Kafka's empty SASL token), and then one
        # a segment at most (a token is answered before the next is sent; `empty_ok`: one may
        # still come in this segment). Otherwise a 0 is a bad length: each empty message made a
        # message of 4 bytes, whose output (about 380 bytes of JSON) and decoding (about 10 µs) a
        # stream of zeros multiplied.
        self.empty = empty
        self.empty_ok = empty
        # Whether a length below min_frame is a message where a boundary is known (Kafka's raw
        # SASL tokens, of any length); asked only of such a length, never while resynchronising.
        self.short_ok = short_ok
        self.to_server = to_server
        self.buf = bytearray()
        self.base = 0  # absolute stream offset of buf[0]
        self.index = ChunkIndex()
        self.synced = True
        self.probe: BoundaryProbe | None = None
        self.skip_to = 0  # absolute offset below which bytes are discarded (stepping over a gap)
        self.pending_diags: list[Diagnostic] = []
        # The gap, resync or overlap diagnostic last in pending_diags, which the next of its kind
        # right after it replaces with one for both (a stream of gaps, of bytes without a
        # boundary or of retransmissions is one diagnostic, not one a segment): (it, the stream
        # offset its bytes end at, its bytes, its first and last frames, how many it stands for).
        self.run: Run | None = None
        # While resynchronising (absolute offsets): every offset below scan_to has been judged
        # once; `waiting` holds the candidates that needed more data, as [offset, bytes needed].
        self.scan_to = 0
        self.waiting: list[list[int]] = []
        # Where the bytes it keeps count, with those of the capture's other framers and
        # reassemblers (its own until set_pool), and len(buf) as last added there.
        self.pool = Buffered()
        self.counted = 0

    # -- the Framer interface ---------------------------------------------------------

    def set_probe(self, probe: BoundaryProbe | None, synced: bool) -> None:
        self.probe = probe
        self.synced = synced

    def set_pool(self, pool: Buffered) -> None:
        self.pool.used -= self.counted
        self.pool, self.counted = pool, 0
        self._count()

    def note(self, diag: Diagnostic) -> None:
        self.pending_diags.append(diag)

    def overlap(self, length: int, frame: int) -> None:
        """A retransmission in `frame` carried `length` bytes that differ from those first seen."""
        length, first, _, count = self._extend("tcp.overlap", -1, length, frame, frame)
        self._add_run(overlap_diag(length, first or 0, frame, count), -1, length, first, frame, count)

    def feed(self, data: bytes, frame: int, ts: float) -> list[Pdu]:
        size = len(data)
        if not self.buf and size >= 4 and self.synced and self.skip_to <= self.base:
            # A chunk that is one whole message, with nothing before it: what _drain would make
            # of it (the bytes need not be buffered, nor their chunk indexed).
            n = _be32(data, 0)[0]
            if n + 4 == size and n > 0 and self.min_frame <= n <= self.max_frame:
                self.empty_ok = self.empty
                self.base += size
                pdu = Pdu(data if type(data) is bytes else bytes(data), [frame], ts, ts, self.to_server,
                          self.pending_diags)
                self.pending_diags = []
                return [pdu]
        return self._feed(data, frame, ts)

    def _feed(self, data: bytes, frame: int, ts: float) -> list[Pdu]:
        """feed, the bytes buffered and their chunk indexed."""
        self.index.add(self.base + len(self.buf) + len(data), frame, ts)
        self.buf += data
        self.empty_ok = self.empty
        out = self._drain()
        pool = self.pool
        now = len(self.buf)  # (_count, inline)
        pool.used += now - self.counted
        self.counted = now
        if pool.used > pool.limit and self.buf:
            end = self._current_end()
            if end is not None:
                # The capture keeps too many bytes, and this message grew: what it has of it is
                # decoded, the rest skipped.
                diag = TRANSPORT(
                    "framing.unbuffered",
                    f"message of {plural(end - self.base, 'byte')} cut after {len(self.buf)}: the capture's "
                    f"unfinished messages and out-of-order segments already take {pool.limit >> 20} MiB",
                )
                out.append(self._emit_partial(diag, end - self.base))
                self._count()
        return out

    def gap(self, lost: int, frame_before: int, frame_after: int) -> list[Pdu]:
        """`lost` bytes of the stream were not captured."""
        out: list[Pdu] = []
        gap_start = self.base + len(self.buf)
        gap_end = gap_start + lost
        msg_end = self._current_end()
        if self.synced and msg_end is not None and gap_end <= msg_end:
            # The gap lies inside a message whose length we know: emit what we have of it and
            # step over the rest; the next message starts where the length says.
            out.append(self._emit_partial(gap_diag(lost, frame_before, frame_after), msg_end - self.base))
            self.skip_to = msg_end
        else:
            if self.buf:
                out.append(self._emit_partial(gap_diag(lost, frame_before, frame_after), None))
            else:
                lost, first, _, count = self._extend("tcp.gap", gap_start, lost, frame_before, frame_after)
                self._add_run(gap_diag(lost, first or 0, frame_after), gap_end, lost, first, frame_after, count)
            self.synced = self.probe is None
        self.base = gap_end
        self.index.drop_before(gap_end)
        self._count()
        return out

    def flush(self) -> list[Pdu]:
        out: list[Pdu] = []
        if self.buf and not self.synced and self.probe is not None and self._resync(final=True):
            out.extend(self._drain())
        if self.buf:
            total = self._current_end()
            want = f" of {total - self.base}" if total is not None else ""
            diag = TRANSPORT(
                "tcp.incomplete",
                f"stream ended inside a message: {len(self.buf)}{want} bytes captured",
            )
            out.append(self._emit_partial(diag, None))
        self._count()
        return out

    # -- internals --------------------------------------------------------------------

    def _count(self) -> None:
        """Bring the pool up to date with what it keeps now."""
        now = len(self.buf)
        self.pool.used += now - self.counted
        self.counted = now

    def _current_end(self) -> int | None:
        """Absolute end offset of the message at buf[0], when the length is readable."""
        if len(self.buf) < 4 or not self.synced:
            return None
        n = int.from_bytes(self.buf[0:4], "big")
        if n > self.max_frame:
            return None
        return self.base + 4 + n

    def _emit_partial(self, diag: Diagnostic, consume: int | None) -> Pdu:
        n = len(self.buf)
        frames, ts0, ts1 = self.index.span(self.base, self.base + max(n, 1))
        pdu = Pdu(bytes(self.buf), frames, ts0, ts1, self.to_server, self.pending_diags + [diag])
        self.pending_diags = []
        self.base += n
        self.buf.clear()
        self.index.drop_before(self.base)
        if consume is not None:
            self.skip_to = self.base - n + consume
        return pdu

    def _discard(self, n: int) -> None:
        del self.buf[:n]
        self.base += n
        self.index.drop_before(self.base)

    def _past_skip(self) -> bool:
        """Discards the bytes below skip_to; whether the buffer now starts at or past it."""
        if self.skip_to > self.base:
            self._discard(min(self.skip_to - self.base, len(self.buf)))
        return self.skip_to <= self.base

    def _drain(self) -> list[Pdu]:
        out: list[Pdu] = []
        if self.skip_to > self.base and not self._past_skip():
            return out
        chunk_end, frame, ts = -1, 0, 0.0  # the chunk of the last message read (ChunkIndex.chunk)
        while True:
            if not self.synced and not self._resync():
                return out
            # The whole messages at the front are read in place, and cut off all at once.
            buf, base = self.buf, self.base
            size, at, n = len(buf), 0, -1
            while at + 4 <= size:
                n = _be32(buf, at)[0]
                if (n > self.max_frame or n == 0 and not self.empty_ok
                        or 0 < n < self.min_frame and not (self.short_ok is not None and self.short_ok())):
                    # An empty message is well formed where `empty` says so (Kafka's empty SASL
                    # token), one a segment; min_frame only keeps resynchronisation from
                    # accepting short lengths inside other data.
                    break
                end = at + 4 + n
                if end > size:
                    n = -1
                    break
                if n == 0:
                    self.empty_ok = False
                # A message inside the chunk of the one before it (a segment of tiny messages)
                # is placed without a search.
                if base + at >= chunk_end:
                    chunk_end, frame, ts = self.index.chunk(base + at)
                if base + end <= chunk_end:
                    frames, ts0, ts1 = [frame], ts, ts
                else:
                    frames, ts0, ts1 = self.index.span(base + at, base + end)
                # (the whole buffer copied at once, not sliced and copied again)
                data = bytes(buf) if at == 0 and end == size else bytes(buf[at:end])
                out.append(Pdu(data, frames, ts0, ts1, self.to_server, self.pending_diags))
                self.pending_diags = []
                at, n = end, -1
            if at:  # (_discard, inline)
                del buf[:at]
                self.base = base = base + at
                self.index.drop_before(base)
            if n < 0:
                return out
            self._bad_length(n)

    def _bad_length(self, n: int) -> None:
        self.pending_diags.append(TRANSPORT(
            "framing.bad_length",
            f"message length {n} outside {self.min_frame}..{self.max_frame}: resynchronising",
        ))
        if self.probe is None:
            # Without a probe there is no way to find the next boundary: drop what we have.
            self._discard(len(self.buf))
            return
        self._discard(1)
        self.synced = False

    # -- resynchronisation --------------------------------------------------------------

    def _length_at(self, i: int) -> int | None:
        """The length prefix at buf[i] when it is within this protocol's bounds."""
        buf = self.buf
        n = _be32(buf, i)[0] if i + 4 <= len(buf) else int.from_bytes(buf[i : i + 4], "big")
        return n if self.min_frame <= n <= self.max_frame else None

    def _head_ok(self, i: int, n: int) -> tuple[bool | None, int]:
        """The boundary probe on the message at buf[i]; None (and the buffer length that
        decides it) when too few bytes are here to judge."""
        need = i + min(PROBE_HEAD, 4 + n)
        if len(self.buf) < need:
            return None, need
        assert self.probe is not None
        return self.probe(bytes(self.buf[i : i + PROBE_HEAD])), need

    def _first_segments(self, i: int, nxt: int) -> bool:
        """Whether buf[i:nxt] is exactly the first whole chunks (TCP segments) captured of a
        stream seen from its middle: a length prefix there that frames its segments exactly
        starts a message whatever its bytes, as tshark assumes of a first segment."""
        return self.base + i == 0 and nxt <= len(self.buf) and self.index.is_end(self.base + nxt)

    def _verdict(self, i: int) -> tuple[bool | None, int]:
        """Whether a message starts at buf[i]: True when it and the message after it both look
        right (or it ends exactly where the data ends), or when it fills the first segments;
        False when not; None when more data is needed to tell, with the buffer length at which
        to ask again."""
        n = self._length_at(i)
        if n is None:
            return False, 0
        nxt = i + 4 + n
        if self._first_segments(i, nxt):
            return True, 0
        ok, need = self._head_ok(i, n)
        if not ok:
            return ok, need
        if nxt == len(self.buf):
            return True, 0
        if nxt + 4 > len(self.buf):
            return None, nxt if nxt > len(self.buf) else nxt + 4
        n2 = self._length_at(nxt)
        if n2 is None:
            return False, 0
        return self._head_ok(nxt, n2)

    def _resync(self, final: bool = False) -> bool:
        """Find the next boundary; discard what precedes it. False: more data is needed.

        Every offset is judged once; a candidate that needs more data waits (at most
        MAX_WAITING of them) and is judged again only when that data has come, so the work is
        linear in the bytes. A candidate confirmed by the message after it wins over one that
        runs past the data; such an unconfirmed candidate is accepted once RESYNC_WINDOW bytes
        wait behind it, or at the end of the stream."""
        base, size = self.base, len(self.buf)
        if self.scan_to < base:
            self.scan_to = base
            self.waiting = [w for w in self.waiting if w[0] >= base]
        for w in self.waiting:
            if w[1] <= base + size:
                v, need = self._verdict(w[0] - base)
                if v:
                    return self._synced_at(w[0] - base)
                w[1] = base + need if v is None else -1
        self.waiting = [w for w in self.waiting if w[1] >= 0]
        last = size - 8  # the last offset with a length and the start of a message behind it
        i = self.scan_to - base
        while i <= last:
            i = next_length(self.buf, i, last, self.min_frame, self.max_frame)
            if i < 0:
                i = last + 1
                break
            v, need = self._verdict(i)
            if v:
                return self._synced_at(i)
            if v is None and len(self.waiting) < MAX_WAITING:
                self.waiting.append([base + i, base + need])
            i += 1
        i = max(i, last + 1)
        self.scan_to = base + i
        first = self.waiting[0][0] - base if self.waiting else None
        if first is not None and (final or size - first > RESYNC_WINDOW):
            return self._synced_at(first)
        self._skipped(first if first is not None else i)
        return False

    def _synced_at(self, i: int) -> bool:
        self._skipped(i)
        self.synced = True
        self.waiting = []
        return True

    def _skipped(self, n: int) -> None:
        if n <= 0:
            return
        start = self.base
        frames, _, _ = self.index.span(start, start + n)
        self._discard(n)
        total, first, last, count = self._extend("framing.resync", start, n, frames[0] if frames else None,
                                                 frames[-1] if frames else None)
        self._add_run(resync_diag(total, first, last), start + n, total, first, last, count)

    def _extend(self, key: str, start: int, n: int, first: int | None,
                last: int | None) -> tuple[int, int | None, int | None, int]:
        return extend_run(self.pending_diags, self.run, key, start, n, first, last)

    def _add_run(self, diag: Diagnostic, end: int, n: int, first: int | None, last: int | None,
                 count: int) -> None:
        self.pending_diags.append(diag)
        self.run = (diag, end, n, first, last, count)


# A diagnostic that the next of its kind right after it may replace with one for both: (it, the
# stream offset its bytes end at, its bytes, its first and last frames, how many it stands for).
Run = tuple[Diagnostic, int, int, "int | None", "int | None", int]


def extend_run(diags: list[Diagnostic], run: Run | None, key: str, start: int, n: int, first: int | None,
               last: int | None) -> tuple[int, int | None, int | None, int]:
    """(bytes, first frame, last frame, count) of the diagnostic `key` for the n bytes from
    `start` (-1: wherever), with those of `run` when it is the last of `diags`, of the same kind,
    and ends at `start` (it is taken back from `diags`: the caller adds one for both)."""
    if run is None or not diags or diags[-1] is not run[0] or run[0].key != key or run[1] != start:
        return n, first, last, 1
    diags.pop()
    return (run[2] + n, run[3] if run[3] is not None else first, last if last is not None else run[4],
            run[5] + 1)


accel.bind(globals(), "kdissect.framing._length_prefixed", ("next_length",))
