"""Record volumes in a decoded field tree: (topic, partition, records, bytes) per `records` field.

Kafka carries records in `records` fields inside topic and partition structs (Produce requests:
topic_data[].partition_data[].records; Fetch responses: responses[].partitions[].records). The
walk is generic over the tree: the nearest enclosing struct member named like a topic or a
partition supplies the coordinates. A `records` field holds batches (v2: `batch` with
`records_count`) or legacy `message`s (a compressed wrapper nests its own `records`).
Bytes are the wire size of the `records` field (compressed size when compressed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kdissect.model import ARRAY, RAW, STRUCT, Field

TOPIC_KEYS = ("name", "topic", "topic_name", "topic_id")  # first found wins, in this order
NAME_KEYS = ("name", "topic", "topic_name")
PARTITION_KEYS = ("index", "partition", "partition_index")
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# A name (topic, client id, path) is data: the tables that outlive messages (`stats`, the expert)
# and the topic names learned here keep this many of its characters (a mark says it was cut).
NAME_CHARS = 1024


def short_name(name: str) -> str:
    """A name as the tables keep it: cut to NAME_CHARS characters."""
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS] + "…"


@dataclass(frozen=True, slots=True)
class Volume:
    topic: str | None
    partition: int | None
    records: int
    bytes: int


def record_volumes(fields: list[Field], topic_names: dict[str, str] | None = None) -> Iterator[Volume]:
    """Volumes per `records` field. Newer Fetch versions name topics by id only: structs that
    carry both a name and a topic_id (Metadata responses) are collected into `topic_names`."""
    yield from _walk(fields, None, None, topic_names)


def _learn(named: dict[str, object], topic_names: dict[str, str]) -> None:
    tid = named.get("topic_id")
    name = next((v for k in NAME_KEYS if isinstance(v := named.get(k), str) and v), None)
    if isinstance(tid, str) and name is not None and tid != ZERO_UUID:
        topic_names[tid] = short_name(name)


def _coordinates(members: list[Field], topic: str | None, part: int | None,
                 topic_names: dict[str, str] | None) -> tuple[str | None, int | None]:
    named = {f.name: f.value for f in members if f.children is None}
    if topic_names is not None and "topic_id" in named:
        _learn(named, topic_names)
    for k in TOPIC_KEYS:
        v = named.get(k)
        if isinstance(v, str) and v:
            topic = v
            break
    for k in PARTITION_KEYS:
        v = named.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            part = v
            break
    return topic, part


def _walk(members: list[Field], topic: str | None, part: int | None,
          names: dict[str, str] | None) -> Iterator[Volume]:
    topic, part = _coordinates(members, topic, part, names)
    for f in members:
        if f.name == "records" and f.hint in (ARRAY, RAW):
            yield Volume(topic, part, count_records(f), max(f.length, 0))
        elif f.hint == STRUCT:
            yield from _walk(f.children or [], topic, part, names)
        elif f.hint == ARRAY:
            for e in f.children or ():
                if e.hint == STRUCT:
                    yield from _walk(e.children or [], topic, part, names)


def count_records(f: Field) -> int:
    """Records in a `records` field: batch headers' counts, legacy messages one each."""
    n = 0
    for b in f.children or ():
        if b.name == "batch":
            rc = b.child("records_count")
            if rc is not None and isinstance(rc.value, int) and rc.value >= 0:
                n += rc.value
            else:
                inner = b.child("records")
                n += len(inner.children or []) if inner is not None else 0
        elif b.name == "message":
            inner = b.child("records")
            n += count_records(inner) if inner is not None and inner.hint == ARRAY else 1
    return n
