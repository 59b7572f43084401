"""What a run saw, for the summary of a capture in which little or nothing was decoded
(`analysis/coverage.py` turns the counts into lines for standard error)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kdissect.stream.flow import Conversation

if TYPE_CHECKING:
    from kdissect.tls.connection import TlsConnection


@dataclass(slots=True)
class PortTally:
    conversations: int = 0
    segments: int = 0


@dataclass(slots=True)
class Counters:
    frames: int = 0
    first_ts: float | None = None  # the time of the first packet, of any kind (the time column's origin)
    tcp_segments: int = 0
    conversations: int = 0
    messages: int = 0
    recognised: int = 0  # conversations whose protocol was found
    unsupported_links: dict[int, int] = field(default_factory=dict)  # link type -> frames skipped
    # (server port, what the bytes look like: "TLS", "HTTP", ... or "") -> conversations that
    # carried data no dissector took
    undecoded: dict[tuple[int, str], PortTally] = field(default_factory=dict)
    tls_conversations: int = 0
    tls_decrypted: int = 0  # TLS conversations of which some application data was decrypted
    # diagnostic key -> TLS conversations not decrypted (or not to the end) for that reason, with the
    # first such diagnostic's text
    tls_problems: dict[str, tuple[int, str]] = field(default_factory=dict)

    def unsupported_link(self, linktype: int) -> None:
        self.unsupported_links[linktype] = self.unsupported_links.get(linktype, 0) + 1

    def undecoded_conversation(self, conv: Conversation[Any], kind: str) -> None:
        """Count a conversation that carried data no dissector took, under its server's port."""
        key = (server_port(conv), kind)
        tally = self.undecoded.get(key)
        if tally is None:
            tally = self.undecoded[key] = PortTally()
        tally.conversations += 1
        tally.segments += conv.packets


    def tls_conversation(self, tls: TlsConnection) -> None:
        """Count a TLS conversation at its end."""
        self.tls_conversations += 1
        self.tls_decrypted += tls.info.decrypted
        for d in tls.diagnostics:
            if d.key == "tls.alert":
                continue
            n, text = self.tls_problems.get(d.key, (0, d.message))
            self.tls_problems[d.key] = (n + 1, text)


def server_port(conv: Conversation[Any]) -> int:
    client = conv.client
    if client is None:  # no SYN seen: the lower port is more likely the server's
        client = 0 if conv.a[1] > conv.b[1] else 1
    return (conv.b if client == 0 else conv.a)[1]
