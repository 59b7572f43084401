"""Conversation: one TCP connection, like Wireshark's conversation_t.

It keeps the TCP facts: its endpoints, a Reassembler per direction, which side is the client
(once a SYN or the layers above say), FIN, RST and SYN seen, the sequence number each side
started with, packet and byte counts, and the events of each side held until the layers above
choose a protocol. Once it has ended (`end`) only its counts go on. What those layers attach
once they have (a dissector, its state, framers) is theirs, in the `app` slot: this layer only
keeps it, so it knows nothing of them.

Its TCP trouble, as Wireshark's TCP analysis flags it (`Trouble`: retransmitted segments, zero
windows, resets, per side), is counted from each side's `SeqState` by the tracker, and goes on
being counted after its end.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from kdissect.capture.l2l4 import format_addr
from kdissect.stream.reassembly import Buffered, Data, Event, Reassembler

Endpoint = tuple[bytes, int]
T = TypeVar("T")

PROBE_BYTES = 4096  # what a probe sees of each side's first bytes (a whole first message, often)
MAX_TROUBLE_FRAMES = 10  # frames each kind of trouble names (its count says how many there were)
# What a held event costs besides its bytes (the event, its bytes object, frame number and time),
# counted with them in the capture's pool of kept bytes while it is held
HELD_EVENT_COST = 128


class Tally:
    """Segments of one kind of trouble: how many each side sent, the first MAX_TROUBLE_FRAMES
    frames (both sides'), and when the first and the last came."""

    __slots__ = ("count", "frames", "first_ts", "last_ts")

    def __init__(self) -> None:
        self.count = [0, 0]
        self.frames: list[int] = []
        self.first_ts = 0.0
        self.last_ts = 0.0

    def add(self, side: int, frame: int, ts: float) -> None:
        if not self.frames:
            self.first_ts = ts
        self.count[side] += 1
        self.last_ts = ts
        if len(self.frames) < MAX_TROUBLE_FRAMES:
            self.frames.append(frame)

    @property
    def total(self) -> int:
        return self.count[0] + self.count[1]


class Trouble:
    """What went wrong on a conversation's TCP: retransmitted segments, segments advertising a
    zero window (their sender's receive buffer was full) and resets, and whether a FIN came
    before the first reset (a close, not an abort)."""

    __slots__ = ("retransmissions", "zero_windows", "resets", "reset_after_fin")

    def __init__(self) -> None:
        self.retransmissions = Tally()
        self.zero_windows = Tally()
        self.resets = Tally()
        self.reset_after_fin = False


class SeqState:
    """One side's sequence analysis, as Wireshark's: the sequence number past the highest byte
    it sent (`high`, its "next sequence number") and when that advanced, the last ACK it sent
    and when, its last window, and the duplicate ACKs it sent in a row."""

    __slots__ = ("high", "high_ts", "ack", "ack_ts", "window", "dupacks")

    def __init__(self) -> None:
        self.high: int | None = None
        self.high_ts = 0.0
        self.ack: int | None = None
        self.ack_ts = 0.0
        self.window = -1
        self.dupacks = 0


class Conversation(Generic[T]):
    __slots__ = (
        "index", "a", "b", "reasm", "client", "app", "tls", "held", "held_bytes", "ignored", "passive", "fin",
        "rst", "syn_seen", "names", "last_ts", "bytes", "packets", "first_seq", "over", "next_seq", "seqs",
        "syn_ts", "first_rtt", "trouble", "heads", "head_open", "probed", "forgotten", "held_counted",
    )

    def __init__(self, index: int, a: Endpoint, b: Endpoint, pool: Buffered | None = None) -> None:
        self.index = index
        self.a = a  # side 0
        self.b = b  # side 1
        self.reasm = (Reassembler(pool), Reassembler(pool))  # (pool: what the capture's keep, in all)
        self.client: int | None = None  # 0 or 1 once known
        self.app: T | None = None  # what the layers above attach once they know the protocol
        self.tls: Any = None  # what a security layer above attaches (it turns the events into cleartext)
        self.held: list[list[Event]] = [[], []]  # events before a protocol is chosen
        self.held_bytes = [0, 0]
        self.held_counted = 0  # what the held events count in the pool now
        # each side's first PROBE_BYTES bytes, kept as its events are held (up to the first gap or
        # overlap, which ends them), and how many of them the probes last looked at
        self.heads = [bytearray(), bytearray()]
        self.head_open = [True, True]
        self.probed = [0, 0]
        self.ignored = False  # only its packets are counted (no protocol was found)
        self.passive = False  # not reassembled: only its packets, bytes and end are tracked
        self.fin = [False, False]
        self.rst = False
        self.syn_seen = [False, False]  # whether each side's stream start was captured
        self.names = (format_addr(*a), format_addr(*b))
        self.last_ts = 0.0
        self.bytes = [0, 0]
        self.packets = 0
        # each side's first sequence number, as Wireshark's base_seq (the tracker keeps it)
        self.first_seq: list[int | None] = [None, None]
        self.over = False  # ended: later packets are only counted
        self.forgotten = False  # ended, and the tracker no longer counts later packets in it: final
        self.next_seq: list[int | None] = [None, None]  # each side's next sequence number when it ended
        self.seqs = (SeqState(), SeqState())
        self.syn_ts: float | None = None  # the latest SYN's time, until the handshake's RTT is known
        self.first_rtt: float | None = None  # from the SYN to the first ACK without SYN, as Wireshark's
        self.trouble: Trouble | None = None  # made at the first trouble

    def troubles(self) -> Trouble:
        """Its Trouble, made on first use."""
        if self.trouble is None:
            self.trouble = Trouble()
        return self.trouble

    def side_of(self, src: bytes, sport: int) -> int:
        return 0 if (src, sport) == self.a else 1

    @property
    def closed(self) -> bool:
        return self.rst or (self.fin[0] and self.fin[1])

    @property
    def had_data(self) -> bool:
        return self.bytes[0] > 0 or self.bytes[1] > 0

    def head(self, side: int) -> bytes:
        """The first bytes side sent (from the held events)."""
        return bytes(self.heads[side])

    def head_size(self, side: int) -> int:
        """len(head(side)), without copying it."""
        return len(self.heads[side])

    def hold(self, side: int, events: list[Event]) -> None:
        """Keep events of side until a protocol is chosen; its head follows them, so that it is
        read without walking them again."""
        self.held[side].extend(events)
        data = sum(len(e.data) for e in events if isinstance(e, Data))
        self.held_bytes[side] += data
        cost = data + HELD_EVENT_COST * len(events)
        self.held_counted += cost
        self.reasm[side].pool.used += cost
        head = self.heads[side]
        for ev in events:
            if not self.head_open[side] or len(head) >= PROBE_BYTES:
                break
            if not isinstance(ev, Data):
                self.head_open[side] = False  # a gap: what follows is not the start
                break
            head += ev.data[: PROBE_BYTES - len(head)]

    def take_held(self) -> list[tuple[int, list[Event]]]:
        """The held events of each side that has some, in capture order of their first frame
        (the client first on ties); nothing stays held."""
        held, self.held = self.held, [[], []]
        self._drop_heads()
        order = sorted((0, 1), key=lambda s: (_first_frame(held[s]), s != self.client))
        return [(side, held[side]) for side in order if held[side]]

    def ignore(self) -> None:
        """From now on only count its packets (the layers above gave up on it)."""
        self.ignored = True
        self.held = [[], []]
        self._drop_heads()
        self._release()

    def end(self) -> None:
        """It ended: drop the reassembly state and what the layers above attached; from now on
        only its packets and bytes are counted."""
        self.over = True
        self.next_seq = [r.next_seq for r in self.reasm]
        self._release()
        self.held = [[], []]
        self._drop_heads()
        self.reasm = _ENDED
        self.app = None
        self.tls = None

    def make_passive(self) -> None:
        """From now on track only its packets, bytes and end: no reassembly."""
        self.passive = True
        self.held = [[], []]
        self._drop_heads()
        self._release()

    def _release(self) -> None:
        """Its reassemblers will not be fed again: what they keep no longer counts."""
        if self.reasm is not _ENDED:
            for r in self.reasm:
                r.release()

    def _drop_heads(self) -> None:
        """Nothing is held any more: its heads are empty, as a new conversation's, and the held
        events no longer count in the pool."""
        if self.held_counted:
            self.reasm[0].pool.used -= self.held_counted
            self.held_counted = 0
        self.heads = [bytearray(), bytearray()]
        self.head_open = [True, True]
        self.probed = [0, 0]


# The reassemblers of every ended conversation: never fed (the tracker only counts their packets).
_ENDED = (Reassembler(), Reassembler())


def _first_frame(events: list[Event]) -> int:
    for ev in events:
        if isinstance(ev, Data):
            return ev.frame
    return 1 << 62
