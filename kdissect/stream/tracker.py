"""Tracker: the open TCP conversations of a capture, and what each segment does to them.

Segments are numbered into conversations as Wireshark numbers `tcp.stream`: a segment belongs
to the latest conversation of its two endpoints, whatever came before (FIN, RST, a long
silence), and only a SYN without ACK whose sequence number differs from the one its side
started with (its SYN's, or one less than its first segment's) starts a new one: the ports
were reused. It feeds the side's Reassembler (the ACK first: bytes it reveals as lost precede
the segment's own), and ends a conversation at FIN both ways or RST, when its ports are reused,
when too many are open (the least recently active) and at the end. What the reassembled
streams mean is the business of the layer above, told through the `Upper` interface.

An ended conversation is remembered (its stream number, its sides' first sequence numbers and
its counts) so that its later packets (the last ACK, a retransmission) count in it; one that
was closed while still active, or whose side sends new bytes after its end (data after a RST
or FIN), continues as a conversation with the same stream number that starts mid-stream (and
the same sequence analysis and trouble).

Every segment also goes through Wireshark's TCP sequence analysis (`_analyse`, which has a compiled
twin with `_first_seq`: _tracker.pyx), reduced to what
tells of trouble: a segment that carries data (or a SYN or FIN) and does not advance its side's
highest sequence number is a retransmission, unless it is a keep-alive (one byte or none, one
before that number) or out of order (within the handshake's RTT, 3 ms if unknown, of the
highest segment, and not a fast retransmission after two duplicate ACKs); one whose bytes the
peer had already acknowledged is a (spurious) retransmission whatever its number. A window of 0
on a segment without SYN, FIN or RST is a zero window; every RST is a reset.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from kdissect import accel
from kdissect.capture.l2l4 import ACK, FIN, RST, SYN, TcpSegment
from kdissect.stream.flow import Conversation, SeqState
from kdissect.stream.reassembly import Buffered, Event, seq_diff

T = TypeVar("T")
# A conversation's key: its endpoints (address, port) in order, flat (hashed once a segment).
Key = tuple[bytes, int, bytes, int]

# Open conversations tracked at once: beyond this the least recently active one is closed (its
# output flushed; if it goes on, it continues under the same stream number, from mid-stream). An
# open conversation with a pending request costs about 8 KB, so this bounds memory at ~100 MB.
MAX_CONVERSATIONS = 10_000
# Ended conversations remembered for their later packets and stream numbers (about 2.5 KB
# each: export of 20,000 short conversations peaks at 81 MB, of 10,000 at 55 MB): past this the
# least recently active is forgotten, and a packet of it that still comes starts a new stream.
MAX_REMEMBERED = 20_000

_SEQ = 0xFFFFFFFF
_HALF = 0x80000000  # a sequence-space difference below this is not negative
_SYN_FIN = SYN | FIN
_SYN_ACK = SYN | ACK
_FIN_RST = FIN | RST
_CONTROL = SYN | FIN | RST
OUT_OF_ORDER_S = 0.003  # Wireshark's out-of-order threshold while the handshake's RTT is unknown
FAST_RETRANSMISSION_S = 0.02  # a fast retransmission follows the last duplicate ACK within this


class Upper(Protocol[T]):
    """The layer above TCP."""

    def opened(self, conv: Conversation[T]) -> None:
        """A new conversation, or one closed while active that goes on (same index)."""

    def events(self, conv: Conversation[T], side: int, events: list[Event]) -> None:
        """The next events of one side's stream, in order (never for a passive conversation)."""

    def closed(self, conv: Conversation[T]) -> None:
        """The conversation ended: what the layer above attached is dropped; later packets of
        it are only counted."""


class Tracker(Generic[T]):
    """`numbering(frame)`, if given, gives the stream number of a new conversation from the
    number of its first frame (a worker that tracks only some of a capture's conversations
    numbers them as the whole capture does); else they are numbered in the order they start.
    `pool`, if given, is where the reassemblers count what they keep (shared with the framers
    above)."""

    def __init__(self, upper: Upper[T], limit: int = MAX_CONVERSATIONS,
                 remembered: int = MAX_REMEMBERED, numbering: Callable[[int], int] | None = None,
                 pool: Buffered | None = None) -> None:
        self.upper = upper
        self.pool = pool if pool is not None else Buffered()
        self.numbering = numbering
        self.limit = limit
        self.remembered = remembered
        self.open: OrderedDict[Key, Conversation[T]] = OrderedDict()
        self.ended: OrderedDict[Key, Conversation[T]] = OrderedDict()  # closed, for later packets
        self.opened = 0
        # The conversation last in `open` (the most recently active), or None: a segment of it
        # need not move it to the end.
        self.recent: Conversation[T] | None = None

    def segment(self, seg: TcpSegment) -> Conversation[T]:
        """Track one segment; its conversation."""
        src, sport, dst, dport = seg.src, seg.sport, seg.dst, seg.dport
        # The endpoints in order ((src, sport) <= (dst, dport)), and the segment's side; an open
        # conversation and a segment other than a SYN alone (_conversation's common case) inline.
        if src < dst or (src == dst and sport <= dport):
            key, side = (src, sport, dst, dport), 0
        else:
            key, side = (dst, dport, src, sport), 1
        conv = self.open.get(key)
        if conv is not None and seg.flags & _SYN_ACK != SYN:
            if conv is not self.recent:
                self.open.move_to_end(key)
                self.recent = conv
        else:
            conv = self._conversation(seg, key)
        conv.packets += 1
        conv.last_ts = seg.ts
        _first_seq(conv, side, seg)
        _analyse(conv, side, seg)
        if conv.over:
            conv.bytes[side] += len(seg.payload)
            return conv
        if conv.ignored:
            return conv
        if conv.passive:
            conv.bytes[side] += len(seg.payload)
        else:
            self._reassemble(conv, side, seg)
        if seg.flags & _FIN_RST:  # (only a FIN or RST ends a conversation here)
            self._track_end(conv, side, seg)
        return conv

    def finish(self) -> None:
        """Close every open conversation."""
        for conv in list(self.open.values()):
            self.upper.closed(conv)
            conv.end()
        self.open.clear()
        self.ended.clear()
        self.recent = None

    def _conversation(self, seg: TcpSegment, key: Key) -> Conversation[T]:
        """The conversation of `seg`, whose endpoints in order are `key`: the open one, unless
        the segment starts it anew (ports reused), else a remembered or a new one."""
        conv = self.open.get(key)
        if conv is not None:
            if seg.flags & _SYN_ACK == SYN and _reuses_ports(conv, seg):
                self._close(conv)
                return self._open(key, self._next_index(seg.frame))
            if conv is not self.recent:
                self.open.move_to_end(key)
                self.recent = conv
            return conv
        old = self.ended.get(key)
        if old is None:
            return self._open(key, self._next_index(seg.frame))
        if _reuses_ports(old, seg):
            del self.ended[key]
            old.forgotten = True
            return self._open(key, self._next_index(seg.frame))
        if old.closed and not _new_data(old, seg):  # ended at FIN or RST: its later packets count in it
            self.ended.move_to_end(key)
            return old
        del self.ended[key]  # closed while active (too many open), or data after its end: it goes on
        old.forgotten = True
        conv = self._open(key, old.index)
        conv.first_seq = old.first_seq
        conv.seqs, conv.first_rtt, conv.syn_ts, conv.trouble = old.seqs, old.first_rtt, old.syn_ts, old.trouble
        return conv

    def _next_index(self, frame: int) -> int:
        self.opened += 1
        return self.opened - 1 if self.numbering is None else self.numbering(frame)

    def _open(self, key: Key, index: int) -> Conversation[T]:
        conv: Conversation[T] = Conversation(index, (key[0], key[1]), (key[2], key[3]), self.pool)
        self.open[key] = conv
        self.recent = conv
        self.upper.opened(conv)
        if len(self.open) > self.limit:
            self._close(next(iter(self.open.values())))
        return conv

    def _close(self, conv: Conversation[T]) -> None:
        """Tell the layer above, and remember the conversation for its later packets."""
        key = conv.a + conv.b
        del self.open[key]
        if conv is self.recent:
            self.recent = None
        self.upper.closed(conv)
        conv.end()
        earlier = self.ended.pop(key, None)  # an earlier conversation of the same endpoints
        if earlier is not None:
            earlier.forgotten = True
        self.ended[key] = conv
        if len(self.ended) > self.remembered:
            self.ended.popitem(last=False)[1].forgotten = True

    def _reassemble(self, conv: Conversation[T], side: int, seg: TcpSegment) -> None:
        r = conv.reasm[side]
        if seg.flags & SYN:
            _syn(conv, side, seg)
        # The ACK first: it acknowledges what the peer sent before this segment, so bytes it
        # reveals as lost (and the backlog behind them) precede this segment's own data.
        if seg.flags & ACK:
            lost = conv.reasm[1 - side].acked(seg.ack)
            if lost and not conv.passive:  # (the layer above may have made it passive)
                self.upper.events(conv, 1 - side, lost)
        events: list[Event] = []
        if seg.payload:
            conv.bytes[side] += len(seg.payload)
            events = r.segment(seg.seq, seg.payload, seg.frame, seg.ts)
        if seg.missing:
            events += r.cut((seg.seq + len(seg.payload)) & _SEQ, seg.missing, seg.frame)
        if seg.flags & FIN:
            r.fin(seg.seq + (1 if seg.flags & SYN else 0), len(seg.payload) + seg.missing)
        if events and not conv.passive:  # (the layer above may have made it passive)
            self.upper.events(conv, side, events)

    def _track_end(self, conv: Conversation[T], side: int, seg: TcpSegment) -> None:
        """FIN and RST: a conversation closed both ways (or reset) is flushed and ended."""
        if seg.flags & RST:
            conv.rst = True
        elif seg.flags & FIN:
            conv.fin[side] = True
        if conv.closed:
            self._close(conv)


def _reuses_ports(conv: Conversation[T], seg: TcpSegment) -> bool:
    """A SYN without ACK whose sequence number is not the one its side started with: a new
    connection between the same endpoints (Wireshark's "TCP port numbers reused")."""
    if seg.flags & (SYN | ACK) != SYN:
        return False
    first = conv.first_seq[conv.side_of(seg.src, seg.sport)]
    return first is not None and first != seg.seq


def _new_data(conv: Conversation[T], seg: TcpSegment) -> bool:
    """Whether a segment of an ended conversation carries bytes past those its side had sent
    (data after a FIN or RST, which a peer may still send and Wireshark still dissects), not a
    retransmission."""
    if not seg.payload:
        return False
    last = conv.next_seq[conv.side_of(seg.src, seg.sport)]
    return last is not None and seq_diff((seg.seq + len(seg.payload)) & _SEQ, last) > 0


def _first_seq(conv: Conversation[T], side: int, seg: TcpSegment) -> None:
    """The sequence number each side started with, as Wireshark's base_seq: a SYN's, else one
    less than the side's first segment's, else one less than the peer's first acknowledgement;
    a SYN-ACK with another sequence number sets it again."""
    first = conv.first_seq
    if first[side] is None:
        first[side] = seg.seq if seg.flags & SYN else (seg.seq - 1) & _SEQ
    elif seg.flags & (SYN | ACK) == SYN | ACK:
        first[side] = seg.seq
    if first[1 - side] is None and seg.flags & ACK:
        first[1 - side] = (seg.ack - 1) & _SEQ


def _syn(conv: Conversation[T], side: int, seg: TcpSegment) -> None:
    conv.reasm[side].syn(seg.seq)
    conv.syn_seen[side] = True
    if conv.client is None:
        conv.client = side if not seg.flags & ACK else 1 - side


def _analyse(conv: Conversation[T], side: int, seg: TcpSegment) -> None:
    """Wireshark's sequence analysis of one segment (see the module's docstring); it counts the
    segment's trouble in the conversation's Trouble."""
    flags = seg.flags
    fwd = conv.seqs[side]
    if flags & _CONTROL:
        _control(conv, side, seg)
    elif not seg.window:
        conv.troubles().zero_windows.add(side, seg.frame, seg.ts)
    if conv.syn_ts is not None and flags & (SYN | ACK) == ACK:
        rtt = seg.ts - conv.syn_ts
        if rtt:
            conv.first_rtt, conv.syn_ts = rtt, None
    seglen = len(seg.payload) + seg.missing
    ack = seg.ack
    if seglen or flags & _SYN_FIN:
        _sequence(conv, side, seg, seglen)
    elif fwd.high is None or 0 < ((seg.seq - fwd.high) & _SEQ) < _HALF:  # the first, or past the highest
        fwd.high, fwd.high_ts = seg.seq, seg.ts
    elif (ack == fwd.ack and seg.seq == fwd.high and seg.window and seg.window == fwd.window
          and not flags & _CONTROL):
        fwd.dupacks += 1
    if flags & ACK:
        if ack != fwd.ack:
            fwd.ack, fwd.dupacks = ack, 0
        fwd.ack_ts = seg.ts
    fwd.window = seg.window


def _control(conv: Conversation[T], side: int, seg: TcpSegment) -> None:
    """A segment with SYN, FIN or RST: a reset is counted; a SYN starts the handshake's RTT."""
    if seg.flags & RST:
        trouble = conv.troubles()
        if not trouble.resets.frames:
            trouble.reset_after_fin = conv.fin[0] or conv.fin[1]
        trouble.resets.add(side, seg.frame, seg.ts)
    if seg.flags & (SYN | ACK) == SYN and conv.first_rtt is None:
        conv.syn_ts = seg.ts


def _sequence(conv: Conversation[T], side: int, seg: TcpSegment, seglen: int) -> None:
    """A segment that takes sequence space: counted if it is a retransmission, then its side's
    highest sequence number advanced (not by a zero-window probe)."""
    fwd, rev = conv.seqs[side], conv.seqs[1 - side]
    seq = seg.seq
    end = (seq + seglen + (1 if seg.flags & _SYN_FIN else 0)) & _SEQ
    high = fwd.high
    acked = rev.ack is not None and 0 < ((rev.ack - seq) & _SEQ) < _HALF  # the peer acknowledged past seq
    if (seq != high or acked) and _retransmitted(conv, fwd, rev, seg, seglen, end):
        conv.troubles().retransmissions.add(side, seg.frame, seg.ts)
    if high is None or 0 < ((end - high) & _SEQ) < _HALF and not (seglen == 1 and seq == high and rev.window == 0):
        fwd.high, fwd.high_ts = end, seg.ts  # advanced, unless by a zero-window probe


def _retransmitted(conv: Conversation[T], fwd: SeqState, rev: SeqState, seg: TcpSegment, seglen: int,
                   end: int) -> bool:
    """Whether a segment that starts below its side's highest sequence number, or that the
    peer acknowledged, is a retransmission (Wireshark's retransmission, fast retransmission or
    spurious retransmission), not a keep-alive nor out of order."""
    seq, high = seg.seq, fwd.high
    before = -1 if high is None else (high - 1) & _SEQ
    if seglen <= 1 and seq == before and not seg.flags & _CONTROL:
        return False  # a keep-alive
    if seglen and rev.ack is not None and ((rev.ack - seq - seglen) & _SEQ) < _HALF:
        return True  # its bytes were acknowledged already
    if high is None or seq_diff(seq, high) >= 0 or (seglen > 1 and seq == before):
        return False  # it advances the stream
    if rev.dupacks >= 2 and rev.ack == seq and 0 <= seg.ts - rev.ack_ts < FAST_RETRANSMISSION_S:
        return True  # a fast retransmission
    since = seg.ts - fwd.high_ts
    return not (0 <= since < (conv.first_rtt or OUT_OF_ORDER_S) and end != high)  # else out of order


accel.bind(globals(), "kdissect.stream._tracker", ("_first_seq", "_analyse"))
