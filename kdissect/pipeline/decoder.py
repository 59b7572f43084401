"""Decoder: the layers above TCP for each conversation the Tracker reports. It applies the
flow filter, holds a conversation's first events until a dissector is chosen (`detect`), then
frames and dissects (`Decoding`), links each response to its request, and passes the messages
to the ordered output; at a conversation's end it flushes what is left, counts a conversation
no dissector took, and tells the observers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from kdissect.dissect.base import CaptureState, Dissector, Options, run_dissector
from kdissect.model import Match, Message, Pdu
from kdissect.pipeline.counters import Counters
from kdissect.pipeline.decoding import Decoding
from kdissect.pipeline.detect import DissectorRegistry, choose, first_bytes, undecidable
from kdissect.pipeline.output import Output
from kdissect.stream.flow import Conversation, Endpoint
from kdissect.stream.reassembly import Buffered, Data, Event
from kdissect.tls.records import starts_tls

if TYPE_CHECKING:
    from kdissect.tls.connection import TlsConnection
    from kdissect.tls.keylog import KeyLog

FlowFilter = Callable[[Endpoint, Endpoint], bool]


class ConversationObserver(Protocol):
    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        """conv ended (its messages are all decoded); `conv.app` is None if none was."""


def link(req: Message, resp: Message) -> None:
    """Pair a request and its response, with the response time: the response always points to
    its request; the request to its response only if it waited for one. A request that expects
    no answer leaves the output at once, so whether it could still show a late answer would
    depend on the traffic of other conversations."""
    rtt = max(0.0, resp.ts_end - req.ts_end)
    resp.match = Match(req.frame, req.kind, rtt)
    if req.expects_response:
        req.match = Match(resp.frame, resp.kind, rtt)


class Decoder:
    """`flow_filter(a, b)`, if given, is asked once per new conversation (see Pipeline)."""

    def __init__(self, registry: DissectorRegistry, opts: Options, output: Output, counters: Counters,
                 flow_filter: FlowFilter | None = None, capture: str = "",
                 observers: Iterable[ConversationObserver] = (), shared: CaptureState | None = None) -> None:
        self.registry = registry
        self.opts = opts
        self.output = output
        self.counters = counters
        self.flow_filter = flow_filter
        self.capture = capture
        self.observers = list(observers)
        self.skipped: set[int] = set()  # indices of open conversations flow_filter rejected
        self.given_up: dict[int, str] = {}  # open conversations detection gave up on -> first_bytes
        self.keylog = _keylog(opts.tls_keylog) if opts.tls_keylog else None
        # what the dissectors learn over the capture (dissect/base.py)
        self.shared = shared if shared is not None else CaptureState()
        # Conversations another worker outputs, decoded for what they teach.
        self.quiet_opts = replace(opts, decode_records=False, record_detail=False, teach_only=True)

    # -- the Tracker's Upper interface ---------------------------------------------------

    def opened(self, conv: Conversation[Decoding]) -> None:
        self.counters.conversations += 1
        if self.flow_filter is not None and not self.flow_filter(conv.a, conv.b):
            self.skipped.add(conv.index)

    def events(self, conv: Conversation[Decoding], side: int, events: list[Event]) -> None:
        tls = conv.tls
        if tls is None and conv.app is None and not any(conv.held_bytes) and _starts_tls(events):
            tls = conv.tls = _tls_connection(self.keylog, conv.reasm[side].pool)
        if tls is not None:
            events = tls.feed(side, events)
            if conv.client is None and tls.client is not None:
                conv.client = tls.client
            if not events:
                return
        app = conv.app
        if app is not None:
            for ev in events:  # (_decode, inline, and Decoding.frame for a Data's bytes)
                pdus = app.framers[side].feed(ev.data, ev.frame, ev.ts) if isinstance(ev, Data) else app.frame(side, ev)
                for pdu in pdus:
                    self._dissect(app, conv, side, pdu)
            return
        conv.hold(side, events)
        self._detect(conv)

    def closed(self, conv: Conversation[Decoding]) -> None:
        if conv.app is None and not conv.passive and not conv.ignored:
            # What its reassemblers still hold (all of it, when the first bytes were never
            # captured and nothing acknowledged them) may yet choose a protocol, as may the last
            # bytes held (the probes wait for a head to grow by an eighth).
            for side in (0, 1):
                events = conv.reasm[side].flush()
                if events:
                    self.events(conv, side, events)
            if conv.app is None and not conv.ignored and any(conv.held_bytes):
                self._detect(conv, final=True)
        if conv.tls is not None:
            self.counters.tls_conversation(conv.tls)
        if conv.app is None and not conv.passive and conv.had_data:
            kind = self.given_up.pop(conv.index, None)
            if conv.tls is not None:
                kind = "TLS"
            self.counters.undecoded_conversation(conv, first_bytes(conv) if kind is None else kind)
        if conv.app is not None:
            self._finish(conv.app, conv)  # (of a conversation another worker outputs: what it teaches)
        if conv.tls is not None:
            conv.tls.release()
        if conv.index in self.skipped:
            self.skipped.discard(conv.index)
            return
        self.output.stream_closed(conv.index)
        for observer in self.observers:
            observer.conversation_ended(conv)

    # -- detection -----------------------------------------------------------------------

    def _detect(self, conv: Conversation[Decoding], final: bool = False) -> None:
        found = choose(self.registry, conv, final)
        if found is None:
            if undecidable(conv):
                self.given_up[conv.index] = first_bytes(conv)
                conv.ignore()
            return
        self.counters.recognised += 1
        if conv.index in self.skipped and not found[0].learns_across_conversations:
            conv.make_passive()  # another worker decodes it
            return
        self._start(conv, *found)

    def _start(self, conv: Conversation[Decoding], dissector: Dissector, client: int) -> None:
        if conv.client is None:
            conv.client = client
        conv.app = app = Decoding.start(dissector, conv.client, conv.syn_seen, self.shared)
        app.quiet = conv.index in self.skipped  # another worker outputs it
        for side, events in conv.take_held():
            self._decode(app, conv, side, events)

    # -- framing and dissection ----------------------------------------------------------

    def _decode(self, app: Decoding, conv: Conversation[Decoding], side: int, events: list[Event]) -> None:
        for ev in events:  # each event's PDUs dissected before the next: probes see their state
            for pdu in app.frame(side, ev):
                self._dissect(app, conv, side, pdu)

    def _dissect(self, app: Decoding, conv: Conversation[Decoding], side: int, pdu: Pdu) -> None:
        msg = Message(pdu, conv.index, conv.names[side], conv.names[1 - side], app.dissector.name)
        if app.quiet:
            run_dissector(app.dissector, msg, app.state, self.quiet_opts)
            return
        msg.capture = self.capture
        if conv.tls is not None:
            msg.tls = conv.tls.info
        run_dissector(app.dissector, msg, app.state, self.opts)
        if msg.peer is not None:
            link(msg.peer, msg)
        app.messages += 1
        self.output.add(msg)

    def _finish(self, app: Decoding, conv: Conversation[Decoding]) -> None:
        """The conversation's last bytes decoded, then its state ended (its pending requests
        given back to the capture's pool)."""
        for side in (0, 1):
            events = conv.reasm[side].flush()
            if events and conv.tls is not None:
                events = conv.tls.feed(side, events)
            if events:
                self._decode(app, conv, side, events)
        for side in (0, 1):
            for pdu in app.framers[side].flush():
                self._dissect(app, conv, side, pdu)
        app.state.end()


def _starts_tls(events: list[Event]) -> bool:
    """Whether a conversation's first events begin with a TLS record."""
    for ev in events:
        if isinstance(ev, Data):
            return starts_tls(ev.data)
    return False


# The TLS layer is imported with the first conversation that starts with a TLS record, or for a
# key log: plain traffic does not load it.

def _keylog(path: str) -> KeyLog:
    from kdissect.tls.keylog import KeyLog

    return KeyLog(path)


def _tls_connection(keylog: KeyLog | None, pool: Buffered) -> TlsConnection:
    from kdissect.tls.connection import TlsConnection

    return TlsConnection(keylog, pool)
