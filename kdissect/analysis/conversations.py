"""The TCP conversations of a capture: Conversation.describe() at each conversation's end, plus
what the decoded messages add (requests, responses, errors, first and last time).

With a display filter, message counts cover the matching messages only and conversations
without a match are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kdissect.analysis.coverage import notes
from kdissect.analysis.stats import error_of
from kdissect.capture.pcapfile import CaptureFile
from kdissect.dissect.base import Options
from kdissect.dissect.registry import DissectorRegistry
from kdissect.model import Message
from kdissect.pipeline import Pipeline
from kdissect.stream.flow import Conversation


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

    def on_end(self, conv: Conversation) -> None:
        self.ended.append(conv.describe())

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
    """Run the capture through a Pipeline and tabulate its conversations."""
    table = ConversationTable()
    pipe = Pipeline(registry, opts)
    pipe.capture = path
    pipe.on_conversation_end = table.on_end
    with CaptureFile(path) as cap:
        for frame in cap:
            for m in pipe.feed(frame):
                table.on_message(m, keep)
        for m in pipe.finish():
            table.on_message(m, keep)
        table.warnings.extend(cap.warnings)
        table.notes.extend(notes(pipe.counters, cap.name))
    return table
