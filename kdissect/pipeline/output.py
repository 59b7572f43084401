"""Ordered output: messages leave in capture order, and a request waiting for its response holds
back the output behind it, up to HOLD_MESSAGES messages or HOLD_SECONDS of capture time, or
until its conversation closes (`hold=False`: every message leaves at once). HeldBytes bounds the
decompressed bytes of what is held.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable

from kdissect.diagnostics import TRANSPORT
from kdissect.model import SECRET, Field, Message, tree_secret_ranges
from kdissect.pipeline.counters import Counters
from kdissect.text import plural

HOLD_MESSAGES = 2_000  # requests waiting for their response hold back output at most this long
HOLD_SECONDS = 120.0  # ... or this much capture time
# Decompressed bytes (Message.inflated) that messages held back, and requests that may still
# wait for their response, keep in all: past this the oldest lose their decoded bodies.
HELD_BYTES = 256 * 1024 * 1024


class Output:
    """Numbers messages (`Counters.messages`) as they leave."""

    def __init__(self, hold: bool, held: HeldBytes, counters: Counters) -> None:
        self.hold = hold  # keep output in capture order with requests linked to responses
        self.held = held
        self.counters = counters
        self.queue: deque[Message] = deque()
        self.closed_streams: set[int] = set()  # closed conversations with messages queued
        self.now = 0.0  # capture time of the last TCP segment

    def add(self, msg: Message) -> None:
        """A decoded message, already linked to its request if it answers one."""
        if msg.peer is not None and msg.peer.number:
            self.held.discard(msg.peer)  # released already: now nothing holds it for its response
        self.queue.append(msg)
        if msg.inflated:
            self.held.add(msg)

    def stream_closed(self, stream: int) -> None:
        self.closed_streams.add(stream)

    def release(self, final: bool) -> list[Message]:
        """The messages that may leave now (all of them if final)."""
        queue = self.queue
        ready: list[Message] = []
        while queue:
            m = queue[0]
            waiting = self.hold and m.expects_response and m.match is None
            if waiting and not final and not self._expired(m):
                break
            ready.append(self._number(queue.popleft()))
        if (final or not queue) and self.closed_streams:
            self.closed_streams.clear()  # it concerns only messages held back
        return ready

    def _expired(self, m: Message) -> bool:
        return (len(self.queue) > HOLD_MESSAGES or m.stream in self.closed_streams
                or self.now - m.ts_end > HOLD_SECONDS)

    def _number(self, m: Message) -> Message:
        self.counters.messages += 1
        m.number = self.counters.messages
        if m.inflated and (m.kind != "request" or m.match is not None):
            self.held.discard(m)  # a request still unanswered may wait in its pending table
        return m


class HeldBytes:
    """The decompressed bytes (Message.inflated) of the messages the pipeline holds back and of
    the requests that may still wait in a pending-request table, oldest first. Past `limit` the
    oldest lose their decoded bodies (summary, facts and diagnostics stay). Messages are held
    weakly: one that nothing else keeps is forgotten."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._held: dict[int, tuple[weakref.ref[Message], int]] = {}

    def add(self, msg: Message) -> None:
        key = id(msg)
        self._held[key] = (weakref.ref(msg, self._forget(key)), msg.inflated)
        self.total += msg.inflated
        while self.total > self.limit and self._held:
            ref, size = self._held.pop(next(iter(self._held)))
            self.total -= size
            oldest = ref()
            if oldest is not None:
                drop_body(oldest, self.limit)

    def discard(self, msg: Message) -> None:
        self._pop(id(msg))

    def _pop(self, key: int) -> None:
        entry = self._held.pop(key, None)
        if entry is not None:
            self.total -= entry[1]

    def _forget(self, key: int) -> Callable[[weakref.ref[Message]], None]:
        return lambda _ref: self._pop(key)


def drop_body(m: Message, limit: int) -> None:
    """Empty the structures and byte values of m's tree, with a diagnostic: what held messages
    give up past the pipeline's budget. Redacted values stay (hex dumps mask their bytes)."""
    m.fields = [f if type(f) is Field and f.children is None and not isinstance(f.value, bytes) else _emptied(f)
                for f in m.fields]
    m.add(TRANSPORT("pipeline.body_dropped",
                    f"decoded body not kept: the messages held waiting for responses hold more than "
                    f"{limit} decompressed bytes (the summary stays)"))


def _emptied(f: Field) -> Field:
    label = f"{f.label or f.name} (not kept)"
    if f.children is None:
        return Field(f.name, None, f.offset, f.length, None, f.hint, None, label)
    secrets = [Field("redacted", f"<redacted {plural(n, 'byte')}>", at, n, None, SECRET)
               for at, n in tree_secret_ranges([f])]
    return Field(f.name, None, f.offset, f.length, secrets, f.hint, None, label)
