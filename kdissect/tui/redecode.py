"""Messages decoded again from the capture files, for a store that no longer holds them.

The pipeline runs over the capture once more restricted to a few conversations (its flow
filter, as Spark workers share a capture): the other conversations are tracked, not decoded, so
stream numbers stay those of the whole run, and a conversation is decoded from its start, which
a Kafka response needs (it is read with its request's API and version) and which TCP
reassembly needs. A re-decoded message is matched to its store index by its place in its
stream (the n-th message of stream s is the n-th both times), checked against its first frame.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from threading import Lock

from kdissect.capture.l2l4 import format_addr
from kdissect.diagnostics import Catalogue
from kdissect.dissect.base import Options
from kdissect.model import Group, Message, Pdu, Severity
from kdissect.pipeline import dissect_file
from kdissect.pipeline.detect import DissectorRegistry
from kdissect.pipeline.output import held_size
from kdissect.stream.flow import Endpoint
from kdissect.tui.columns import Columns

CACHE_MESSAGES = 4_096  # Messages the LRU holds at most
CACHE_BYTES = 256 * 1024 * 1024  # ... and their bytes (message_size) at most
MESSAGE_OVERHEAD = 1_024  # bytes a decoded Message takes beyond its data, roughly
TUI = Catalogue("tui", "The terminal user interface", (
    ("not_kept", Severity.NOTE, Group.COMMENT,
     "the message's decoded tree is no longer held and cannot be decoded again (a live capture keeps "
     "only its latest messages; a capture file that changed or vanished); the list row stays"),
))


def message_size(m: Message) -> int:
    """The bytes a decoded Message keeps, about: its data, its decompressed data and its decoded
    fields (output.held_size: a message of 300 KB may hold 100,000 fields, 30 MB), and itself."""
    return held_size(m) + MESSAGE_OVERHEAD


def conversation_messages(captures: Sequence[str], registry: DissectorRegistry, opts: Options,
                          cols: Columns, streams: Collection[int], last: int) -> Iterator[tuple[int, Message]]:
    """(store index, Message) of the messages of `streams`, decoded again from the captures,
    in output order, until every one of those streams has passed store index `last`."""
    wanted = {s: cols.stream_indices(s) for s in streams}
    names = {frozenset(e) for s in wanted if (e := cols.stream_endpoints(s)) is not None}
    seen = dict.fromkeys(wanted, 0)
    pending = {s for s, idx in wanted.items() if idx and idx[0] <= last}

    def accept(a: Endpoint, b: Endpoint) -> bool:
        return frozenset((format_addr(*a), format_addr(*b))) in names

    if not pending:
        return
    for m in dissect_file(list(captures), registry, opts, flow_filter=accept):
        indices = wanted.get(m.stream)
        if indices is None:
            continue  # another conversation between the same endpoints
        k = seen[m.stream]
        seen[m.stream] = k + 1
        if k < len(indices) and cols.frame[indices[k]] == m.frame:
            i = indices[k]
            m.number = i + 1
            yield i, m
        if k + 1 >= len(indices) or indices[k + 1] > last:
            pending.discard(m.stream)
            if not pending:
                return


def stub(cols: Columns, i: int, why: str) -> Message:
    """A Message holding what the list row knows (no tree, no bytes), for one that cannot be
    decoded again: `why` is its one diagnostic."""
    row = cols.row(i)
    pdu = Pdu(b"", [row.frame], row.ts, row.ts, row.kind == "request")
    m = Message(pdu, row.stream, row.src, row.dst, row.protocol)
    m.number, m.kind, m.summary = row.number, row.kind, row.summary
    m.add(TUI("not_kept", why))
    return m


class MessageCache:
    """A bounded LRU of decoded Messages by store index (count and bytes)."""

    def __init__(self, max_messages: int = CACHE_MESSAGES, max_bytes: int = CACHE_BYTES) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[int, tuple[Message, int]] = OrderedDict()  # index -> message, its size
        self._lock = Lock()

    def get(self, i: int) -> Message | None:
        with self._lock:
            item = self._items.get(i)
            if item is None:
                return None
            self._items.move_to_end(i)
            return item[0]

    def put(self, i: int, m: Message) -> None:
        with self._lock:
            old = self._items.pop(i, None)
            if old is not None:
                self.bytes -= old[1]
            size = message_size(m)
            self._items[i] = (m, size)
            self.bytes += size
            while len(self._items) > 1 and (len(self._items) > self.max_messages or self.bytes > self.max_bytes):
                _, (_, gone) = self._items.popitem(last=False)
                self.bytes -= gone

    def __contains__(self, i: int) -> bool:
        with self._lock:
            return i in self._items

    def __len__(self) -> int:
        return len(self._items)
