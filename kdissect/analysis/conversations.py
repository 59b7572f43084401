"""The TCP conversations of a capture: describe() of each conversation at its end (a pipeline
observer), plus what the decoded messages add (requests, responses, errors, first and last time).

With a display filter, message counts cover the matching messages only and conversations
without a match are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kdissect.analysis.coverage import notes
from kdissect.analysis.expected import ErrorClassifier
from kdissect.analysis.stats import error_of
from kdissect.capture.pcapfile import captures_name
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
    expected: int = 0  # error answers that are how the protocol works (analysis/expected.py)
    bytes: int = 0
    first_ts: float | None = None
    last_ts: float = 0.0

    def add(self, m: Message, outcome: str | None = None) -> None:
        """Count a message; `outcome` is an error answer's class ("error" or "expected")."""
        self.messages += 1
        self.bytes += len(m.data)
        self.requests += m.kind == "request"
        self.responses += m.kind == "response"
        self.errors += outcome == "error"
        self.expected += outcome == "expected"
        if self.first_ts is None:
            self.first_ts = m.ts
        self.last_ts = max(self.last_ts, m.ts)


SETTLE_EVERY = 50_000  # ended conversations looked at again for those whose counts are final


@dataclass(slots=True)
class StreamRow:
    """A stream's row, with the packets and bytes of its conversations whose counts are final
    (one that goes on after its end, new data after a RST or closed while active, is a second
    conversation of the same stream)."""

    row: dict[str, Any]
    packets: int = 0
    to_server: int = 0
    total: int = 0

    def settle(self, conv: Conversation[Decoding]) -> None:
        to_server = conv.bytes[0 if conv.names[0] == self.row["client"] else 1]
        self.packets += conv.packets
        self.to_server += to_server
        self.total += conv.bytes[0] + conv.bytes[1]


@dataclass(slots=True)
class ConversationTable:
    streams: dict[int, StreamRow] = field(default_factory=dict)
    # the ended conversations in which later packets may still count (the tracker remembers
    # them): read once their counts are final, so that a capture of a million conversations
    # does not keep a million Conversations
    unsettled: list[tuple[StreamRow, Conversation[Decoding]]] = field(default_factory=list)
    settle_at: int = SETTLE_EVERY
    tallies: dict[int, MessageTally] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was seen when nothing was decoded (coverage.notes)
    classifier: ErrorClassifier = field(default_factory=ErrorClassifier)

    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        d = describe(conv)
        stream = self.streams.get(conv.index)
        if stream is None:
            stream = self.streams[conv.index] = StreamRow(d)
        else:
            row = stream.row
            row["messages"] += d["messages"]
            for key in ("protocol", "tls"):
                if row[key] is None:
                    row[key] = d[key]
        self.unsettled.append((stream, conv))
        if len(self.unsettled) >= self.settle_at:
            self._settle(False)

    def _settle(self, every: bool) -> None:
        """Count the conversations whose counts are final (`every`: all of them, the run is over)."""
        keep = []
        for stream, conv in self.unsettled:
            if every or conv.forgotten:
                stream.settle(conv)
            else:
                keep.append((stream, conv))
        self.unsettled = keep
        self.settle_at = 2 * len(keep) + SETTLE_EVERY

    def on_message(self, m: Message, keep: Callable[[Message], bool] | None) -> None:
        if m.kind == "request":
            self.classifier.on_request(m)
        if keep is None or keep(m):
            err = error_of(m) if m.kind == "response" else None
            outcome = self.classifier.classify(m, err) if err else None
            self.tallies.setdefault(m.stream, MessageTally()).add(m, outcome)

    def settle(self) -> None:
        """Expected answers whose retry never came count as errors after all."""
        for p in self.classifier.unconfirmed():
            t = self.tallies[p.response.stream]
            t.expected -= 1
            t.errors += 1

    def rows(self, filtered: bool, empty: bool = False) -> list[dict[str, Any]]:
        """One row per conversation; without `empty`, those that carried no payload at all (a
        lone FIN or ACK after the connection closed) are left out."""
        self.settle()
        self._settle(True)
        out = []
        for s in self.streams.values():
            s.row.update(packets=s.packets, bytes_to_server=s.to_server, bytes_to_client=s.total - s.to_server)
        for d in sorted((s.row for s in self.streams.values()), key=lambda d: d["stream"]):
            t = self.tallies.get(d["stream"])
            if (filtered and t is None) or (not empty and not d["bytes_to_server"] and not d["bytes_to_client"]):
                continue
            t = t or MessageTally()
            row = dict(d)
            row.update(matched_messages=t.messages, requests=t.requests, responses=t.responses,
                       errors=t.errors, expected=t.expected, message_bytes=t.bytes, first_ts=t.first_ts,
                       duration_s=round(t.last_ts - t.first_ts, 6) if t.first_ts is not None else None)
            out.append(row)
        return out


def conversations(path: str | Sequence[str], registry: DissectorRegistry, opts: Options,
                  keep: Callable[[Message], bool] | None = None) -> ConversationTable:
    """Run the capture through the pipeline and tabulate its conversations."""
    table = ConversationTable()
    counters = Counters()
    for m in dissect_file(path, registry, opts, warnings=table.warnings, counters=counters, observers=[table]):
        table.on_message(m, keep)
    table.notes.extend(notes(counters, captures_name(path)))
    return table
