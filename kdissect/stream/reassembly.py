"""Reassembler: one direction of a TCP connection, put back in order.

Feed it segments (sequence number, payload, frame, ts) as they were captured; it returns
events in stream order: Data(bytes, frame, ts), Gap(lost bytes, frame numbers around it) and
Overlap (retransmitted bytes that differ from those first seen: the first-seen bytes win, like
Wireshark's default). Retransmissions, keep-alives and zero-window probes are absorbed.
Sequence numbers are compared modulo 2**32, so they may wrap.

A gap is declared when the peer acknowledges bytes this side never showed us, when the
out-of-order backlog grows past a bound, and at the end of the stream. The bytes delivered are
kept, up to HISTORY of them, to compare retransmissions with, until the peer acknowledges them.

What the reassemblers of a capture keep (backlogs and delivered bytes) counts in one `Buffered`
pool that the framers above share too: past its limit, a reassembler that grows lets go of its
delivered bytes (retransmissions are then not compared) and of its backlog (a gap).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

MASK = 0xFFFFFFFF
MAX_BACKLOG_BYTES = 4 * 1024 * 1024
MAX_BACKLOG_SEGMENTS = 2048
HISTORY = 64 * 1024  # delivered bytes kept to compare retransmissions against
# Bytes that the reassemblers and framers of a capture keep in all (out-of-order backlogs,
# delivered bytes, unfinished messages): 20,000 reassemblers of 4 MB backlogs and 128 KB of
# delivered bytes each, and framers of 100 MB messages, would otherwise keep tens of GB (from a
# few MB of gzip). One message of the largest a protocol allows (Kafka's 100 MB) fits; the
# messages held in the output have a bound of their own (pipeline/output.py HELD_BYTES).
MAX_BUFFERED = 128 * 1024 * 1024


class Buffered:
    """The bytes the reassemblers and framers of a capture keep (`used`), and how many they may
    (`limit`). One per capture (CaptureState.get(Buffered)); each holder adds what it keeps."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int = MAX_BUFFERED) -> None:
        self.used = 0
        self.limit = limit


def seq_diff(a: int, b: int) -> int:
    """a - b in sequence space, as a signed 32-bit number."""
    d = (a - b) & MASK
    return d - (1 << 32) if d & 0x80000000 else d


class Data:
    """The next bytes of the stream, and the frame and time of the segment that carried them. An
    extension type when compiled (reassembly.pxd): one is made a segment."""

    __slots__ = ("data", "frame", "ts")

    def __init__(self, data: bytes, frame: int, ts: float) -> None:
        self.data = data
        self.frame = frame
        self.ts = ts

    def __eq__(self, other: object) -> bool:
        """Field by field, as a dataclass's."""
        if not isinstance(other, Data) or type(other) is not type(self):
            return NotImplemented
        return (self.data, self.frame, self.ts) == (other.data, other.frame, other.ts)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as a dataclass's)

    def __repr__(self) -> str:
        return f"Data(data={self.data!r}, frame={self.frame!r}, ts={self.ts!r})"


@dataclass(slots=True)
class Gap:
    lost: int
    frame_before: int
    frame_after: int


@dataclass(slots=True)
class Overlap:
    frame: int
    length: int


Event = Data | Gap | Overlap


class Reassembler:
    """The backlog is keyed by absolute stream offsets (sequence numbers unwrapped against
    next_seq when they arrive) with a heap of those offsets, so each segment costs O(log n)
    however full the backlog is."""

    __slots__ = ("next_seq", "next_abs", "backlog", "order", "backlog_bytes", "history", "last_frame",
                 "fin_seq", "pool", "counted")

    def __init__(self, pool: Buffered | None = None) -> None:
        self.next_seq: int | None = None  # None until the first SYN or segment
        self.next_abs = 0  # next_seq as an absolute stream offset (never wraps)
        self.backlog: dict[int, tuple[bytes, int, float]] = {}  # offset -> (payload, frame, ts)
        self.order: list[int] = []  # heap of the backlog's offsets (stale ones skipped lazily)
        self.backlog_bytes = 0
        self.history = bytearray()  # the last HISTORY bytes delivered, ending at next_seq
        self.last_frame = 0
        self.fin_seq: int | None = None
        self.pool = pool if pool is not None else Buffered()
        self.counted = 0  # backlog_bytes + len(history), as last added to the pool

    def syn(self, seq: int) -> None:
        """A SYN: data starts at seq + 1."""
        if self.next_seq is None:
            self.next_seq = (seq + 1) & MASK

    def fin(self, seq: int, payload_len: int) -> None:
        self.fin_seq = (seq + payload_len) & MASK

    def segment(self, seq: int, payload: bytes, frame: int, ts: float) -> list[Event]:
        if not payload:
            return []
        if self.next_seq is None:
            self.next_seq = seq  # captured mid-connection: start where we are
        d = (seq - self.next_seq) & MASK  # (seq_diff, inline)
        if d & 0x80000000:
            d -= 1 << 32
        if d > 0:
            self._stash(self.next_abs + d, payload, frame, ts)
            out = self._check_backlog()
        else:
            out = []
            if d < 0:
                payload = self._trim_old(-d, payload, frame, out)
                if not payload:
                    return out
            self._deliver(payload, frame, ts, out)
            if self.backlog:  # (an in-order stream has none: nothing to drain)
                self._drain(out)
        pool = self.pool
        now = self.backlog_bytes + len(self.history)  # (_count, inline)
        pool.used += now - self.counted
        self.counted = now
        if pool.used > pool.limit:
            self._shed(out)
        return out

    def acked(self, ack: int) -> list[Event]:
        """The peer acknowledged up to `ack`: anything before it that we lack is lost, and what
        we delivered before it is no longer kept to compare retransmissions with (a peer
        retransmits what it has not seen acknowledged)."""
        if self.next_seq is None:
            return []
        d = (ack - self.next_seq) & MASK  # (seq_diff, inline)
        if d & 0x80000000:
            d -= 1 << 32
        if self.fin_seq is not None and seq_diff(ack, self.fin_seq) > 0:
            d -= 1  # the FIN's sequence number is acknowledged too
        if d <= 0:
            hist = self.history
            if len(hist) > -d:
                del hist[: len(hist) + d]
                now = self.backlog_bytes + len(hist)  # (_count, inline)
                self.pool.used += now - self.counted
                self.counted = now
            return []
        if d > 1 << 30:
            return []
        target = self.next_abs + d
        out: list[Event] = []
        # Lost: what lies before the acknowledged point and is not in the backlog.
        while self.next_abs < target:
            nxt = self._earliest()
            if nxt is not None and nxt < target:
                out.extend(self._gap_to(nxt))
            else:
                out.extend(self._gap_to(target))
                break
        self._count()
        return out

    def cut(self, seq_end: int, missing: int, frame: int) -> list[Event]:
        """A segment ending at seq_end lost `missing` bytes to the snaplen."""
        if self.next_seq is None or seq_diff(seq_end, self.next_seq) != 0:
            return []
        out: list[Event] = [Gap(missing, frame, frame)]
        self._advance(missing)
        self.history.clear()
        self._drain(out)
        self._count()
        return out

    def flush(self) -> list[Event]:
        """End of stream: deliver the backlog across its holes."""
        out: list[Event] = []
        while True:
            nxt = self._earliest()
            if nxt is None:
                self._count()
                return out
            out.extend(self._gap_to(nxt))

    def release(self) -> None:
        """It will not be fed again: what it keeps is dropped, and no longer counts in the pool."""
        self.backlog, self.order, self.backlog_bytes = {}, [], 0
        self.history = bytearray()
        self._count()

    # -- internals --------------------------------------------------------------------

    def _count(self) -> None:
        """Bring the pool up to date with what it keeps now."""
        now = self.backlog_bytes + len(self.history)
        self.pool.used += now - self.counted
        self.counted = now

    def _shed(self, out: list[Event]) -> None:
        """The capture keeps too many bytes, and this reassembler grew: it lets go of its backlog
        (delivered across its holes) and of the bytes it delivered (retransmissions of them are
        not compared)."""
        if self.backlog:
            out.extend(self.flush())
        self.history.clear()
        self._count()

    def _advance(self, n: int) -> None:
        assert self.next_seq is not None
        self.next_seq = (self.next_seq + n) & MASK
        self.next_abs += n

    def _stash(self, off: int, payload: bytes, frame: int, ts: float) -> None:
        old = self.backlog.get(off)
        if old is not None and len(old[0]) >= len(payload):
            return
        if old is not None:
            self.backlog_bytes -= len(old[0])
        else:
            heapq.heappush(self.order, off)
        self.backlog[off] = (payload, frame, ts)
        self.backlog_bytes += len(payload)

    def _check_backlog(self) -> list[Event]:
        if self.backlog_bytes <= MAX_BACKLOG_BYTES and len(self.backlog) <= MAX_BACKLOG_SEGMENTS:
            return []
        nxt = self._earliest()
        return self._gap_to(nxt) if nxt is not None else []

    def _earliest(self) -> int | None:
        """The smallest offset in the backlog."""
        order, backlog = self.order, self.backlog
        while order and order[0] not in backlog:
            heapq.heappop(order)
        return order[0] if order else None

    def _gap_to(self, off: int) -> list[Event]:
        lost = off - self.next_abs
        out: list[Event] = []
        if lost > 0:
            entry = self.backlog.get(off)
            after = entry[1] if entry is not None else self.last_frame + 1
            out.append(Gap(lost, self.last_frame, after))
            self._advance(lost)
            self.history.clear()
        self._drain(out)
        return out

    def _trim_old(self, behind: int, payload: bytes, frame: int, out: list[Event]) -> bytes:
        """Drop the part of payload already delivered; report it if its bytes differ."""
        old = payload[:behind]
        hist = self.history
        if old and behind <= len(hist):
            start = len(hist) - behind
            seen = hist[start : start + len(old)]
            if seen != old:
                out.append(Overlap(frame, len(old)))
        return payload[behind:]

    def _deliver(self, payload: bytes, frame: int, ts: float, out: list[Event]) -> None:
        out.append(Data(payload, frame, ts))
        n = len(payload)
        assert self.next_seq is not None
        self.next_seq = (self.next_seq + n) & MASK  # (_advance, inline)
        self.next_abs += n
        self.last_frame = frame
        hist = self.history
        hist += payload
        if len(hist) > 2 * HISTORY:
            del hist[: len(hist) - HISTORY]

    def _drain(self, out: list[Event]) -> None:
        """Deliver backlog segments that now touch or overlap next_seq; drop those wholly
        behind it."""
        backlog = self.backlog
        while True:
            off = self._earliest()
            if off is None or off > self.next_abs:
                return
            payload, frame, ts = backlog.pop(off)
            self.backlog_bytes -= len(payload)
            behind = self.next_abs - off
            if behind < len(payload):
                self._deliver(payload[behind:], frame, ts, out)
