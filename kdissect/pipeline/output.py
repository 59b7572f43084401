"""Ordered output: messages leave in capture order, and a request waiting for its response holds
back the output behind it, up to HOLD_MESSAGES messages, HOLD_BYTES of their PDUs or HOLD_SECONDS
of capture time, or until its conversation closes (`hold=False`: every message leaves at once).
HeldBytes bounds the bytes of what is held: its data, decoded fields and their bytes values
(`held_size`).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable

from kdissect import accel
from kdissect.diagnostics import TRANSPORT
from kdissect.model import SECRET, Field, Message, Row, struct, tree_secret_ranges
from kdissect.pipeline.counters import Counters
from kdissect.text import plural

HOLD_MESSAGES = 2_000  # requests waiting for their response hold back output at most this long
HOLD_SECONDS = 120.0  # ... or this much capture time
HOLD_BYTES = 256 * 1024 * 1024  # ... or messages of this many bytes (their PDUs)
# Bytes (held_size) that messages held back, and requests that may still wait for their
# response, keep in all: past this the oldest lose their decoded bodies.
HELD_BYTES = 256 * 1024 * 1024
# What a decoded field is counted as (the object, its value and its place in its list), and a
# Row's column value (its value and its place in the Row's tuple).
FIELD_BYTES = 128
COLUMN_BYTES = 64
# Releases (segments, most often) a message is held for before it counts: a request answered
# within them never does, unless it decompressed anything (it counts at once).
COUNT_AFTER = 16
KEPT_FIELDS = 64  # the fields at a message's root that it keeps when its body is dropped
# ... and the characters of its summary and of each text among its facts (msg.info), whose
# lists keep their first KEPT_FIELDS items: a name is data (a topic of a megabyte), and a
# request may name 100,000 topics.
KEPT_TEXT = 1024


class Output:
    """Numbers messages (`Counters.messages`) as they leave."""

    def __init__(self, hold: bool, held: HeldBytes, counters: Counters) -> None:
        self.hold = hold  # keep output in capture order with requests linked to responses
        self.held = held
        self.counters = counters
        self.queue: deque[Message] = deque()
        self.queued = 0  # the PDU bytes of the messages in the queue
        self.added = 0  # messages added since the last release (the end of the queue)
        # Counting (_count): the messages added at each of the last releases (COUNT_AFTER - 1 of
        # them) and their sum; how many at the front of the queue are counted; the requests that
        # left it unanswered, with the release that numbered them (weakly: one that no pending
        # table keeps needs no counting, and a segment may carry thousands that wait for nothing).
        self.recent: deque[int] = deque()
        self.recent_total = 0
        self.counted = 0
        self.left: deque[tuple[int, weakref.ref[Message]]] = deque()
        self.releases = 0
        self.closed_streams: set[int] = set()  # closed conversations with messages queued
        self.now = 0.0  # capture time of the last TCP segment

    def add(self, msg: Message) -> None:
        """A decoded message, already linked to its request if it answers one."""
        if msg.peer is not None and msg.peer.number:
            self.held.discard(msg.peer)  # released already: now nothing holds it for its response
        self.queue.append(msg)
        self.queued += len(msg.data)
        self.added += 1
        if msg.inflated:
            # Decompressed: its tree is not bounded by the bytes of the segments just decoded
            # (a kilobyte of gzip may hold 100,000 messages), so it counts at once.
            self.held.add(msg)

    def stream_closed(self, stream: int) -> None:
        closed = self.closed_streams
        closed.add(stream)
        if len(closed) > 2 * len(self.queue) + 64:
            # Only those with messages queued matter: the others are forgotten (conversations
            # that end one after another while a request waits would otherwise all be kept).
            self.closed_streams = closed & {m.stream for m in self.queue}

    def release(self, final: bool) -> list[Message]:
        """The messages that may leave now (all of them if final)."""
        queue = self.queue
        left = self.left
        if (len(queue) - self.recent_total - self.added > self.counted
                or left and self.releases - left[0][0] >= COUNT_AFTER):  # (_count has work)
            self._count()
        ready: list[Message] = []
        hold = self.hold and not final
        counters, held = self.counters, self.held
        while queue:
            m = queue[0]
            # a request waiting for its response holds back the rest, unless it has waited too
            # long (too many messages or bytes behind it, too much time, or its conversation closed)
            if hold and m.expects_response and m.match is None and not (
                    len(queue) > HOLD_MESSAGES or self.queued > HOLD_BYTES
                    or m.stream in self.closed_streams or self.now - m.ts_end > HOLD_SECONDS):
                break
            queue.popleft()  # it leaves, numbered
            self.queued -= len(m.data)
            if self.counted:
                self.counted -= 1
            counters.messages += 1
            m.number = counters.messages
            if m.kind == "request" and m.match is None:  # (_waits) it may wait in its pending table
                left.append((self.releases, weakref.ref(m)))
            else:
                held.discard(m)
            ready.append(m)
        self.releases += 1
        recent = self.recent
        recent.append(self.added)
        self.recent_total += self.added
        self.added = 0
        while len(recent) >= COUNT_AFTER:
            self.recent_total -= recent.popleft()
        if final:
            left.clear()
        if (final or not queue) and self.closed_streams:
            self.closed_streams.clear()  # it concerns only messages held back
        return ready

    def _count(self) -> None:
        """A message is counted once it is still held COUNT_AFTER releases after its decoding
        (in the queue: those at its front but the last releases' additions; or a request that
        left it unanswered and waits in its pending table, COUNT_AFTER releases after it left),
        so that one answered within a few segments, or leaving at once, never is: what is not
        counted is at most what the last COUNT_AFTER segments decoded. Counting comes before a
        release, so that what it drops is never a message about to leave."""
        queue = self.queue
        old = len(queue) - self.recent_total - self.added
        if old > self.counted:
            held = self.held
            for i in range(self.counted, old):
                held.add(queue[i])
            self.counted = old
        left = self.left
        while left and self.releases - left[0][0] >= COUNT_AFTER:
            m = left.popleft()[1]()
            if m is not None and _waits(m):
                self.held.add(m)


def _waits(m: Message) -> bool:
    """Whether m is a request still unanswered: it may wait in its conversation's pending table
    (one expecting no response too: a response may come all the same)."""
    return m.kind == "request" and m.match is None


def held_size(m: Message) -> int:
    """The bytes m keeps, about: its data, its decoded fields (a Row's columns are counted
    without building its fields) and their bytes values, each a copy of its slice of the data
    or of the decompressed data (a RocketMQ body, a Pulsar payload, a record's value; the
    decompressed buffers themselves are not kept)."""
    fields = columns = copied = 0
    stack: list[Field] = list(m.fields)
    while stack:
        f = stack.pop()
        fields += 1
        if type(f) is Row and not f.materialized:
            for v in f.values:
                if isinstance(v, Field):
                    stack.append(v)
                else:
                    columns += 1
                    if type(v) is bytes:
                        copied += len(v)
            continue
        v = f.value
        if type(v) is bytes:
            copied += len(v)
        if f.children:
            stack.extend(f.children)
    return len(m.data) + copied + fields * FIELD_BYTES + columns * COLUMN_BYTES


class HeldBytes:
    """The bytes (held_size) of the messages the pipeline holds back and of the requests that may
    still wait in a pending-request table (up to thousands a connection: an acks=0 producer's are
    never answered), oldest first. Past `limit` the oldest lose their decoded bodies (summary,
    facts and diagnostics stay), and those that have left the output their bytes too. Messages
    are held weakly: one that nothing else keeps is forgotten."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._held: dict[int, tuple[weakref.ref[Message], int]] = {}

    def add(self, msg: Message) -> None:
        key = id(msg)
        if key in self._held:
            return
        size = held_size(msg)
        self._held[key] = (weakref.ref(msg, self._forget(key)), size)
        self.total += size
        while self.total > self.limit and self._held:
            ref, size = self._held.pop(next(iter(self._held)))
            self.total -= size
            oldest = ref()
            if oldest is not None:
                drop_body(oldest, self.limit)
                if oldest.number:  # it has left the output: its bytes are shown no more
                    oldest.data = b""

    def discard(self, msg: Message) -> None:
        self._pop(id(msg))

    def _pop(self, key: int) -> None:
        entry = self._held.pop(key, None)
        if entry is not None:
            self.total -= entry[1]

    def _forget(self, key: int) -> Callable[[weakref.ref[Message]], None]:
        return lambda _ref: self._pop(key)


def drop_body(m: Message, limit: int) -> None:
    """Empty the structures and byte values of m's tree, and keep its first KEPT_FIELDS fields
    only (a message may have thousands at its root), its summary and the texts of its facts cut
    to KEPT_TEXT characters and their lists to KEPT_FIELDS items, with a diagnostic: what held
    messages give up past the pipeline's budget. Redacted values stay (hex dumps mask their
    bytes)."""
    m.inflated = 0  # its decompressed bytes go with its body
    fields, rest = m.fields[:KEPT_FIELDS], m.fields[KEPT_FIELDS:]
    m.fields = [f if type(f) is Field and f.children is None and not isinstance(f.value, bytes) else _emptied(f)
                for f in fields]
    if rest:
        m.fields.append(_emptied(struct("more", rest, label=f"{len(rest)} more fields")))
    m.summary = _cut(m.summary)
    info = m.info
    for key, value in info.items():
        if isinstance(value, list):
            info[key] = [_kept(v) for v in value[:KEPT_FIELDS]]
        else:
            info[key] = _kept(value)
    m.add(TRANSPORT("pipeline.body_dropped",
                    f"decoded body not kept: the messages held waiting for responses hold more than "
                    f"{limit} bytes of data and decoded fields (the summary stays, cut past {KEPT_TEXT} "
                    "characters)"))


def _cut(text: str) -> str:
    """text cut to KEPT_TEXT characters (a mark says so)."""
    return text if len(text) <= KEPT_TEXT else text[:KEPT_TEXT] + "…"


def _kept(value: object) -> object:
    """A text cut to KEPT_TEXT characters; any other value as it is."""
    return _cut(value) if isinstance(value, str) else value


def _emptied(f: Field) -> Field:
    label = f"{f.label or f.name} (not kept)"
    if f.children is None:
        return Field(f.name, None, f.offset, f.length, None, f.hint, None, label)
    secrets = [Field("redacted", f"<redacted {plural(n, 'byte')}>", at, n, None, SECRET)
               for at, n in tree_secret_ranges([f])]
    return Field(f.name, None, f.offset, f.length, secrets, f.hint, None, label)


accel.bind(globals(), "kdissect.pipeline._output", ("held_size",))
