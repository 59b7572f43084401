"""Which field keys exist (`kdissect fields`), like `tshark -G fields`.

Three sources, best first:
- a dissector that offers `field_keys()` -> iterable of (key, type, description);
- Kafka: a walk over the generated schema tables (every request and response field of every
  API, with the APIs that carry it) plus the header keys;
- ZooKeeper: a walk over the jute record layouts plus the header keys;
- any protocol: the keys seen in a capture (`observed_keys`), with type and an example.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kdissect.filter.keys import KDISSECT
from kdissect.model import ARRAY, ENUM, FLAGS, STRUCT, Field, Message

KAFKA_HEADER = (
    ("length", "int32", "message size after the length prefix"),
    ("header.api_key", "int16", "API key (request)"),
    ("header.api_key_name", "string", "API name (request)"),
    ("header.api_version", "int16", "API version (request)"),
    ("header.correlation_id", "int32", "correlation id"),
    ("header.client_id", "string", "client id (request)"),
)


RECORDS_NOTE = "record batches; their keys: kdissect fields kafka --from CAPTURE"


@dataclass(slots=True)
class KeyInfo:
    key: str
    type: str
    description: str = ""
    used_by: list[str] = field(default_factory=list)
    count: int = 0
    example: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "type": self.type}
        if self.description:
            out["description"] = self.description
        if self.used_by:
            out["used_by"] = self.used_by
        if self.count:
            out["count"] = self.count
            out["example"] = self.example
        return out


def common_keys() -> list[KeyInfo]:
    return [KeyInfo(f"kdissect.{k}", "any", desc) for k, (_get, desc) in KDISSECT.items()]


def kafka_keys() -> list[KeyInfo] | None:
    """Keys from the Kafka schema tables; None when the tables are not available."""
    try:
        from kdissect.kafka.apis import APIS
        from kdissect.kafka.schema_messages import REQUESTS, RESPONSES
    except ImportError:
        return None
    keys: dict[str, KeyInfo] = {}
    for path, typ, desc in KAFKA_HEADER:
        keys[path] = KeyInfo("kafka." + path, typ, desc)
    for side, table in (("request", REQUESTS), ("response", RESPONSES)):
        for api_key, fields in sorted(table.items()):
            name = APIS[api_key][0] if api_key in APIS else str(api_key)
            for path, typ, enum in _walk_schema(fields, ""):
                info = keys.setdefault(path, KeyInfo("kafka." + path, typ, RECORDS_NOTE if typ == "records" else ""))
                _use(info, f"{name} {side}")
                if enum:
                    _use(keys.setdefault(path + "_name", KeyInfo(f"kafka.{path}_name", "string",
                                                                  "error name")), f"{name} {side}")
    return sorted(keys.values(), key=lambda k: k.key)


ZK_HEADER = (
    ("length", "int32", "message size after the length prefix"),
    ("xid", "int", "request/reply id"),
    ("opcode", "int", "operation (request)"),
    ("opcode_name", "string", "operation name (request)"),
    ("zxid", "long", "transaction id (reply)"),
    ("err", "int", "error code (reply)"),
    ("err_name", "string", "error name (reply)"),
)
# Headers (the dissector renders them: ZK_HEADER) and StatPersisted (server-side only).
ZK_NOT_ROOTS = ("RequestHeader", "ReplyHeader", "MultiHeader", "StatPersisted")


def zookeeper_keys() -> list[KeyInfo] | None:
    """Keys from the jute record layouts: a message's record fields sit at the root after the
    header, nested records are structs, vectors arrays. Records used only inside others (Stat,
    ACL, Id) are not roots. Multi operations (ops, results) and four-letter words are built
    outside the tables: `--from` lists them."""
    try:
        from kdissect.zookeeper.annotate import for_field
        from kdissect.zookeeper.records_table import RECORDS
    except ImportError:
        return None
    nested = {t[7:-1] if t.startswith("vector<") else t for fields in RECORDS.values() for _, t in fields}
    keys: dict[str, KeyInfo] = {p: KeyInfo("zookeeper." + p, t, d) for p, t, d in ZK_HEADER}
    for record in RECORDS:
        if record in nested or record in ZK_NOT_ROOTS:
            continue
        for path, typ, named in _walk_jute(RECORDS, record, "", for_field, 0):
            _use(keys.setdefault(path, KeyInfo("zookeeper." + path, typ)), record)
            if named:
                _use(keys.setdefault(path + "_name", KeyInfo(f"zookeeper.{path}_name", "string", "name")), record)
    return sorted(keys.values(), key=lambda k: k.key)


def _walk_jute(records: dict[str, Any], record: str, prefix: str, for_field: Any,
               depth: int) -> Iterator[tuple[str, str, bool]]:
    for name, jtype in records[record]:
        path = prefix + name
        elem = jtype[7:-1] if jtype.startswith("vector<") else jtype
        yield path, jtype, _is_named(for_field(record, name))
        if elem in records and depth < 4:
            yield from _walk_jute(records, elem, path + ".", for_field, depth + 1)


def _is_named(annotator: Any) -> bool:
    """Whether an annotator makes the field an ENUM or FLAGS (it then has a _name key)."""
    if annotator is None:
        return False
    probe = Field("probe", 1)
    annotator(probe, False)
    return probe.hint in (ENUM, FLAGS)


def _use(info: KeyInfo, who: str) -> None:
    if who not in info.used_by:
        info.used_by.append(who)


def _walk_schema(fields: Iterable[tuple[Any, ...]], prefix: str) -> Iterator[tuple[str, str, bool]]:
    for f in fields:
        name, typ, flags, children = f[0], f[1], f[9], f[11]
        path = prefix + name
        yield path, typ, "E" in flags
        if children:
            yield from _walk_schema(children, path + ".")


def dissector_keys(d: Any) -> list[KeyInfo] | None:
    fn = getattr(d, "field_keys", None)
    if not callable(fn):
        return None
    return [KeyInfo(f"{d.name}.{k}" if not k.startswith(d.name + ".") else k, t, desc) for k, t, desc in fn()]


def observed_keys(messages: Iterable[Message], protocol: str | None) -> list[KeyInfo]:
    """Every key seen in the decoded messages (of one protocol, or all), with a count and example."""
    seen: dict[str, KeyInfo] = {}
    for m in messages:
        if protocol is not None and m.protocol != protocol:
            continue
        for path, f in _walk_tree(m.fields, ""):
            key = f"{m.protocol}.{path}"
            info = seen.get(key)
            if info is None:
                info = seen[key] = KeyInfo(key, _type_of(f), example=_example(f))
            info.count += 1
            if f.hint in (ENUM, FLAGS) and f.display is not None:
                alt = seen.setdefault(key + "_name", KeyInfo(key + "_name", "string", example=f.display))
                alt.count += 1
        for k, v in m.info.items():
            if v is not None and not any(f.name == k for f in m.fields):
                key = f"{m.protocol}.{k}"
                info = seen.setdefault(key, KeyInfo(key, "info:" + type(v).__name__, example=v))
                info.count += 1
    return sorted(seen.values(), key=lambda k: k.key)


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
