"""Reading decoded trees: the few steps every analyzer takes (a top-level field, the elements of
an array, a child's value), none of which fails on a tree that broke part-way; and the small
helpers the analyzers share (typed values, a host's name, tables capped in size)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kdissect.analysis.throughput import short_name
from kdissect.model import ARRAY, Field, Message

K = TypeVar("K")
V = TypeVar("V")


def top(m: Message, name: str) -> Field | None:
    """The top-level field `name` of a message's tree."""
    for f in m.fields:
        if f.name == name:
            return f
    return None


def elements(node: Field | Message | None, name: str) -> Iterator[Field]:
    """The elements of the array `name` under `node` (a field, or a message's top level)."""
    arr = top(node, name) if isinstance(node, Message) else node.child(name) if node is not None else None
    if arr is not None and arr.hint == ARRAY:
        yield from arr.children or ()


def value(node: Field | Message | None, name: str) -> Any:
    """The value of the child `name` of `node` (a field, or a message's top level), or None."""
    f = top(node, name) if isinstance(node, Message) else node.child(name) if node is not None else None
    return None if f is None else f.value


def number(node: Field | Message | None, name: str) -> int | None:
    """value(), when it is an integer (not a bool)."""
    return integer(value(node, name))


def integer(v: Any) -> int | None:
    """`v` when it is an integer (not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def text(v: Any) -> str | None:
    """`v` when it is a string, as the tables keep it (short_name: its first 1,024 characters:
    a client or member id is data, up to 32 KB or more), else None."""
    return short_name(v) if isinstance(v, str) else None


def host_of(address: str) -> str:
    """The host part of "host:port" (an IPv6 host keeps its brackets)."""
    head, sep, _ = address.rpartition(":")
    return head if sep else address


def get_or_make(table: dict[K, V], key: K, make: Callable[[], V], cap: int) -> V | None:
    """table[key], made with make() while the table holds fewer than `cap` keys (else None)."""
    row = table.get(key)
    if row is None and len(table) < cap:
        row = table[key] = make()
    return row


def put(table: dict[K, V], key: K, val: V, cap: int) -> None:
    """table[key] = val, unless `key` is new and the table holds `cap` keys already."""
    if key in table or len(table) < cap:
        table[key] = val


def first(node: Field | Message | None, *names: str) -> Any:
    """The value of the first of `names` that `node` has."""
    for n in names:
        v = value(node, n)
        if v is not None:
            return v
    return None
