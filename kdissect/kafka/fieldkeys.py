"""Kafka's field keys for `kdissect fields`: the header keys, then a walk over the generated
schema tables (every request and response field of every API, with the APIs that carry it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kdissect.dissect.keyinfo import KeyInfo
from kdissect.kafka.apis import APIS
from kdissect.kafka.schema_messages import REQUESTS, RESPONSES, FieldRow

HEADER = (
    ("length", "int32", "message size after the length prefix"),
    ("header.api_key", "int16", "API key (request)"),
    ("header.api_key_name", "string", "API name (request)"),
    ("header.api_version", "int16", "API version (request)"),
    ("header.correlation_id", "int32", "correlation id"),
    ("header.client_id", "string", "client id (request)"),
)
RECORDS_NOTE = "record batches; their keys: kdissect fields kafka --from CAPTURE"


def field_keys() -> list[KeyInfo]:
    keys: dict[str, KeyInfo] = {}
    for path, typ, desc in HEADER:
        keys[path] = KeyInfo("kafka." + path, typ, desc)
    for side, table in (("request", REQUESTS), ("response", RESPONSES)):
        for api_key, fields in sorted(table.items()):
            who = f"{APIS[api_key].name if api_key in APIS else api_key} {side}"
            for path, typ, enum in _walk_schema(fields, ""):
                note = RECORDS_NOTE if typ == "records" else ""
                keys.setdefault(path, KeyInfo("kafka." + path, typ, note)).use(who)
                if enum:
                    keys.setdefault(path + "_name", KeyInfo(f"kafka.{path}_name", "string", "error name")).use(who)
    return sorted(keys.values(), key=lambda k: k.key)


def _walk_schema(fields: Iterable[FieldRow], prefix: str) -> Iterator[tuple[str, str, bool]]:
    for f in fields:
        name, typ, flags, children = f.name, f.type, f.flags, f.children
        path = prefix + name
        yield path, typ, "E" in flags
        if children:
            yield from _walk_schema(children, path + ".")
