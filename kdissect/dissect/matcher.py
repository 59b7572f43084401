"""Matcher: pending requests of one conversation, keyed by the protocol's correlation key
(Kafka CorrelationId, ZooKeeper xid, RocketMQ opaque, Pulsar request_id ...). Bounded: when full,
the oldest pending request is dropped (it stays unmatched). The conversations of a capture also
share a Pool: past its bound, a conversation drops its own oldest request for each new one, so
that thousands of conversations full of unanswered requests hold no more than the pool's."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

# Pending requests of all of a capture's conversations together (a decoded request is a couple
# of KB): past it, each conversation keeps only what it holds already.
MAX_POOLED = 65_536


class Pool:
    """What the matchers of a capture's conversations hold together (a CaptureState object):
    `held` pending requests; `noted`, what dissectors remember of requests dropped from them
    (Kafka's API key and version by correlation id), against `limit` and `noted_limit`."""

    __slots__ = ("held", "limit", "noted", "noted_limit")

    def __init__(self, limit: int | None = None) -> None:
        self.held = 0
        self.limit = MAX_POOLED if limit is None else limit
        self.noted = 0
        self.noted_limit = 4 * self.limit


class Matcher(Generic[V]):
    __slots__ = ("_pending", "limit", "pool")

    def __init__(self, limit: int = 10000, pool: Pool | None = None) -> None:
        self._pending: OrderedDict[Hashable, V] = OrderedDict()
        self.limit = limit
        self.pool = pool if pool is not None else Pool()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, key: Hashable, value: V) -> V | None:
        """Remember a request; returns a request that was displaced (same key, the conversation's
        bound, or the pool's)."""
        pool = self.pool
        old = self._pending.pop(key, None)
        if old is not None:
            pool.held -= 1
        elif pool.held >= pool.limit and self._pending:
            _, old = self._pending.popitem(last=False)
            pool.held -= 1
        self._pending[key] = value
        pool.held += 1
        if len(self._pending) > self.limit:
            _, old = self._pending.popitem(last=False)
            pool.held -= 1
        return old

    def pop(self, key: Hashable) -> V | None:
        value = self._pending.pop(key, None)
        if value is not None:
            self.pool.held -= 1
        return value

    def clear(self) -> None:
        """Forget every pending request (the conversation ended)."""
        self.pool.held -= len(self._pending)
        self._pending.clear()

    def peek(self, key: Hashable) -> V | None:
        return self._pending.get(key)

    def oldest(self) -> V | None:
        for v in self._pending.values():
            return v
        return None
