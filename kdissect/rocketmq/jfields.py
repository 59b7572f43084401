"""Field trees from lenient-JSON nodes, and the snake_case names of wire keys."""

from __future__ import annotations

import re
from functools import lru_cache

from kdissect.model import Field, array, struct
from kdissect.rocketmq.ljson import JNode

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")

# Bound the work spent on one document: beyond this many nodes the rest stays as text.
MAX_NODES = 20000


# Keys up to this long have their names cached: a key is data, and the cache outlives messages.
MAX_CACHED_KEY = 64


def snake(key: str) -> str:
    """A field-name form of a wire key: "brokerAddrs" -> "broker_addrs", "MSG_REGION" ->
    "msg_region", "0" -> "0"."""
    return _snake_cached(key) if len(key) <= MAX_CACHED_KEY else _snake(key)


def _snake(key: str) -> str:
    s = _NON_WORD.sub("_", _CAMEL.sub("_", key)).strip("_").lower()
    return s or "_"


_snake_cached = lru_cache(maxsize=4096)(_snake)


def named(name: str, wire_key: str) -> tuple[str, str | None]:
    """(field name, label): the label keeps the wire key when the name differs from it."""
    n = snake(wire_key)
    return n, (None if n == wire_key else wire_key)


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def to_field(name: str, node: JNode, label: str | None = None, budget: _Budget | None = None) -> Field:
    """The Field tree of a JSON value: objects become structs, arrays arrays, scalars values."""
    b = budget if budget is not None else _Budget(MAX_NODES)
    b.left -= 1
    length = node.end - node.start
    if node.kind == "object" and b.left > 0:
        children = []
        for key, _, child in node.value:
            cname, clabel = named(key, key)
            children.append(to_field(cname, child, clabel, b))
        return struct(name, children, node.start, length, label)
    if node.kind == "array" and b.left > 0:
        return array(name, [to_field(name, c, None, b) for c in node.value], node.start, length)
    if node.kind in ("object", "array"):
        return Field(name, None, node.start, length, label=label)
    return Field(name, node.value, node.start, length, label=label)
