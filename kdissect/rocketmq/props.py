"""Message properties: `name 0x01 value 0x02` repeated, as one string."""

from __future__ import annotations

from kdissect.dissect.base import MAX_ELEMENTS
from kdissect.model import Field, struct
from kdissect.rocketmq.tables import PROPERTY_NAME_SEP, PROPERTY_SEP


def split_properties(text: str) -> list[tuple[str, str]]:
    """[(name, value)] in order; an item without a 0x01 separator gets an empty value. At most
    MAX_ELEMENTS items are split off: the rest stays in the last one."""
    out: list[tuple[str, str]] = []
    for item in text.split(PROPERTY_SEP, MAX_ELEMENTS):
        if item:
            name, _, value = item.partition(PROPERTY_NAME_SEP)
            out.append((name, value))
    return out


def _field(items: list[tuple[str, str, int, int]], name: str, offset: int, length: int, label: str | None) -> Field:
    """Each property under its exact name: the names are data (user properties may be any
    string), so they are neither changed nor merged."""
    children = [Field(key, value, at, size) for key, value, at, size in items]
    return struct(name, children, offset, length, label)


def properties_from_text(text: str, name: str, offset: int, length: int, label: str | None = None) -> tuple[Field, dict[str, str]]:
    """Properties carried in a header string (every item points at the whole string)."""
    pairs = split_properties(text)
    f = _field([(k, v, offset, length) for k, v in pairs], name, offset, length, label)
    return f, dict(pairs)


def properties_from_bytes(buf: bytes, start: int, end: int, name: str = "properties") -> tuple[Field, dict[str, str]]:
    """Properties stored at buf[start:end]; every item gets its own offset."""
    items: list[tuple[str, str, int, int]] = []
    pos = start
    while pos < end and len(items) < MAX_ELEMENTS:
        nxt = buf.find(b"\x02", pos, end)
        stop = end if nxt < 0 else nxt
        if stop > pos:
            item = buf[pos:stop].decode("utf-8", "replace")
            key, _, value = item.partition(PROPERTY_NAME_SEP)
            items.append((key, value, pos, stop - pos))
        pos = stop + 1
    f = _field(items, name, start, end - start, None)
    return f, {k: v for k, v, _, _ in items}
