"""Records (Kafka records, Pulsar messages, RocketMQ messages) found generically in a message's
Field tree (spark/_records.pyx is its compiled twin). Of the protocol packages only Kafka's
codec-id table is imported.

The rules, by field name and hint only:
- a record array is an ARRAY named in RECORD_ARRAYS; each STRUCT element is a record, unless it
  holds a record array itself (a Kafka batch, a compressed wrapper message): then its records;
- a message without record arrays is one record itself when its top level (or a struct below
  it) has a BYTES value field (VALUE_NAMES) and a topic is known (a Pulsar SEND or MESSAGE, a
  RocketMQ SEND_MESSAGE);
- topic and partition come from the record, else from the structs around the record array
  (Kafka's topic `name` and partition `index`), else from the message's `info`;
- the producer, sequence, compression and message-id facts come from the record, else from the
  structs around the record array (a Kafka batch, a Pulsar command and its metadata), the
  innermost first; the compression codec from the structs around first (a Kafka batch's
  attributes, not its records' own);
- the other columns are the nearest field with one of the names in the tables below.

COLUMNS is the one list of the record columns and their types; `record_values` gives one tuple
per record of values in that order, `extract` the same records as dicts keyed by those names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kdissect import accel
from kdissect.kafka.compression import CODECS as KAFKA_CODECS
from kdissect.model import ARRAY, BYTES, STRUCT, Field, Message
from kdissect.render.jsonout import text_or_hex
from kdissect.spark.sqltypes import Columns, map_of
from kdissect.spark.values import END_TIME_S, as_bigint, as_int

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
PRODUCER_ID = ("producer_id",)
PRODUCER_EPOCH = ("producer_epoch",)
BASE_SEQUENCE = ("base_sequence",)  # Kafka: -1 for a producer without idempotence
SEQUENCE = ("sequence_id",)  # a record's own sequence (Pulsar); else base_sequence + offset_delta
OFFSET_DELTA = ("offset_delta",)
CODEC_NAME = ("compression",)  # Pulsar's metadata: an enum, its name lowercased
CODEC_BITS = ("attributes",)  # Kafka batches and legacy messages: the low three bits
LEDGER_ID = ("ledger_id",)  # Pulsar's message id: ledger, entry, index in the batch
ENTRY_ID = ("entry_id",)
BATCH_INDEX = ("index",)  # only a record's own field, only in a record array (a Pulsar batch)
INFO_TOPIC = ("topic",)
INFO_PARTITION = ("partition", "queue_id")
INFO_PRODUCER = ("producer_id",)
SEARCH_DEPTH = 3  # how deep below a record (or a struct around it) its scalar fields are looked for
MAX_TIMESTAMP_MS = int(END_TIME_S) * 1000 - 1  # 9999-12-31T23:59:59.999Z, the last time Spark holds

COLUMNS: Columns = (
    ("index", "int"),  # position within the message
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp_ms", "bigint"),
    ("timestamp", "timestamp"),
    ("key", "binary"),
    ("key_text", "string"),
    ("value", "binary"),
    ("value_text", "string"),
    ("value_size", "int"),
    ("headers", map_of("binary")),
    ("producer_id", "bigint"),
    ("producer_epoch", "int"),
    ("base_sequence", "int"),
    ("sequence", "bigint"),
    ("compression", "string"),
    ("ledger_id", "bigint"),
    ("entry_id", "bigint"),
    ("batch_index", "int"),
)

NAMES = tuple(name for name, _ in COLUMNS)
KEY_AT, VALUE_AT = NAMES.index("key"), NAMES.index("value")

Record = dict[str, Any]
Values = tuple[Any, ...]  # a record's values in the order of COLUMNS


Levels = list[dict[str, Field]]


@dataclass(slots=True)
class _Where:
    """What a record's surroundings say: topic and partition, the fields of the structs around
    its record array (innermost first), the message's producer, whether it is an array element."""

    topic: Any = None
    partition: Any = None
    around: tuple[Levels, ...] = ()
    producer: Any = None
    in_array: bool = False


def extract(m: Message, max_bytes: int = 256) -> list[Record]:
    """The records m carries, in order: one dict per record, keyed by COLUMNS' names."""
    return [dict(zip(NAMES, r, strict=True)) for r in record_values(m, max_bytes)]


def record_values(m: Message, max_bytes: int = 256) -> list[Values]:
    """The records m carries, in order: one tuple per record, its values in COLUMNS' order."""
    where = _Where(_first(m.info, INFO_TOPIC), _first(m.info, INFO_PARTITION),
                   producer=_first(m.info, INFO_PRODUCER))
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
    wins), over those of the message's info; and those structs' fields."""
    topic, part, topic_id = where.topic, where.partition, None
    for f in chain:
        found = {c.name: c.value for c in f.children or ()
                 if c.name in _CONTEXT_NAMES and c.children is None and c.value is not None}
        if found:
            t, p, i = _first(found, TOPIC_NAMES), _first(found, PARTITION_NAMES), _first(found, TOPIC_ID_NAMES)
            topic = topic if t is None else t
            part = part if p is None else p
            topic_id = topic_id if i is None else i
    around = tuple(_levels(f) for f in reversed(chain))
    return _Where(topic if topic is not None else topic_id, part, around, where.producer, True)


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
    here: _Where | None = None
    for e in arr.children or ():
        if e.hint != STRUCT:
            continue
        if any(c.hint == ARRAY and c.name in RECORD_ARRAYS for c in e.children or ()):
            _walk(e, chain, where, out)  # a batch or a wrapper message: its records
        else:
            here = here or _where(chain, where)
            out.append((e, here))


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


def _fact_field(own: Levels, where: _Where, names: tuple[str, ...], around_first: bool = False) -> Field | None:
    """The record's own scalar field named one of `names`, else that of the nearest struct
    around its record array (around_first: the other way round)."""
    order = (*where.around, own) if around_first else (own, *where.around)
    for lv in order:
        hit = _nearest(lv, names)
        if hit is not None and hit.children is None and hit.value is not None:
            return hit
    return None


def _fact(own: Levels, where: _Where, names: tuple[str, ...], around_first: bool = False) -> Any:
    hit = _fact_field(own, where, names, around_first)
    return None if hit is None else hit.value


def _single_value(root: Field) -> Field | None:
    v = _nearest(_levels(root), VALUE_NAMES)
    return v if v is not None and v.hint == BYTES else None


def _record(index: int, f: Field, where: _Where, max_bytes: int) -> Values:
    lv = _levels(f)
    topic = _scalar(lv, RECORD_TOPIC)
    part = _scalar(lv, RECORD_PARTITION)
    value = _nearest(lv, VALUE_NAMES)
    raw = _binary(value.value if value is not None else None)
    key = _binary(_scalar(lv, KEY_NAMES))
    ms = _timestamp(lv)
    producer = _fact(lv, where, PRODUCER_ID)
    base = _sequence(_fact(lv, where, BASE_SEQUENCE))
    return (  # in COLUMNS' order
        index,
        _text(where.topic if topic is None else topic, max_bytes),
        as_int(where.partition if part is None else part),
        as_bigint(_scalar(lv, OFFSET_NAMES)),
        ms,
        None if ms is None or ms > MAX_TIMESTAMP_MS else ms * 1000,
        key,
        _utf8(key),
        raw,
        _utf8(raw),
        None if raw is None else len(raw),
        list(_headers(_nearest(lv, HEADER_NAMES), max_bytes).items()),
        as_bigint(where.producer if producer is None else producer),
        as_int(_fact(lv, where, PRODUCER_EPOCH)),
        base,
        _record_sequence(lv, base),
        _codec(lv, where),
        as_bigint(_fact(lv, where, LEDGER_ID)),
        as_bigint(_fact(lv, where, ENTRY_ID)),
        as_int(_scalar(lv[:1], BATCH_INDEX)) if where.in_array else None,
    )


def _timestamp(lv: Levels) -> int | None:
    """The first of TIME_NAMES that holds a time (Kafka's -1 and Pulsar's 0 mean none)."""
    for n in TIME_NAMES:
        v = as_bigint(_scalar(lv, (n,)))
        if v is not None and v > 0:
            return v
    return None


def _sequence(v: Any) -> int | None:
    """A sequence number, or None (Kafka's -1: no idempotent producer)."""
    n = as_int(v)
    return n if n is not None and n >= 0 else None


def _record_sequence(lv: Levels, base: int | None) -> int | None:
    own = as_bigint(_scalar(lv, SEQUENCE))
    if own is not None and own >= 0:
        return own
    delta = as_int(_scalar(lv, OFFSET_DELTA))
    return None if base is None or delta is None or delta < 0 else base + delta


def _codec(lv: Levels, where: _Where) -> str | None:
    """The compression codec's name: Pulsar's compression enum, or a Kafka batch's (or legacy
    message's) attributes' low three bits, the structs around the record first."""
    named = _fact_field(lv, where, CODEC_NAME, around_first=True)
    if named is not None and isinstance(named.display, str):
        return named.display.lower()
    bits = as_int(_fact(lv, where, CODEC_BITS, around_first=True))
    return None if bits is None else KAFKA_CODECS.get(bits & 0x07, f"codec{bits & 0x07}")


def _binary(v: Any) -> bytes | None:
    """The exact bytes of a value (text as UTF-8), or None."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    return None


def _utf8(b: bytes | None) -> str | None:
    """b as text when it is valid UTF-8."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _text(v: Any, max_bytes: int) -> str | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return text_or_hex(bytes(v), max_bytes)
    return v if isinstance(v, str) else str(v)


def _headers(f: Field | None, max_bytes: int) -> dict[str, bytes | None]:
    """Kafka headers / Pulsar properties (arrays of key+value structs) or RocketMQ
    properties (a struct of named values) as a map of exact bytes."""
    out: dict[str, bytes | None] = {}
    if f is None:
        return out
    if f.hint == ARRAY:
        for e in f.children or ():
            k = _text(e.get("key"), max_bytes)
            if k is not None:
                out[k] = _binary(e.get("value"))
    elif f.hint == STRUCT:
        for c in f.children or ():
            if c.children is None:
                out[c.name] = _binary(c.value if isinstance(c.value, (bytes, str)) else _text(c.value, 0))
    return out


accel.bind(globals(), "kdissect.spark._records", ("record_values",))
