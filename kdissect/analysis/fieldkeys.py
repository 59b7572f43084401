"""Which field keys exist (`kdissect fields`), like `tshark -G fields`.

Two sources: each protocol's tables (Dissector.field_keys(): Kafka walks its schema tables,
ZooKeeper its jute record layouts), and for any protocol the keys seen in a capture
(`observed_keys`), with type and an example; plus the protocol-independent `kdissect.` keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kdissect.dissect.keyinfo import KeyInfo
from kdissect.filter.keys import KDISSECT
from kdissect.model import ARRAY, ENUM, FLAGS, STRUCT, Field, Message

# Keys listed from a capture, at most: a protocol's keys number a few thousand, but some name what
# the capture names (Kafka's unknown tagged fields by their tag number, tag_N), and a capture of a few
# MB could make millions of them.
MAX_KEYS = 10_000


def common_keys() -> list[KeyInfo]:
    return [KeyInfo(f"kdissect.{k}", "any", desc) for k, (_get, desc) in KDISSECT.items()]


def observed_keys(messages: Iterable[Message], protocol: str | None,
                  limit: int = MAX_KEYS) -> tuple[list[KeyInfo], int]:
    """Every key seen in the decoded messages (of one protocol, or all), with a count and example:
    the first `limit` keys, and how many values had a key seen after those (not listed)."""
    seen: dict[str, KeyInfo] = {}
    unlisted = 0
    for m in messages:
        if protocol is not None and m.protocol != protocol:
            continue
        for path, f in _walk_tree(m.fields, ""):
            key = f"{m.protocol}.{path}"
            info = seen.get(key)
            if info is None and len(seen) < limit:
                info = seen[key] = KeyInfo(key, _type_of(f), example=_example(f))
            unlisted += _count(info)
            if f.hint in (ENUM, FLAGS) and f.display is not None:
                alt = seen.get(key + "_name")
                if alt is None and len(seen) < limit:
                    alt = seen[key + "_name"] = KeyInfo(key + "_name", "string", example=f.display)
                unlisted += _count(alt)
        for k, v in m.info.items():
            if v is not None and not any(f.name == k for f in m.fields):
                key = f"{m.protocol}.{k}"
                info = seen.get(key)
                if info is None and len(seen) < limit:
                    info = seen[key] = KeyInfo(key, "info:" + type(v).__name__, example=v)
                unlisted += _count(info)
    return sorted(seen.values(), key=lambda k: k.key), unlisted


def _count(info: KeyInfo | None) -> int:
    """Count a value of a listed key; 1 for one whose key is not listed."""
    if info is None:
        return 1
    info.count += 1
    return 0


def _walk_tree(fields: list[Field], prefix: str) -> Iterator[tuple[str, Field]]:
    for f in fields:
        path = prefix + f.name
        yield path, f
        if f.hint == ARRAY:
            for e in f.children or ():
                if e.children:
                    yield from _walk_tree(e.children, path + ".")
        elif f.children:
            yield from _walk_tree(f.children, path + ".")


def _type_of(f: Field) -> str:
    if f.hint in (STRUCT, ARRAY):
        return f.hint
    t = type(f.value).__name__ if f.value is not None else "null"
    return f"{t} ({f.hint})" if f.hint else t


def _example(f: Field) -> Any:
    if f.hint in (STRUCT, ARRAY):
        return None
    v = f.value
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v[:32]).hex()
    if isinstance(v, str) and len(v) > 60:
        return v[:60] + "…"
    return v
