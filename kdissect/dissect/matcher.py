"""Matcher: pending requests of one conversation, keyed by the protocol's correlation key
(Kafka CorrelationId, ZooKeeper xid, RocketMQ opaque, Pulsar request_id ...). Bounded: when full,
the oldest pending request is dropped (it stays unmatched)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Matcher(Generic[V]):
    __slots__ = ("_pending", "limit")

    def __init__(self, limit: int = 10000) -> None:
        self._pending: OrderedDict[Hashable, V] = OrderedDict()
        self.limit = limit

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, key: Hashable, value: V) -> V | None:
        """Remember a request; returns a request that was displaced (same key or overflow)."""
        old = self._pending.pop(key, None)
        self._pending[key] = value
        if len(self._pending) > self.limit:
            _, old = self._pending.popitem(last=False)
        return old

    def pop(self, key: Hashable) -> V | None:
        return self._pending.pop(key, None)

    def peek(self, key: Hashable) -> V | None:
        return self._pending.get(key)

    def oldest(self) -> V | None:
        for v in self._pending.values():
            return v
        return None
