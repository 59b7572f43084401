"""The message list as compact columns: one entry per message in a few typed arrays, the
summaries in one UTF-8 blob compressed a block of BLOCK rows at a time, the endpoints once per
TCP stream. About 50 bytes a message with its summary, against a few kilobytes for a decoded
Message.

One thread appends (`add`), any thread reads: `count` is published after every column of a
message is written, and readers only touch entries below it.
"""

from __future__ import annotations

import zlib
from array import array
from dataclasses import dataclass

from kdissect.analysis.stats import error_of
from kdissect.model import Message, Severity
from kdissect.render.text import LOCK, rtt_text

SEVERITIES: tuple[str | None, ...] = (None, *(s.value for s in Severity))
SEVERITY_CODE = {s: i for i, s in enumerate(SEVERITIES)}
ERROR = 1  # flags: an error answer
REVERSED = 2  # flags: sent from the stream's second endpoint
MAX_SUMMARY = 2_000  # characters of a summary kept for the list
MAX_NAMES = 255  # distinct protocol and kind names (one byte each); later ones share the last
OTHER_NAME = "other"
BLOCK = 1_024  # rows whose summaries are compressed together
OPEN_BLOCKS = 8  # decompressed blocks kept for reading


@dataclass(frozen=True, slots=True)
class ListRow:
    """One line of the message list: what `kdissect read` prints, as columns."""

    index: int  # position in the store, 0-based, stable
    number: int  # the message number (kdissect.number: position in the output, 1-based)
    frame: int  # first frame
    ts: float  # capture time (epoch seconds)
    stream: int  # tcp.stream
    src: str  # "host:port"
    dst: str
    protocol: str  # kafka | zookeeper | pulsar | rocketmq
    kind: str  # request | response | event
    summary: str  # the summary text `read` prints: the lock of TLS, summary, response time
    severity: str | None  # worst diagnostic severity (chat/note/warning/error) or None
    error: bool  # an error answer (analysis.stats.error_of)
    peer: int | None  # store index of its matched request/response, when known


def summary_text(m: Message) -> str:
    """The summary column as `read` prints it after the protocol column."""
    text = f"{LOCK if m.tls is not None else ''}{m.summary}{rtt_text(m)}"
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


class Names:
    """Interned short names (protocols, kinds) as one-byte codes."""

    def __init__(self, *known: str) -> None:
        self.names: list[str] = list(known)
        self.codes = {n: i for i, n in enumerate(known)}

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            if len(self.names) >= MAX_NAMES:
                return self.code(OTHER_NAME) if OTHER_NAME in self.codes else len(self.names) - 1
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c


class Columns:
    """The list rows of every message added, by store index."""

    def __init__(self) -> None:
        self.count = 0
        self.frame = array("q")
        self.ts = array("d")
        self.slot = array("i")  # the stream's slot in the stream table
        self.proto = array("B")
        self.kind = array("B")
        self.severity = array("B")
        self.flags = array("B")
        self.peer = array("i")  # -1: none known
        self.next = array("i")  # the next index of the same stream, -1 at its end
        self.text_end = array("I")  # end of each summary in its block's text
        self.blocks: list[bytes] = []  # the summaries of each full block, compressed
        self.open: tuple[int, bytearray] = (0, bytearray())  # the block being filled, its text
        self._read: dict[int, bytes] = {}  # decompressed blocks, a few
        self.protocols = Names("kafka", "zookeeper", "pulsar", "rocketmq")
        self.kinds = Names("request", "response", "event")
        # The stream table: TCP stream index -> slot; per slot its index, endpoints, first and
        # last message. One slot per stream with messages: bounded by the message count.
        self.slots: dict[int, int] = {}
        self.stream_of = array("q")
        self.ends: list[tuple[str, str]] = []
        self.first = array("i")
        self.last = array("i")
        self.stream_count = array("i")
        self.frames_sorted = True  # first frames never decreased so far (then bisect finds one)

    def add(self, m: Message) -> int:
        """Append m (numbered by the pipeline: its number is count + 1 for a whole run)."""
        i = self.count
        slot = self._slot(m, i)
        if self.frame and m.frame < self.frame[-1]:
            self.frames_sorted = False
        self.frame.append(m.frame)
        self.ts.append(m.ts)
        self.slot.append(slot)
        self.proto.append(self.protocols.code(m.protocol))
        self.kind.append(self.kinds.code(m.kind))
        worst = m.worst
        self.severity.append(SEVERITY_CODE.get(worst.value if worst is not None else None, 0))
        flags = (ERROR if m.kind == "response" and error_of(m) is not None else 0)
        self.flags.append(flags | (REVERSED if m.src != self.ends[slot][0] else 0))
        self.peer.append(-1)
        self.next.append(-1)
        text = self.open[1]
        text.extend(summary_text(m).encode("utf-8", "replace"))
        self.text_end.append(len(text))
        self._link(m, i)
        self.count = i + 1
        if self.count % BLOCK == 0:
            self.blocks.append(zlib.compress(bytes(text), 1))
            self.open = (len(self.blocks), bytearray())  # readers holding the old text still read it
        return i

    def summary(self, i: int) -> str:
        b = i // BLOCK
        number, text = self.open
        data: bytes | bytearray
        if b == number:
            data = text
        else:
            found = self._read.get(b)
            if found is None:
                if len(self._read) >= OPEN_BLOCKS:
                    self._read.clear()
                found = self._read[b] = zlib.decompress(self.blocks[b])
            data = found
        start = self.text_end[i - 1] if i % BLOCK else 0
        return data[start : self.text_end[i]].decode("utf-8", "replace")

    def _slot(self, m: Message, i: int) -> int:
        slot = self.slots.get(m.stream)
        if slot is None:
            slot = self.slots[m.stream] = len(self.ends)
            self.stream_of.append(m.stream)
            self.ends.append((m.src, m.dst))
            self.first.append(i)
            self.last.append(i)
            self.stream_count.append(1)
            return slot
        self.next[self.last[slot]] = i
        self.last[slot] = i
        self.stream_count[slot] += 1
        return slot

    def _link(self, m: Message, i: int) -> None:
        """A response to a request already listed: each names the other as its peer."""
        req = m.peer
        if req is None or req.number <= 0:
            return
        j = req.number - 1
        if j < i and self.frame[j] == req.frame and self.slot[j] == self.slot[i]:
            self.peer[i] = j
            self.peer[j] = i

    def endpoints(self, i: int) -> tuple[str, str]:
        """(src, dst) of message i."""
        a, b = self.ends[self.slot[i]]
        return (b, a) if self.flags[i] & REVERSED else (a, b)

    def row(self, i: int) -> ListRow:
        slot = self.slot[i]
        flags = self.flags[i]
        src, dst = self.endpoints(i)
        peer = self.peer[i]
        return ListRow(i, i + 1, self.frame[i], self.ts[i], self.stream_of[slot], src, dst,
                       self.protocols.names[self.proto[i]], self.kinds.names[self.kind[i]],
                       self.summary(i),
                       SEVERITIES[self.severity[i]], bool(flags & ERROR), None if peer < 0 else peer)

    def stream_indices(self, stream: int) -> list[int]:
        """The store indices of a stream's messages, in order."""
        slot = self.slots.get(stream)
        if slot is None:
            return []
        out = []
        i = self.first[slot]
        end = self.count
        while 0 <= i < end:
            out.append(i)
            i = self.next[i]
        return out

    def stream_endpoints(self, stream: int) -> tuple[str, str] | None:
        slot = self.slots.get(stream)
        return None if slot is None else self.ends[slot]

    def stream(self, i: int) -> int:
        return self.stream_of[self.slot[i]]

    def nbytes(self) -> int:
        """The memory the columns take, roughly (arrays, text, stream table)."""
        arrays = (self.frame, self.ts, self.slot, self.proto, self.kind, self.severity, self.flags,
                  self.peer, self.next, self.text_end, self.stream_of, self.first, self.last, self.stream_count)
        ends = sum(len(a) + len(b) + 120 for a, b in self.ends)
        text = sum(len(b) + 40 for b in self.blocks) + len(self.open[1])
        return sum(a.buffer_info()[1] * a.itemsize for a in arrays) + text + ends + 100 * len(self.slots)
