"""Pipeline: the composition of the layers.

CaptureSource -RawFrame-> l2l4 -TcpSegment-> Tracker (Conversation, Reassembler) -events->
Decoder (detect; Decoding: Framer -Pdu-> Dissector -Message-> linking) -> Output (ordered).

`Pipeline.feed(frame)` is sans-io (the live sniffer and Spark call it directly);
`dissect_file(path)` streams a capture file (or several, merged in time order) through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from kdissect.capture.l2l4 import LINK_LAYERS, decode
from kdissect.capture.pcapfile import RawFrame, open_capture
from kdissect.dissect.base import CaptureState, Options
from kdissect.model import Message
from kdissect.pipeline.counters import Counters
from kdissect.pipeline.decoder import ConversationObserver, Decoder, FlowFilter
from kdissect.pipeline.decoding import Decoding
from kdissect.pipeline.detect import DissectorRegistry
from kdissect.pipeline.output import HELD_BYTES, HeldBytes, Output
from kdissect.stream.reassembly import Buffered
from kdissect.stream.tracker import MAX_CONVERSATIONS, Tracker


class Pipeline:
    """`flow_filter(a, b)`, if given, is asked once per new conversation (canonical endpoints,
    a <= b) whether to decode it. A conversation it rejects is still tracked (its SYN, FIN, RST
    and data volume) so that stream numbers stay those of the whole capture, but once its
    protocol is known it is neither reassembled nor decoded, unless its protocol learns across
    conversations (Kafka's topic ids): then it is decoded quietly, for what it teaches, and
    nothing of it is output. Several workers can share one capture by flow hash and together
    produce exactly the single-process output.

    `capture` names the source in each message; `counters` (fresh if not given) holds the
    run's counts; `observers` are told of each conversation's end; `shared` (fresh if not
    given) is what the dissectors learn over the capture; `numbering` numbers the streams
    (Tracker)."""

    def __init__(self, registry: DissectorRegistry | None = None, opts: Options | None = None,
                 hold: bool = True, flow_filter: FlowFilter | None = None, *, capture: str = "",
                 counters: Counters | None = None, observers: Iterable[ConversationObserver] = (),
                 shared: CaptureState | None = None, numbering: Callable[[int], int] | None = None) -> None:
        self.counters = counters if counters is not None else Counters()
        self.shared = shared if shared is not None else CaptureState()
        self.held = HeldBytes(HELD_BYTES)
        self.output = Output(hold, self.held, self.counters)
        decoder = Decoder(registry or DissectorRegistry(), opts or Options(), self.output, self.counters,
                          flow_filter, capture, observers, self.shared)
        self.observers = decoder.observers
        # The tracker refers to the decoder, which does not refer back: no cycle.
        self.tcp: Tracker[Decoding] = Tracker(decoder, MAX_CONVERSATIONS, numbering=numbering,
                                              pool=self.shared.get(Buffered))

    def feed(self, frame: RawFrame) -> list[Message]:
        counters = self.counters
        counters.frames += 1
        if counters.first_ts is None:
            counters.first_ts = frame.ts
        seg = decode(frame)
        if seg is not None:
            self.shared.frame = frame.number
            counters.tcp_segments += 1
            self.output.now = frame.ts
            self.tcp.segment(seg)
        elif frame.linktype not in LINK_LAYERS:
            counters.unsupported_link(frame.linktype)
        return self.output.release(False)

    def finish(self) -> list[Message]:
        self.shared.frame += 1  # after every frame
        self.tcp.finish()
        return self.output.release(True)


def dissect_file(path: str | Sequence[str], registry: DissectorRegistry | None = None, opts: Options | None = None,
                 progress: Callable[[int], None] | None = None,
                 warnings: list[str] | None = None,
                 flow_filter: FlowFilter | None = None,
                 counters: Counters | None = None,
                 observers: Iterable[ConversationObserver] = ()) -> Iterator[Message]:
    """Stream the messages of one capture file, or of several merged in time order as mergecap
    does (frame numbers are then those of the merged order), in order (of the conversations
    flow_filter accepts, if given). `counters`, if given, holds the run's counts at the end; `observers`
    are told of each conversation's end."""
    name = path if isinstance(path, str) else ", ".join(path)
    pipe = Pipeline(registry, opts, flow_filter=flow_filter, capture=name, counters=counters,
                    observers=observers)
    with open_capture(path) as cap:
        for n, frame in enumerate(cap, 1):
            yield from pipe.feed(frame)
            if progress is not None and n % 2048 == 0:
                progress(cap.position())
        yield from pipe.finish()
        if progress is not None:
            progress(cap.position())
        if warnings is not None:
            warnings.extend(cap.warnings)
