"""The TCP conversations of a capture: describe() of each conversation at its end (a pipeline
observer), plus what the decoded messages add (requests, responses, errors, first and last time).

With a display filter, message counts cover the matching messages only and conversations
without a match are left out.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Sequence
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


SETTLE_EVERY = 5_000  # ended conversations looked at again for those whose counts are final

# A stream whose counts are final, as it is kept until the rows are written: its numbers
# (packets, bytes to the server and to the client, messages; then of the matching messages:
# messages, requests, responses, errors, expected, bytes, first and last time) and its client,
# server and protocol ("" for none), NUL-separated. About 200 bytes where the row's dict and
# tally took 1.8 KB (0.71 GB for 400,000 conversations).
_FINAL = struct.Struct("<10q2d")


@dataclass(slots=True)
class StreamRow:
    """A stream's row, with the packets and bytes of its conversations whose counts are final
    (one that goes on after its end, new data after a RST or closed while active, is a second
    conversation of the same stream)."""

    row: dict[str, Any]
    packets: int = 0
    to_server: int = 0
    total: int = 0
    pending: int = 0  # its ended conversations whose counts are not final yet

    def settle(self, conv: Conversation[Decoding]) -> None:
        to_server = conv.bytes[0 if conv.names[0] == self.row["client"] else 1]
        self.packets += conv.packets
        self.to_server += to_server
        self.total += conv.bytes[0] + conv.bytes[1]
        self.pending -= 1


@dataclass(slots=True)
class ConversationTable:
    streams: dict[int, StreamRow] = field(default_factory=dict)
    # the ended conversations in which later packets may still count (the tracker remembers
    # them): read once their counts are final, so that a capture of a million conversations
    # does not keep a million Conversations
    unsettled: list[tuple[StreamRow, Conversation[Decoding]]] = field(default_factory=list)
    settle_at: int = SETTLE_EVERY
    tallies: dict[int, MessageTally] = field(default_factory=dict)
    # the streams whose counts are final, packed (_FINAL), and the TLS of those that had it
    final: dict[int, bytes] = field(default_factory=dict)
    final_tls: dict[int, dict[str, Any]] = field(default_factory=dict)
    unconfirmed: dict[int, int] = field(default_factory=dict)  # expected answers that are errors after all
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was seen when nothing was decoded (coverage.notes)
    classifier: ErrorClassifier = field(default_factory=ErrorClassifier)
    finished: bool = False

    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        d = describe(conv)
        stream = self.streams.get(conv.index)
        if stream is None and conv.index in self.final:
            stream = self._unpack(conv.index)
        if stream is None:
            stream = self.streams[conv.index] = StreamRow(d)
        else:
            row = stream.row
            row["messages"] += d["messages"]
            for key in ("protocol", "tls"):
                if row[key] is None:
                    row[key] = d[key]
        stream.pending += 1
        self.unsettled.append((stream, conv))
        if len(self.unsettled) >= self.settle_at:
            self._settle(False)

    def _settle(self, every: bool) -> None:
        """Count the conversations whose counts are final (`every`: all of them, the run is over),
        and pack the streams all of whose conversations are."""
        keep = []
        for stream, conv in self.unsettled:
            if every or conv.forgotten:
                stream.settle(conv)
                if not stream.pending:
                    self._pack(stream)
            else:
                keep.append((stream, conv))
        self.unsettled = keep
        # looked at again after half as many more as are kept: each is looked at a few times at most
        self.settle_at = len(keep) + max(SETTLE_EVERY, len(keep) // 2)

    def _pack(self, stream: StreamRow) -> None:
        row = stream.row
        index = row["stream"]
        del self.streams[index]
        t = self.tallies.pop(index, None) or MessageTally()
        if row["tls"] is not None:
            self.final_tls[index] = row["tls"]
        names = "\0".join((row["client"], row["server"], row["protocol"] or ""))
        self.final[index] = _FINAL.pack(
            stream.packets, stream.to_server, stream.total - stream.to_server, row["messages"], t.messages,
            t.requests, t.responses, t.errors, t.expected, t.bytes,
            t.first_ts if t.first_ts is not None else math.nan, t.last_ts) + names.encode()

    def _unpack(self, index: int) -> StreamRow:
        """A packed stream made a row again, for counts that come after all."""
        row = self._row(index, self.final.pop(index), self.final_tls.pop(index, None))
        stream = self.streams[index] = StreamRow(
            {k: row[k] for k in ("stream", "client", "server", "protocol", "packets", "bytes_to_server",
                                 "bytes_to_client", "messages", "tls")},
            row["packets"], row["bytes_to_server"], row["bytes_to_server"] + row["bytes_to_client"])
        if row["matched_messages"]:
            self.tallies[index] = MessageTally(row["matched_messages"], row["requests"], row["responses"],
                                               row["errors"], row["expected"], row["message_bytes"],
                                               row["first_ts"], row["last_ts"])
        return stream

    @staticmethod
    def _row(index: int, packed: bytes, tls: dict[str, Any] | None) -> dict[str, Any]:
        (packets, to_server, to_client, messages, matched, requests, responses, errors, expected, nbytes,
         first_ts, last_ts) = _FINAL.unpack_from(packed)
        client, server, protocol = packed[_FINAL.size:].decode().split("\0")
        return {"stream": index, "client": client, "server": server, "protocol": protocol or None,
                "packets": packets, "bytes_to_server": to_server, "bytes_to_client": to_client,
                "messages": messages, "tls": tls, "matched_messages": matched, "requests": requests,
                "responses": responses, "errors": errors, "expected": expected, "message_bytes": nbytes,
                "first_ts": first_ts if matched else None, "last_ts": last_ts}

    def on_message(self, m: Message, keep: Callable[[Message], bool] | None) -> None:
        if m.kind == "request":
            self.classifier.on_request(m)
        if keep is None or keep(m):
            err = error_of(m) if m.kind == "response" else None
            outcome = self.classifier.classify(m, err) if err else None
            if m.stream in self.final:
                self._unpack(m.stream)
            self.tallies.setdefault(m.stream, MessageTally()).add(m, outcome)

    def finish(self) -> None:
        """Once, after the run: every stream packed. Expected answers whose retry never came
        count as errors after all."""
        if self.finished:
            return
        self.finished = True
        for p in self.classifier.unconfirmed():
            self.unconfirmed[p.response.stream] = self.unconfirmed.get(p.response.stream, 0) + 1
        self._settle(True)
        for stream in list(self.streams.values()):  # made a row again by a late message
            self._pack(stream)

    def iter_rows(self, filtered: bool, empty: bool = False) -> Iterator[dict[str, Any]]:
        """One row per conversation, in stream order, made as they are read; without `empty`,
        those that carried no payload at all (a lone FIN or ACK after the connection closed) are
        left out."""
        self.finish()
        for index in sorted(self.final):
            d = self._row(index, self.final[index], self.final_tls.get(index))
            if (filtered and not d["matched_messages"]) or (not empty and not d["bytes_to_server"]
                                                            and not d["bytes_to_client"]):
                continue
            wrong = self.unconfirmed.get(index, 0)
            d["expected"] -= wrong
            d["errors"] += wrong
            first, last = d["first_ts"], d.pop("last_ts")
            d["duration_s"] = round(last - first, 6) if first is not None else None
            yield d

    def rows(self, filtered: bool, empty: bool = False) -> list[dict[str, Any]]:
        return list(self.iter_rows(filtered, empty))


def conversations(path: str | Sequence[str], registry: DissectorRegistry, opts: Options,
                  keep: Callable[[Message], bool] | None = None) -> ConversationTable:
    """Run the capture through the pipeline and tabulate its conversations."""
    table = ConversationTable()
    counters = Counters()
    for m in dissect_file(path, registry, opts, warnings=table.warnings, counters=counters, observers=[table]):
        table.on_message(m, keep)
    table.notes.extend(notes(counters, captures_name(path)))
    return table
