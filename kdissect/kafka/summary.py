"""One-line summaries of Kafka bodies: what happened, at a glance.

Per-API summarisers for the busy APIs (Produce, Fetch, Metadata, ListOffsets, OffsetCommit,
groups); every other API gets the generic one (group, topics). The error name of the first
failure is appended by body.py.
"""

from __future__ import annotations

from collections.abc import Callable

from kdissect.kafka.ops import Ctx
from kdissect.model import Field
from kdissect.text import plural

Summariser = Callable[[list[Field], Ctx], str]
MAX_TOPICS = 5
ACKS = {-1: "all", 0: "0", 1: "1"}


def child(fields: list[Field] | None, name: str) -> Field | None:
    for f in fields or ():
        if f.name == name:
            return f
    return None


def value(fields: list[Field] | None, name: str) -> object:
    f = child(fields, name)
    return None if f is None else f.value


def elements(fields: list[Field] | None, name: str) -> list[Field]:
    f = child(fields, name)
    return f.children or [] if f is not None else []


def topic_label(t: Field) -> str:
    for key in ("name", "topic", "topic_name"):
        v = value(t.children, key)
        if isinstance(v, str):
            return v
    tid = value(t.children, "topic_id")
    return str(tid)[:8] if tid is not None else "?"


def _limit(items: list[str]) -> str:
    more = len(items) - MAX_TOPICS
    shown = ", ".join(items[:MAX_TOPICS])
    return shown + (f", +{more}" if more > 0 else "")


def record_stats(ctx: Ctx, part: Field, name: str = "records") -> dict[str, int]:
    rec = child(part.children, name)
    return ctx.records.get(id(rec), {}) if rec is not None else {}


def produce_request(fields: list[Field], ctx: Ctx) -> str:
    acks = value(fields, "acks")
    topics = []
    for t in elements(fields, "topic_data"):
        parts = []
        for p in elements(t.children, "partition_data"):
            stats = record_stats(ctx, p)
            n = stats.get("records")
            parts.append(f"{value(p.children, 'index')}" + ("" if n is None else f":{plural(n, 'record')}"))
        topics.append(f"{topic_label(t)}[{', '.join(parts)}]")
    return f"acks={ACKS.get(acks, acks) if isinstance(acks, int) else acks} {_limit(topics)}"


def partition_offsets(fields: list[Field], topics_key: str, parts_key: str, part: str, offset: str) -> str:
    """`topic[partition@offset, ...]` for each topic of a request or response."""
    topics = []
    for t in elements(fields, topics_key):
        parts = [f"{value(p.children, part)}@{value(p.children, offset)}" for p in elements(t.children, parts_key)]
        topics.append(f"{topic_label(t)}[{', '.join(parts)}]")
    return _limit(topics)


def produce_response(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, "responses", "partition_responses", "index", "base_offset")


def fetch_request(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, "topics", "partitions", "partition", "fetch_offset")


def fetch_response(fields: list[Field], ctx: Ctx) -> str:
    topics = []
    batches = records = 0
    for t in elements(fields, "responses"):
        parts = []
        for p in elements(t.children, "partitions"):
            parts.append(f"{value(p.children, 'partition_index')}")
            stats = record_stats(ctx, p)
            batches += stats.get("batches", 0)
            records += stats.get("records", 0)
            hw = value(p.children, "high_watermark")
        topics.append(f"{topic_label(t)}[{', '.join(parts)}]")
    out = _limit(topics)
    if len(topics) == 1 and len(parts) == 1:
        out += f" hw={hw}"
    if batches or records:
        out += f" {plural(batches, 'batch')} {plural(records, 'record')}"
    return out


def metadata_request(fields: list[Field], ctx: Ctx) -> str:
    topics = child(fields, "topics")
    if topics is None or topics.children is None or (ctx.version == 0 and not topics.children):
        return "topics=all"  # null (v1+) or empty (v0) asks for every topic
    return f"topics=[{_limit([topic_label(t) for t in topics.children])}]"


def metadata_response(fields: list[Field], ctx: Ctx) -> str:
    brokers = len(elements(fields, "brokers"))
    topics = [f"{topic_label(t)}({len(elements(t.children, 'partitions'))})" for t in elements(fields, "topics")]
    return f"{plural(brokers, 'broker')} topics=[{_limit(topics)}]"


def generic(fields: list[Field], ctx: Ctx) -> str:
    out = []
    if ctx.groups:
        out.append(f"group={ctx.groups[0]}")
    topics = list(dict.fromkeys(ctx.topics))
    if topics:
        out.append(f"topics=[{_limit(topics)}]")
    return " ".join(out)


def find_coordinator(fields: list[Field], ctx: Ctx) -> str:
    key = value(fields, "key")
    keys = [str(k.value) for k in elements(fields, "coordinator_keys")]
    return f"key={key}" if key is not None else f"keys=[{_limit(keys)}]"


def api_versions_response(fields: list[Field], ctx: Ctx) -> str:
    keys = child(fields, "api_keys")
    return "" if keys is None else f"{len(keys.children or [])} apis"


def join_group_request(fields: list[Field], ctx: Ctx) -> str:
    names = [str(value(p.children, "name")) for p in elements(fields, "protocols")]
    return f"group={value(fields, 'group_id')} protocols=[{_limit(names)}]"


def join_group_response(fields: list[Field], ctx: Ctx) -> str:
    out = f"generation={value(fields, 'generation_id')} leader={value(fields, 'leader')}"
    members = child(fields, "members")
    if members is not None and members.children:
        out += f" {plural(len(members.children), 'member')}"
    return out


def offset_commit_request(fields: list[Field], ctx: Ctx) -> str:
    offsets = partition_offsets(fields, "topics", "partitions", "partition_index", "committed_offset")
    return f"group={value(fields, 'group_id')} {offsets}"


def list_offsets_request(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, "topics", "partitions", "partition_index", "timestamp")


def list_offsets_response(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, "topics", "partitions", "partition_index", "offset")


def find_coordinator_response(fields: list[Field], ctx: Ctx) -> str:
    nodes = [(value(fields, "node_id"), value(fields, "host"), value(fields, "port"))]
    if nodes[0][0] is None:
        nodes = [(value(c.children, "node_id"), value(c.children, "host"), value(c.children, "port"))
                 for c in elements(fields, "coordinators")]
    return _limit([f"node={n} {h}:{p}" for n, h, p in nodes])


SUMMARISERS: dict[tuple[int, bool], Summariser] = {
    (0, True): produce_request,
    (0, False): produce_response,
    (1, True): fetch_request,
    (1, False): fetch_response,
    (3, True): metadata_request,
    (3, False): metadata_response,
    (2, True): list_offsets_request,
    (2, False): list_offsets_response,
    (8, True): offset_commit_request,
    (10, True): find_coordinator,
    (10, False): find_coordinator_response,
    (11, True): join_group_request,
    (11, False): join_group_response,
    (18, False): api_versions_response,
}


def summarise(api_key: int, is_request: bool, fields: list[Field], ctx: Ctx) -> str:
    return SUMMARISERS.get((api_key, is_request), generic)(fields, ctx)
