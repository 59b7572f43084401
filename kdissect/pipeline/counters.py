"""What a run saw, for the summary of a capture in which little or nothing was decoded
(`analysis/coverage.py` turns the counts into lines for standard error)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kdissect.stream.flow import Conversation

if TYPE_CHECKING:
    from kdissect.tls.connection import TlsConnection


# Plain classes, not dataclasses: a dataclass builds its methods from source text at import, some
# 5 M instructions each, a tenth of what the pipeline's modules cost to load.


class PortTally:
    __slots__ = ("conversations", "segments")

    def __init__(self, conversations: int = 0, segments: int = 0) -> None:
        self.conversations = conversations
        self.segments = segments


class Counters:
    __slots__ = ("frames", "first_ts", "tcp_segments", "conversations", "messages", "recognised",
                 "unsupported_links", "undecoded", "tls_conversations", "tls_decrypted", "tls_problems")

    def __init__(self, frames: int = 0, first_ts: float | None = None, tcp_segments: int = 0,
                 conversations: int = 0, messages: int = 0, recognised: int = 0,
                 unsupported_links: dict[int, int] | None = None,
                 undecoded: dict[tuple[int, str], PortTally] | None = None, tls_conversations: int = 0,
                 tls_decrypted: int = 0, tls_problems: dict[str, tuple[int, str]] | None = None) -> None:
        self.frames = frames
        self.first_ts = first_ts  # the time of the first packet, of any kind (the time column's origin)
        self.tcp_segments = tcp_segments
        self.conversations = conversations
        self.messages = messages
        self.recognised = recognised  # conversations whose protocol was found
        # link type -> frames skipped
        self.unsupported_links: dict[int, int] = {} if unsupported_links is None else unsupported_links
        # (server port, what the bytes look like: "TLS", "HTTP", ... or "") -> conversations that
        # carried data no dissector took
        self.undecoded: dict[tuple[int, str], PortTally] = {} if undecoded is None else undecoded
        self.tls_conversations = tls_conversations
        self.tls_decrypted = tls_decrypted  # TLS conversations of which some application data was decrypted
        # diagnostic key -> TLS conversations not decrypted (or not to the end) for that reason, with
        # the first such diagnostic's text
        self.tls_problems: dict[str, tuple[int, str]] = {} if tls_problems is None else tls_problems

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
