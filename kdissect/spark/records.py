"""Records (Kafka records, Pulsar messages, RocketMQ messages) found generically in a message's
Field tree. Pure Python; no protocol package is imported.

The rules, by field name and hint only:
- a record array is an ARRAY named in RECORD_ARRAYS; each STRUCT element is a record, unless it
  holds a record array itself (a Kafka batch, a compressed wrapper message): then its records;
- a message without record arrays is one record itself when its top level (or a struct below
  it) has a BYTES value field (VALUE_NAMES) and a topic is known (a Pulsar SEND or MESSAGE, a
  RocketMQ SEND_MESSAGE);
- topic and partition come from the record, else from the structs around the record array
  (Kafka's topic `name` and partition `index`), else from the message's `info`;
- the other columns are the nearest field with one of the names in the tables below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kdissect.model import ARRAY, BYTES, STRUCT, Field, Message
from kdissect.render.jsonout import text_or_hex
from kdissect.spark.values import as_bigint, as_int

RECORD_ARRAYS = frozenset({"records", "messages"})
VALUE_NAMES = ("value", "payload", "body")
KEY_NAMES = ("key", "partition_key", "KEYS")  # KEYS: RocketMQ's message keys property
HEADER_NAMES = ("headers", "properties")
TOPIC_NAMES = ("topic", "topic_name", "name")  # in the structs around a record array
TOPIC_ID_NAMES = ("topic_id",)  # a topic known by id only (Kafka Fetch v13+): the last resort
PARTITION_NAMES = ("partition", "partition_index", "index", "queue_id", "partition_id")
RECORD_TOPIC = ("topic",)  # in a record itself ("name" or "index" would mean something else)
RECORD_PARTITION = ("partition", "queue_id")
OFFSET_NAMES = ("offset", "queue_offset")
TIME_NAMES = ("timestamp", "born_timestamp", "event_time", "publish_time", "store_timestamp")
INFO_TOPIC = ("topic",)
INFO_PARTITION = ("partition", "queue_id")
SEARCH_DEPTH = 3  # how deep below a record its scalar fields are looked for


@dataclass(slots=True)
class Record:
    index: int
    topic: str | None
    partition: int | None
    offset: int | None
    timestamp_ms: int | None
    key: str | None
    value_size: int | None
    headers: dict[str, str | None] = field(default_factory=dict)


@dataclass(slots=True)
class _Where:
    topic: Any = None
    partition: Any = None


def extract(m: Message, max_bytes: int = 256) -> list[Record]:
    """The records m carries, in order."""
    where = _Where(_first(m.info, INFO_TOPIC), _first(m.info, INFO_PARTITION))
    root = Field("", None, 0, len(m.data), m.fields, STRUCT)
    found: list[tuple[Field, _Where]] = []
    _walk(root, (), where, found)
    if not found and where.topic is not None and _single_value(root) is not None:
        found.append((root, where))
    return [_record(i, f, w, max_bytes) for i, (f, w) in enumerate(found)]


def _first(d: dict[str, Any], names: tuple[str, ...]) -> Any:
    for n in names:
        v = d.get(n)
        if v is not None:
            return v
    return None


_CONTEXT_NAMES = frozenset(TOPIC_NAMES + TOPIC_ID_NAMES + PARTITION_NAMES)


def _where(chain: tuple[Field, ...], where: _Where) -> _Where:
    """The topic and partition stated by the structs around a record array (the innermost
    wins), over those of the message's info."""
    topic, part, topic_id = where.topic, where.partition, None
    for f in chain:
        found = {c.name: c.value for c in f.children or ()
                 if c.name in _CONTEXT_NAMES and c.children is None and c.value is not None}
        if found:
            t, p, i = _first(found, TOPIC_NAMES), _first(found, PARTITION_NAMES), _first(found, TOPIC_ID_NAMES)
            topic = topic if t is None else t
            part = part if p is None else p
            topic_id = topic_id if i is None else i
    return _Where(topic if topic is not None else topic_id, part)


def _walk(f: Field, chain: tuple[Field, ...], where: _Where, out: list[tuple[Field, _Where]]) -> None:
    if f.hint == STRUCT:
        chain = (*chain, f)
    for c in f.children or ():
        if c.children:
            if c.hint == ARRAY and c.name in RECORD_ARRAYS:
                _records(c, chain, where, out)
            else:
                _walk(c, chain, where, out)


def _records(arr: Field, chain: tuple[Field, ...], where: _Where, out: list[tuple[Field, _Where]]) -> None:
    here = _where(chain, where)
    for e in arr.children or ():
        if e.hint != STRUCT:
            continue
        if any(c.hint == ARRAY and c.name in RECORD_ARRAYS for c in e.children or ()):
            _walk(e, chain, where, out)  # a batch or a wrapper message: its records
        else:
            out.append((e, here))


Levels = list[dict[str, Field]]


def _levels(f: Field) -> Levels:
    """The fields below f by depth (name -> first field of that name), through structs but
    not into arrays, SEARCH_DEPTH levels deep."""
    out: Levels = []
    level = [f]
    for _ in range(SEARCH_DEPTH):
        byname: dict[str, Field] = {}
        nxt: list[Field] = []
        for s in level:
            for c in s.children or ():
                byname.setdefault(c.name, c)
                if c.hint == STRUCT:
                    nxt.append(c)
        out.append(byname)
        if not nxt:
            break
        level = nxt
    return out


def _nearest(levels: Levels, names: tuple[str, ...]) -> Field | None:
    """The nearest field named one of `names` (earlier names first at equal depth)."""
    for byname in levels:
        for n in names:
            hit = byname.get(n)
            if hit is not None:
                return hit
    return None


def _scalar(levels: Levels, names: tuple[str, ...]) -> Any:
    hit = _nearest(levels, names)
    return None if hit is None or hit.children is not None else hit.value


def _single_value(root: Field) -> Field | None:
    v = _nearest(_levels(root), VALUE_NAMES)
    return v if v is not None and v.hint == BYTES else None


def _record(index: int, f: Field, where: _Where, max_bytes: int) -> Record:
    lv = _levels(f)
    topic = _scalar(lv, RECORD_TOPIC)
    part = _scalar(lv, RECORD_PARTITION)
    value = _nearest(lv, VALUE_NAMES)
    raw = value.value if value is not None else None
    return Record(
        index=index,
        topic=_text(where.topic if topic is None else topic, max_bytes),
        partition=as_int(where.partition if part is None else part),
        offset=as_bigint(_scalar(lv, OFFSET_NAMES)),
        timestamp_ms=_timestamp(lv),
        key=_text(_scalar(lv, KEY_NAMES), max_bytes),
        value_size=len(raw) if isinstance(raw, (bytes, bytearray, memoryview, str)) else None,
        headers=_headers(_nearest(lv, HEADER_NAMES), max_bytes),
    )


def _timestamp(lv: Levels) -> int | None:
    """The first of TIME_NAMES that holds a time (Kafka's -1 and Pulsar's 0 mean none)."""
    for n in TIME_NAMES:
        v = as_bigint(_scalar(lv, (n,)))
        if v is not None and v > 0:
            return v
    return None


def _text(v: Any, max_bytes: int) -> str | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return text_or_hex(bytes(v), max_bytes)
    return v if isinstance(v, str) else str(v)


def _headers(f: Field | None, max_bytes: int) -> dict[str, str | None]:
    """Kafka headers / Pulsar properties (arrays of key+value structs) or RocketMQ
    properties (a struct of named values) as a map."""
    out: dict[str, str | None] = {}
    if f is None:
        return out
    if f.hint == ARRAY:
        for e in f.children or ():
            k = _text(e.get("key"), max_bytes)
            if k is not None:
                out[k] = _text(e.get("value"), max_bytes)
    elif f.hint == STRUCT:
        for c in f.children or ():
            if c.children is None:
                out[c.name] = _text(c.value, max_bytes)
    return out
