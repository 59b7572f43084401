"""Tracker: the open TCP conversations of a capture, and what each segment does to them.

It finds or opens a segment's Conversation (a SYN on a finished or used one starts a new one),
feeds the side's Reassembler (the ACK first: bytes it reveals as lost precede the segment's
own), and closes a conversation at FIN both ways or RST, when a SYN reuses its endpoints, when
too many are open (the least recently active) and at the end. What the reassembled streams
mean is the business of the layer above, told through the `Upper` interface.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from kdissect.capture.l2l4 import ACK, FIN, RST, SYN, TcpSegment
from kdissect.stream.flow import Conversation, Endpoint
from kdissect.stream.reassembly import Event

T = TypeVar("T")

# Open conversations tracked at once: beyond this the least recently active one is closed (its
# output flushed; if it goes on, it continues as a new conversation that starts mid-stream). An
# open conversation with a pending request costs about 8 KB, so this bounds memory at ~100 MB.
MAX_CONVERSATIONS = 10_000


class Upper(Protocol[T]):
    """The layer above TCP."""

    def opened(self, conv: Conversation[T]) -> None:
        """A new conversation (its index is the next one)."""

    def events(self, conv: Conversation[T], side: int, events: list[Event]) -> None:
        """The next events of one side's stream, in order (never for a passive conversation)."""

    def closed(self, conv: Conversation[T]) -> None:
        """The conversation ended; it is forgotten."""


class Tracker(Generic[T]):
    def __init__(self, upper: Upper[T], limit: int = MAX_CONVERSATIONS) -> None:
        self.upper = upper
        self.limit = limit
        self.open: OrderedDict[tuple[Endpoint, Endpoint], Conversation[T]] = OrderedDict()
        self.opened = 0

    def segment(self, seg: TcpSegment) -> None:
        conv = self._conversation(seg)
        conv.packets += 1
        conv.last_ts = seg.ts
        if conv.ignored:
            return
        side = conv.side_of(seg.src, seg.sport)
        if conv.passive:
            conv.bytes[side] += len(seg.payload)
        else:
            self._reassemble(conv, side, seg)
        self._track_end(conv, side, seg)

    def finish(self) -> None:
        """Close every open conversation."""
        for conv in list(self.open.values()):
            self.upper.closed(conv)
        self.open.clear()

    def _conversation(self, seg: TcpSegment) -> Conversation[T]:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = (a, b) if a <= b else (b, a)
        conv = self.open.get(key)
        if conv is None:
            return self._open(key)
        if seg.flags & (SYN | ACK) == SYN and (conv.closed or conv.had_data):
            self.upper.closed(conv)
            del self.open[key]
            return self._open(key)
        self.open.move_to_end(key)
        return conv

    def _open(self, key: tuple[Endpoint, Endpoint]) -> Conversation[T]:
        conv: Conversation[T] = Conversation(self.opened, key[0], key[1])
        self.opened += 1
        self.open[key] = conv
        self.upper.opened(conv)
        if len(self.open) > self.limit:
            _, oldest = self.open.popitem(last=False)
            self.upper.closed(oldest)
        return conv

    def _reassemble(self, conv: Conversation[T], side: int, seg: TcpSegment) -> None:
        r = conv.reasm[side]
        if seg.flags & SYN:
            _syn(conv, side, seg)
        # The ACK first: it acknowledges what the peer sent before this segment, so bytes it
        # reveals as lost (and the backlog behind them) precede this segment's own data.
        if seg.flags & ACK:
            lost = conv.reasm[1 - side].acked(seg.ack)
            if lost:
                self._deliver(conv, 1 - side, lost)
        events: list[Event] = []
        if seg.payload:
            conv.bytes[side] += len(seg.payload)
            events = r.segment(seg.seq, seg.payload, seg.frame, seg.ts)
        if seg.missing:
            events += r.cut((seg.seq + len(seg.payload)) & 0xFFFFFFFF, seg.missing, seg.frame)
        if seg.flags & FIN:
            r.fin(seg.seq + (1 if seg.flags & SYN else 0), len(seg.payload) + seg.missing)
        if events:
            self._deliver(conv, side, events)

    def _deliver(self, conv: Conversation[T], side: int, events: list[Event]) -> None:
        if not conv.passive:  # the layer above may have made it passive meanwhile
            self.upper.events(conv, side, events)

    def _track_end(self, conv: Conversation[T], side: int, seg: TcpSegment) -> None:
        """FIN and RST: a conversation closed both ways (or reset) is flushed and forgotten."""
        if seg.flags & RST:
            conv.rst = True
        elif seg.flags & FIN:
            conv.fin[side] = True
        if conv.closed:
            self.upper.closed(conv)
            self.open.pop((conv.a, conv.b), None)


def _syn(conv: Conversation[T], side: int, seg: TcpSegment) -> None:
    conv.reasm[side].syn(seg.seq)
    conv.syn_seen[side] = True
    if conv.client is None:
        conv.client = side if not seg.flags & ACK else 1 - side
