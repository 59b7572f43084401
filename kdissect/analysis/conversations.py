"""The TCP conversations of a capture: describe() of each conversation at its end (a pipeline
observer), plus what the decoded messages add (requests, responses, errors, first and last time).

With a display filter, message counts cover the matching messages only and conversations
without a match are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kdissect.analysis.coverage import notes
from kdissect.analysis.stats import error_of
from kdissect.capture.pcapfile import capture_name
from kdissect.dissect.base import Options
from kdissect.model import Message
from kdissect.pipeline import Counters, Decoding, dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.stream.flow import Conversation


def describe(conv: Conversation[Decoding]) -> dict[str, Any]:
    """One conversation's row: endpoints, protocol (None if not decoded), packets, bytes, messages,
    and for a TLS conversation its version, cipher suite, SNI and why it was not decrypted, if not."""
    client = conv.client if conv.client is not None else 0
    return {
        "stream": conv.index,
        "client": conv.names[client],
        "server": conv.names[1 - client],
        "protocol": conv.app.dissector.name if conv.app is not None else None,
        "packets": conv.packets,
        "bytes_to_server": conv.bytes[client],
        "bytes_to_client": conv.bytes[1 - client],
        "messages": conv.app.messages if conv.app is not None else 0,
        "tls": conv.tls.describe() if conv.tls is not None else None,
    }


@dataclass(slots=True)
class MessageTally:
    messages: int = 0
    requests: int = 0
    responses: int = 0
    errors: int = 0
    bytes: int = 0
    first_ts: float | None = None
    last_ts: float = 0.0

    def add(self, m: Message) -> None:
        self.messages += 1
        self.bytes += len(m.data)
        self.requests += m.kind == "request"
        self.responses += m.kind == "response"
        self.errors += 1 if m.kind == "response" and error_of(m) else 0
        if self.first_ts is None:
            self.first_ts = m.ts
        self.last_ts = max(self.last_ts, m.ts)


@dataclass(slots=True)
class ConversationTable:
    ended: list[dict[str, Any]] = field(default_factory=list)
    tallies: dict[int, MessageTally] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was seen when nothing was decoded (coverage.notes)

    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        self.ended.append(describe(conv))

    def on_message(self, m: Message, keep: Callable[[Message], bool] | None) -> None:
        if keep is None or keep(m):
            self.tallies.setdefault(m.stream, MessageTally()).add(m)

    def rows(self, filtered: bool, empty: bool = False) -> list[dict[str, Any]]:
        """One row per conversation; without `empty`, those that carried no payload at all (a
        lone FIN or ACK after the connection closed) are left out."""
        out = []
        for d in sorted(self.ended, key=lambda d: d["stream"]):
            t = self.tallies.get(d["stream"])
            if (filtered and t is None) or (not empty and not d["bytes_to_server"] and not d["bytes_to_client"]):
                continue
            t = t or MessageTally()
            row = dict(d)
            row.update(matched_messages=t.messages, requests=t.requests, responses=t.responses,
                       errors=t.errors, message_bytes=t.bytes, first_ts=t.first_ts,
                       duration_s=round(t.last_ts - t.first_ts, 6) if t.first_ts is not None else None)
            out.append(row)
        return out


def conversations(path: str, registry: DissectorRegistry, opts: Options,
                  keep: Callable[[Message], bool] | None = None) -> ConversationTable:
    """Run the capture through the pipeline and tabulate its conversations."""
    table = ConversationTable()
    counters = Counters()
    for m in dissect_file(path, registry, opts, warnings=table.warnings, counters=counters, observers=[table]):
        table.on_message(m, keep)
    table.notes.extend(notes(counters, capture_name(path)))
    return table
