"""Conversation: one TCP connection, like Wireshark's conversation_t.

It owns a Reassembler per direction, decides which side is the server (SYN, then the port
table, then the protocol probe), holds the first bytes of each side until a protocol is chosen,
and then a Framer per direction plus the dissector's per-conversation state.
"""

from __future__ import annotations

from typing import Any

from kdissect.capture.l2l4 import format_addr
from kdissect.dissect.base import ConversationState, Dissector
from kdissect.framing.length_prefixed import Framer
from kdissect.stream.reassembly import Event, Reassembler

Endpoint = tuple[bytes, int]

PROBE_BYTES = 4096  # what a probe sees of each side's first bytes (a whole first message, often)
MAX_UNDECIDED_BYTES = 16 * 1024  # give up detecting after this much data without a match


class Conversation:
    __slots__ = (
        "index", "a", "b", "reasm", "client", "dissector", "state", "framers", "held",
        "held_bytes", "ignored", "fin", "rst", "syn_seen", "names", "last_ts", "bytes", "packets",
        "messages",
    )

    def __init__(self, index: int, a: Endpoint, b: Endpoint) -> None:
        self.index = index
        self.a = a  # side 0
        self.b = b  # side 1
        self.reasm = (Reassembler(), Reassembler())
        self.client: int | None = None  # 0 or 1 once known
        self.dissector: Dissector | None = None
        self.state: ConversationState | None = None
        self.framers: list[Framer | None] = [None, None]
        self.held: list[list[Event]] = [[], []]  # events before a protocol is chosen
        self.held_bytes = [0, 0]
        self.ignored = False
        self.fin = [False, False]
        self.rst = False
        self.syn_seen = [False, False]  # whether each side's stream start was captured
        self.names = (format_addr(*a), format_addr(*b))
        self.last_ts = 0.0
        self.bytes = [0, 0]
        self.packets = 0
        self.messages = 0

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
        out = bytearray()
        for ev in self.held[side]:
            data = getattr(ev, "data", None)
            if data is None:
                break  # a gap: what follows is not the start
            out += data
            if len(out) >= PROBE_BYTES:
                break
        return bytes(out[:PROBE_BYTES])

    def describe(self) -> dict[str, Any]:
        client = self.client if self.client is not None else 0
        return {
            "stream": self.index,
            "client": self.names[client],
            "server": self.names[1 - client],
            "protocol": self.dissector.name if self.dissector else None,
            "packets": self.packets,
            "bytes_to_server": self.bytes[client],
            "bytes_to_client": self.bytes[1 - client],
            "messages": self.messages,
        }
