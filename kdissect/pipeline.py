"""The one place that composes the layers:

CaptureSource -RawFrame-> l2l4 -TcpSegment-> Conversation/Reassembler -events-> Framer -Pdu->
Dissector -Message-> matching -> ordered output.

`Pipeline.feed(frame)` is sans-io (the live sniffer and Spark call it directly);
`dissect_file(path)` streams a capture file through it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kdissect.analysis.coverage import looks_like
from kdissect.capture.l2l4 import ACK, FIN, LINK_LAYERS, RST, SYN, TcpSegment, decode
from kdissect.capture.pcapfile import CaptureFile, RawFrame
from kdissect.dissect.base import ConversationState, Dissector, Options, run_dissector
from kdissect.dissect.registry import DissectorRegistry
from kdissect.model import SECRET, Diagnostic, Field, Group, Match, Message, Pdu, Severity, tree_secret_ranges
from kdissect.stream.flow import MAX_UNDECIDED_BYTES, Conversation, Endpoint
from kdissect.stream.reassembly import Data, Event, Gap, Overlap

# Open conversations tracked at once: beyond this the least recently active one is closed (its
# output flushed; if it goes on, it continues as a new conversation that starts mid-stream). An
# open conversation with a pending request costs about 8 KB, so this bounds memory at ~100 MB.
MAX_CONVERSATIONS = 10_000
HOLD_MESSAGES = 2_000  # requests waiting for their response hold back output at most this long
HOLD_SECONDS = 120.0  # ... or this much capture time
# Decompressed bytes (Message.inflated) that messages held back, and requests that may still
# wait for their response, keep in all: past this the oldest lose their decoded bodies.
HELD_BYTES = 256 * 1024 * 1024


@dataclass(slots=True)
class PortTally:
    conversations: int = 0
    segments: int = 0


@dataclass(slots=True)
class Counters:
    """What a run saw, for the summary of a capture in which little or nothing was decoded."""

    frames: int = 0
    tcp_segments: int = 0
    conversations: int = 0
    messages: int = 0
    recognised: int = 0  # conversations whose protocol was found
    unsupported_links: dict[int, int] = field(default_factory=dict)  # link type -> frames skipped
    # (server port, what the bytes look like: "TLS", "HTTP", ... or "") -> conversations that
    # carried data no dissector took
    undecoded: dict[tuple[int, str], PortTally] = field(default_factory=dict)


def link(req: Message, resp: Message) -> None:
    """Pair a request and its response both ways, with the response time."""
    rtt = max(0.0, resp.ts_end - req.ts_end)
    resp.match = Match(req.frame, req.kind, rtt)
    req.match = Match(resp.frame, resp.kind, rtt)


FlowFilter = Callable[[Endpoint, Endpoint], bool]


class Pipeline:
    """`flow_filter(a, b)`, if given, is asked once per new conversation (canonical endpoints,
    a <= b) whether to decode it. A conversation it rejects is still tracked (its SYN, FIN, RST
    and data volume) so that stream numbers stay those of the whole capture, but once its
    protocol is known it is neither reassembled nor decoded: several workers can share one
    capture by flow hash and together produce exactly the single-process output."""

    def __init__(self, registry: DissectorRegistry | None = None, opts: Options | None = None,
                 hold: bool = True, flow_filter: FlowFilter | None = None) -> None:
        self.registry = registry or DissectorRegistry()
        self.opts = opts or Options()
        self.hold = hold  # keep output in capture order with requests linked to responses
        self.conversations: OrderedDict[tuple[Endpoint, Endpoint], Conversation] = OrderedDict()
        self.counters = Counters()
        self.out: deque[Message] = deque()
        self.closed_streams: set[int] = set()
        self.now = 0.0
        self.capture = ""
        self.on_conversation_end: Callable[[Conversation], None] | None = None
        self.flow_filter = flow_filter
        self.skipped: set[int] = set()  # indices of open conversations flow_filter rejected
        self.given_up: dict[int, str] = {}  # open conversations detection gave up on -> looks_like
        self.held = HeldBytes(HELD_BYTES)

    # -- input -------------------------------------------------------------------------

    def feed(self, frame: RawFrame) -> list[Message]:
        self.counters.frames += 1
        seg = decode(frame)
        if seg is not None:
            self.counters.tcp_segments += 1
            self.now = frame.ts
            self._segment(seg)
        elif frame.linktype not in LINK_LAYERS:
            links = self.counters.unsupported_links
            links[frame.linktype] = links.get(frame.linktype, 0) + 1
        return self._release(False)

    def finish(self) -> list[Message]:
        for conv in list(self.conversations.values()):
            self._close(conv)
        self.conversations.clear()
        return self._release(True)

    # -- TCP ---------------------------------------------------------------------------

    def _conversation(self, seg: TcpSegment) -> Conversation:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = (a, b) if a <= b else (b, a)
        conv = self.conversations.get(key)
        syn_only = seg.flags & (SYN | ACK) == SYN
        if conv is not None and syn_only and (conv.closed or conv.had_data):
            self._close(conv)
            del self.conversations[key]
            conv = None
        if conv is None:
            conv = Conversation(self.counters.conversations, key[0], key[1])
            self.counters.conversations += 1
            self.conversations[key] = conv
            if self.flow_filter is not None and not self.flow_filter(key[0], key[1]):
                self.skipped.add(conv.index)
            if len(self.conversations) > MAX_CONVERSATIONS:
                _, oldest = self.conversations.popitem(last=False)
                self._close(oldest)
        else:
            self.conversations.move_to_end(key)
        return conv

    def _segment(self, seg: TcpSegment) -> None:
        conv = self._conversation(seg)
        conv.packets += 1
        conv.last_ts = seg.ts
        if conv.ignored or self._skip(conv, seg):
            return
        side = conv.side_of(seg.src, seg.sport)
        r = conv.reasm[side]
        if seg.flags & SYN:
            self._syn(conv, side, seg)
        # The ACK first: it acknowledges what the peer sent before this segment, so bytes it
        # reveals as lost (and the backlog behind them) precede this segment's own data.
        if seg.flags & ACK:
            lost = conv.reasm[1 - side].acked(seg.ack)
            if lost:
                self._events(conv, 1 - side, lost)
        events: list[Event] = []
        if seg.payload:
            conv.bytes[side] += len(seg.payload)
            events = r.segment(seg.seq, seg.payload, seg.frame, seg.ts)
        if seg.missing:
            events += r.cut((seg.seq + len(seg.payload)) & 0xFFFFFFFF, seg.missing, seg.frame)
        if seg.flags & FIN:
            r.fin(seg.seq + (1 if seg.flags & SYN else 0), len(seg.payload) + seg.missing)
        if events:
            self._events(conv, side, events)
        self._track_end(conv, side, seg)

    def _track_end(self, conv: Conversation, side: int, seg: TcpSegment) -> None:
        """FIN and RST: a conversation closed both ways (or reset) is flushed and forgotten."""
        if seg.flags & RST:
            conv.rst = True
        elif seg.flags & FIN:
            conv.fin[side] = True
        if conv.closed:
            self._close(conv)
            self.conversations.pop((conv.a, conv.b), None)

    def _skip(self, conv: Conversation, seg: TcpSegment) -> bool:
        """A conversation flow_filter rejected, once its protocol is known: track only what
        decides where conversations start and end."""
        if conv.dissector is None or conv.index not in self.skipped:
            return False
        side = conv.side_of(seg.src, seg.sport)
        conv.bytes[side] += len(seg.payload)
        self._track_end(conv, side, seg)
        return True

    @staticmethod
    def _syn(conv: Conversation, side: int, seg: TcpSegment) -> None:
        conv.reasm[side].syn(seg.seq)
        conv.syn_seen[side] = True
        if conv.client is None:
            conv.client = side if not seg.flags & ACK else 1 - side

    # -- detection ---------------------------------------------------------------------

    def _events(self, conv: Conversation, side: int, events: list[Event]) -> None:
        if conv.dissector is not None and conv.index in self.skipped:
            return
        if conv.dissector is None:
            conv.held[side].extend(events)
            conv.held_bytes[side] += sum(len(e.data) for e in events if isinstance(e, Data))
            self._detect(conv)
            return
        self._frame(conv, side, events)

    def _detect(self, conv: Conversation) -> None:
        found = self._by_port(conv) or self._by_probe(conv)
        if found is None:
            if sum(conv.held_bytes) > MAX_UNDECIDED_BYTES:
                self.given_up[conv.index] = _looks_like(conv)
                conv.ignored = True
                conv.held = [[], []]
            return
        dissector, client = found
        conv.dissector = dissector
        self.counters.recognised += 1
        if conv.index in self.skipped:
            conv.held = [[], []]
            return
        if conv.client is None:
            conv.client = client
        state = dissector.new_state()
        conv.state = state
        for side in (0, 1):
            to_server = side == conv.client
            framer = dissector.new_framer(to_server, state=state)
            framer.set_probe(self._boundary(dissector, to_server, state), conv.syn_seen[side])
            conv.framers[side] = framer
        held, conv.held = conv.held, [[], []]
        # Replay in capture order of the first frame of each side's events (client first on ties).
        order = sorted((0, 1), key=lambda s: (_first_frame(held[s]), s != conv.client))
        for side in order:
            if held[side]:
                self._frame(conv, side, held[side])

    @staticmethod
    def _boundary(d: Dissector, to_server: bool, state: ConversationState) -> Callable[[bytes], bool]:
        # The probe refers to the state, not to the conversation that holds the framer holding
        # it: no reference cycle, so a closed conversation is freed at once, not by the cyclic
        # garbage collector (which the CLI runs rarely).
        def probe(head: bytes) -> bool:
            try:
                return d.probe_boundary(head, to_server, state)
            except Exception:  # noqa: BLE001 - a probe must never stop the pipeline
                return False

        return probe

    def _by_port(self, conv: Conversation) -> tuple[Dissector, int] | None:
        hit = self.registry.by_port(conv.a[1], conv.b[1])
        if hit is None:
            return None
        dissector, b_is_server = hit
        return dissector, (0 if b_is_server else 1)

    def _by_probe(self, conv: Conversation) -> tuple[Dissector, int] | None:
        sides = (conv.client,) if conv.client is not None else (0, 1)
        best: tuple[Dissector, int, float] | None = None
        for side in sides:
            head = conv.head(side)
            if len(head) < 8:
                continue
            hit = self.registry.probe(head)
            if hit and (best is None or hit[1] > best[2]):
                best = (hit[0], side, hit[1])
        return (best[0], best[1]) if best else None

    # -- framing and dissection --------------------------------------------------------

    def _frame(self, conv: Conversation, side: int, events: list[Event]) -> None:
        framer = conv.framers[side]
        assert framer is not None
        for ev in events:
            if isinstance(ev, Data):
                pdus = framer.feed(ev.data, ev.frame, ev.ts)
            elif isinstance(ev, Gap):
                pdus = framer.gap(ev.lost, ev.frame_before, ev.frame_after)
            else:
                framer.note(_overlap_diag(ev))
                continue
            for pdu in pdus:
                self._dissect(conv, side, pdu)

    def _dissect(self, conv: Conversation, side: int, pdu: Pdu) -> None:
        d, state = conv.dissector, conv.state
        assert d is not None and state is not None
        msg = Message(pdu, conv.index, conv.names[side], conv.names[1 - side], d.name)
        msg.capture = self.capture
        run_dissector(d, msg, state, self.opts)
        if msg.peer is not None:
            link(msg.peer, msg)
            if msg.peer.number:  # released already: now nothing holds it for its response
                self.held.discard(msg.peer)
        conv.messages += 1
        self.out.append(msg)
        if msg.inflated:
            self.held.add(msg)

    def _close(self, conv: Conversation) -> None:
        if conv.dissector is None and conv.had_data:
            self._undecoded(conv)
        if conv.index in self.skipped:
            self.skipped.discard(conv.index)
            return
        if conv.dissector is not None:
            for side in (0, 1):
                events = conv.reasm[side].flush()
                if events:
                    self._frame(conv, side, events)
            for side in (0, 1):
                framer = conv.framers[side]
                if framer is not None:
                    for pdu in framer.flush():
                        self._dissect(conv, side, pdu)
        self.closed_streams.add(conv.index)
        if self.on_conversation_end is not None:
            self.on_conversation_end(conv)

    def _undecoded(self, conv: Conversation) -> None:
        """Count a conversation that carried data no dissector took, under its server's port."""
        kind = self.given_up.pop(conv.index, None)
        if kind is None:
            kind = _looks_like(conv)
        client = conv.client
        if client is None:  # no SYN seen: the lower port is more likely the server's
            client = 0 if conv.a[1] > conv.b[1] else 1
        port = (conv.b if client == 0 else conv.a)[1]
        tally = self.counters.undecoded.get((port, kind))
        if tally is None:
            tally = self.counters.undecoded[(port, kind)] = PortTally()
        tally.conversations += 1
        tally.segments += conv.packets

    # -- output ------------------------------------------------------------------------

    def _release(self, final: bool) -> list[Message]:
        out = self.out
        if not out:
            if self.closed_streams:
                self.closed_streams.clear()  # it concerns only messages held back
            return []
        ready: list[Message] = []
        while out:
            m = out[0]
            waiting = self.hold and m.expects_response and m.match is None
            if waiting and not final and not self._expired(m):
                break
            out.popleft()
            self.counters.messages += 1
            m.number = self.counters.messages
            ready.append(m)
            if m.inflated and (m.kind != "request" or m.match is not None):
                self.held.discard(m)  # a request still unanswered may wait in its pending table
        if final:
            self.closed_streams.clear()
        return ready

    def _expired(self, m: Message) -> bool:
        return (len(self.out) > HOLD_MESSAGES or m.stream in self.closed_streams
                or self.now - m.ts_end > HOLD_SECONDS)


class HeldBytes:
    """The decompressed bytes (Message.inflated) of the messages the pipeline holds back and of
    the requests that may still wait in a pending-request table, oldest first. Past `limit` the
    oldest lose their decoded bodies (summary, facts and diagnostics stay). Messages are held
    weakly: one that nothing else keeps is forgotten."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._held: dict[int, tuple[weakref.ref[Message], int]] = {}

    def add(self, msg: Message) -> None:
        key = id(msg)
        self._held[key] = (weakref.ref(msg, self._forget(key)), msg.inflated)
        self.total += msg.inflated
        while self.total > self.limit and self._held:
            ref, size = self._held.pop(next(iter(self._held)))
            self.total -= size
            oldest = ref()
            if oldest is not None:
                drop_body(oldest, self.limit)

    def discard(self, msg: Message) -> None:
        self._pop(id(msg))

    def _pop(self, key: int) -> None:
        entry = self._held.pop(key, None)
        if entry is not None:
            self.total -= entry[1]

    def _forget(self, key: int) -> Callable[[weakref.ref[Message]], None]:
        return lambda _ref: self._pop(key)


def drop_body(m: Message, limit: int) -> None:
    """Empty the structures and byte values of m's tree, with a diagnostic: what held messages
    give up past the pipeline's budget. Redacted values stay (hex dumps mask their bytes)."""
    m.fields = [f if type(f) is Field and f.children is None and not isinstance(f.value, bytes) else _emptied(f)
                for f in m.fields]
    m.add(Diagnostic(Severity.WARNING, Group.UNDECODED, "pipeline.body_dropped",
                     f"decoded body not kept: the messages held waiting for responses hold more than "
                     f"{limit} decompressed bytes (the summary stays)"))


def _emptied(f: Field) -> Field:
    label = f"{f.label or f.name} (not kept)"
    if f.children is None:
        return Field(f.name, None, f.offset, f.length, None, f.hint, None, label)
    secrets = [Field("redacted", f"<redacted {n} bytes>", at, n, None, SECRET)
               for at, n in tree_secret_ranges([f])]
    return Field(f.name, None, f.offset, f.length, secrets, f.hint, None, label)


def _first_frame(events: list[Event]) -> int:
    for ev in events:
        if isinstance(ev, Data):
            return ev.frame
    return 1 << 62


def _looks_like(conv: Conversation) -> str:
    """What the first bytes of a conversation look like (the client's first), or ""."""
    order = (conv.client, 1 - conv.client) if conv.client is not None else (0, 1)
    for side in order:
        kind = looks_like(conv.head(side))
        if kind:
            return kind
    return ""


def _overlap_diag(ev: Overlap) -> Diagnostic:
    return Diagnostic(Severity.WARNING, Group.SEQUENCE, "tcp.overlap",
                      f"frame {ev.frame} retransmits {ev.length} bytes that differ from those first "
                      "captured (the first-seen bytes are used)")


def dissect_file(path: str, registry: DissectorRegistry | None = None, opts: Options | None = None,
                 progress: Callable[[int], None] | None = None,
                 warnings: list[str] | None = None,
                 flow_filter: FlowFilter | None = None,
                 counters: Counters | None = None) -> Iterator[Message]:
    """Stream the messages of one capture file, in order (of the conversations flow_filter
    accepts, if given). `counters`, if given, holds the run's counts at the end."""
    pipe = Pipeline(registry, opts, flow_filter=flow_filter)
    if counters is not None:
        pipe.counters = counters
    pipe.capture = path
    with CaptureFile(path) as cap:
        for n, frame in enumerate(cap, 1):
            yield from pipe.feed(frame)
            if progress is not None and n % 2048 == 0:
                progress(cap.position())
        yield from pipe.finish()
        if progress is not None:
            progress(cap.position())
        if warnings is not None:
            warnings.extend(cap.warnings)
