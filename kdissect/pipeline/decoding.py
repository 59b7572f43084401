"""Decoding: what the pipeline attaches to a conversation (`Conversation.app`) once its protocol
is known: the dissector, its per-conversation state, a framer per side, and the messages
decoded. It turns a side's stream events into PDUs."""

from __future__ import annotations

from kdissect.dissect.base import CaptureState, ConversationState, Dissector
from kdissect.framing.length_prefixed import BoundaryProbe, Framer
from kdissect.model import Pdu
from kdissect.stream.reassembly import Buffered, Data, Event, Gap


class Decoding:
    # (a plain class: a dataclass costs some 5 M instructions to build at import)
    __slots__ = ("dissector", "state", "framers", "messages", "quiet")

    def __init__(self, dissector: Dissector, state: ConversationState, framers: tuple[Framer, Framer],
                 messages: int = 0, quiet: bool = False) -> None:
        self.dissector = dissector
        self.state = state
        self.framers = framers
        self.messages = messages
        self.quiet = quiet  # decoded only for what it teaches the capture's other conversations

    @classmethod
    def start(cls, dissector: Dissector, client: int, synced: list[bool],
              capture: CaptureState | None = None) -> Decoding:
        """Framers for both sides; `synced[side]`: whether that side's stream start was captured;
        `capture`: what the capture's conversations share (the state's own when None)."""
        state = dissector.new_state()
        if capture is not None:
            state.share(capture)
        framers = (_framer(dissector, client == 0, state, synced[0]),
                   _framer(dissector, client == 1, state, synced[1]))
        return cls(dissector, state, framers)

    def frame(self, side: int, ev: Event) -> list[Pdu]:
        """The PDUs that the next event of side's stream completes."""
        framer = self.framers[side]
        if isinstance(ev, Data):
            return framer.feed(ev.data, ev.frame, ev.ts)
        if isinstance(ev, Gap):
            return framer.gap(ev.lost, ev.frame_before, ev.frame_after)
        framer.overlap(ev.length, ev.frame)
        return []


def _framer(d: Dissector, to_server: bool, state: ConversationState, synced: bool) -> Framer:
    framer = d.new_framer(to_server, state=state)
    framer.set_probe(_boundary(d, to_server, state), synced)
    framer.set_pool(state.capture.get(Buffered))  # what the capture's framers and reassemblers keep
    return framer


def _boundary(d: Dissector, to_server: bool, state: ConversationState) -> BoundaryProbe:
    # The probe refers to the state, not to the conversation that holds the framer holding it:
    # no reference cycle, so a closed conversation is freed at once, not by the cyclic garbage
    # collector (which the CLI runs rarely). Probes never raise (dissect/base.py).
    def probe(head: bytes) -> bool:
        return d.probe_boundary(head, to_server, state)

    return probe

