"""Kafka's field keys for `kdissect fields` and display filters: the header keys, then a walk
over the generated schema tables (every request and response field of every API, with the APIs
that carry it), the keys of the record batches below each `records` field, the info facts and
the fields built outside the schema; then Wireshark's Kafka field names (wireshark_names.py),
each an alias of the kdissect keys it means."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

from kdissect.dissect.keyinfo import KeyInfo
from kdissect.kafka.apis import APIS
from kdissect.kafka.error_codes import ERRORS
from kdissect.kafka.schema_messages import REQUESTS, RESPONSES, FieldRow
from kdissect.kafka.wireshark_names import WIRESHARK_NAMES

HEADER = (
    ("length", "int32", "message size after the length prefix"),
    ("header", "struct", "request or response header"),
    ("header.api_key", "int16", "API key (request)"),
    ("header.api_key_name", "string", "API name (request)"),
    ("header.api_version", "int16", "API version (request)"),
    ("header.correlation_id", "int32", "correlation id"),
    ("header.client_id", "string", "client id (request)"),
)
RECORDS_NOTE = "record batches (v2) or message sets (v0/v1); their keys follow"
# Below each `records` field: a batch's (or legacy message's) keys, then its records'.
RECORD_KEYS = (
    ("attributes", "int", "batch or message attributes (codec, timestamp type, flags)"),
    ("attributes_name", "string", "attributes as names"),
    ("base_offset", "int64", "batch base offset"), ("base_sequence", "int32", "batch base sequence"),
    ("base_timestamp", "int64", "batch first timestamp"), ("batch_length", "int32", "batch length"),
    ("compressed", "int", "compressed size of the batch or wrapper message"),
    ("crc", "uint32", "CRC"), ("key", "bytes", "message key (v0/v1)"),
    ("last_offset_delta", "int32", "batch last offset delta"), ("magic", "int8", "magic byte"),
    ("max_timestamp", "int64", "batch last timestamp"), ("message_size", "int32", "message size (v0/v1)"),
    ("offset", "int64", "message offset (v0/v1)"), ("partition_leader_epoch", "int32", "leader epoch"),
    ("producer_epoch", "int16", "producer epoch"), ("producer_id", "int64", "producer id"),
    ("records_count", "int32", "records in the batch"), ("timestamp", "int64", "message timestamp (v1)"),
    ("value", "bytes", "message value (v0/v1)"),
    ("records", "[]record", "the records of a batch, or the messages a wrapper message holds"),
    ("records.attributes", "int", "record attributes"), ("records.attributes_name", "string", "as names"),
    ("records.control", "struct", "control record (commit/abort marker)"),
    ("records.control.coordinator_epoch", "int32", "coordinator epoch"),
    ("records.control.type", "int16", "control type"), ("records.control.type_name", "string", "COMMIT, ABORT"),
    ("records.control.version", "int16", "control record version"),
    ("records.crc", "uint32", "inner message CRC (v0/v1)"), ("records.headers", "[]struct", "record headers"),
    ("records.headers.key", "string", "header key"), ("records.headers.value", "bytes", "header value"),
    ("records.key", "bytes", "record key"), ("records.length", "varint", "record length"),
    ("records.magic", "int8", "inner message magic (v0/v1)"),
    ("records.message_size", "int32", "inner message size (v0/v1)"),
    ("records.offset", "int64", "record offset"), ("records.offset_delta", "varint", "record offset delta"),
    ("records.relative_offset", "int64", "inner message relative offset (v1)"),
    ("records.timestamp", "int64", "record timestamp"),
    ("records.timestamp_delta", "varint", "record timestamp delta"), ("records.value", "bytes", "record value"),
)
# Facts in msg.info (a key names them where the message has no field of that name) and fields
# built outside the schema tables. A `bytes` field may be broken out further (consumer-protocol
# assignments and metadata, SASL tokens): any key below one is accepted.
EXTRA = (
    ("op", "info", "API name"), ("op_code", "info", "API key (requests and responses)"),
    ("version", "info", "API version (requests and responses)"), ("corr", "info", "correlation id"),
    ("client_id", "info", "client id (request)"), ("topic", "info", "first topic named"),
    ("topics", "info", "every topic named"), ("group", "info", "group id"),
    ("error_code", "info", "first error code of a response (0: none)"),
    ("error", "info", "first error name of a failed response"), ("acks", "info", "required acks (Produce)"),
    ("sasl_mechanism", "info", "SASL mechanism of a raw SASL token"),
    ("sasl_token", "bytes", "a raw SASL token (without a Kafka header)"),
    ("body", "bytes", "body not decoded (unknown API or version)"),
    ("undecoded", "bytes", "bytes after the point where decoding broke"),
    ("trailing", "bytes", "bytes after the body"), ("api_keys_raw", "bytes", "ApiVersions body not decoded"),
    ("*.unknown_fields", "bytes", "tagged fields the schema does not name, below any struct"),
    ("unknown_fields", "bytes", "tagged fields the schema does not name"),
)
# Schema fields flagged E hold error codes; these keys hold API keys.
API_KEY_PATHS = ("header.api_key", "op_code", "api_keys.api_key")


def field_keys() -> list[KeyInfo]:
    """The table's keys and Wireshark's names; where a Wireshark name is also a key of the table,
    the name means what Wireshark means (its row says so)."""
    rows = {k.key: k for k in _table().values()}
    rows.update((a.key, a) for a in _alias_rows())
    return sorted(rows.values(), key=lambda k: k.key)


@functools.cache
def _table() -> dict[str, KeyInfo]:
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
                if typ == "records":
                    for sub, styp, sdesc in RECORD_KEYS:
                        keys.setdefault(f"{path}.{sub}", KeyInfo(f"kafka.{path}.{sub}", styp, sdesc)).use(who)
    for path, typ, desc in EXTRA:
        keys.setdefault(path, KeyInfo("kafka." + path, typ, desc))
    for name, (_desc, _kind, targets) in WIRESHARK_NAMES.items():
        for target in _resolve(targets, keys):
            if target in keys:
                k = keys[target]
                k.description = f"{k.description}; wireshark: {name}" if k.description else f"wireshark: {name}"
    return dict(sorted(keys.items()))


def _alias_rows() -> list[KeyInfo]:
    rows = []
    for name, (kind, targets) in aliases().items():
        desc, _, _ = WIRESHARK_NAMES[name]
        only = f" ({kind}s only)" if kind else ""
        shown = ", ".join(_shown(t) for t in targets[:4])
        more = f" (+{len(targets) - 4})" if len(targets) > 4 else ""
        rows.append(KeyInfo(name, "alias", f"Wireshark's {desc}{only}: {shown}{more}"))
    return rows


def _shown(target: str) -> str:
    if target.startswith("info:"):
        return f"kafka.{target[5:]} (info)"
    return target if target.startswith("kdissect.") else "kafka." + target


@functools.cache
def aliases() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Wireshark's Kafka field names: name -> (kind, targets), each target a key path below
    `kafka.` (the table's keys the name's patterns match), `info:<key>` or a `kdissect.` key. A
    name that is also a key of the tree (`kafka.host`) keeps kdissect's meaning; one that is an
    info fact (`kafka.error`, `kafka.client_id`) takes Wireshark's."""
    table = _table()
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name, (_desc, kind, targets) in WIRESHARK_NAMES.items():
        own = table.get(name[6:])
        if own is not None and own.type != "info":
            continue  # one of kdissect's tree keys: its path in the tree wins
        resolved = _resolve(targets, table)
        if resolved:
            out[name] = (kind, resolved)
    return out


def _resolve(targets: Iterable[str], table: dict[str, KeyInfo]) -> tuple[str, ...]:
    """`*.suffix` -> every table path that is the suffix or ends with `.suffix`; others as given."""
    out: list[str] = []
    for t in targets:
        if t.startswith("*."):
            suffix = t[2:]
            out += [p for p in table if "*" not in p and (p == suffix or p.endswith("." + suffix))]
        elif t.startswith(("info:", "kdissect.")) or t in table:
            out.append(t)
    return tuple(dict.fromkeys(out))


def value_names(path: str) -> tuple[str, ...] | None:
    """The symbolic names an ENUM key's values compare with (None: not an enum of the tables)."""
    if path in API_KEY_PATHS:
        return tuple(a.name for a in APIS.values())
    if path == "error_code" or path in _error_paths():
        return tuple(ERRORS.values())
    return None


@functools.cache
def _error_paths() -> frozenset[str]:
    return frozenset(p[:-5] for p in _table() if p.endswith("_name") and _table()[p].description == "error name")


def _walk_schema(fields: Iterable[FieldRow], prefix: str) -> Iterator[tuple[str, str, bool]]:
    for f in fields:
        name, typ, flags, children = f.name, f.type, f.flags, f.children
        path = prefix + name
        yield path, typ, "E" in flags
        if children:
            yield from _walk_schema(children, path + ".")
