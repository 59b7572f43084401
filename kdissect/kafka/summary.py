"""One-line summaries of Kafka bodies: what happened, at a glance.

Per-API summarisers for the busy APIs (Produce, Fetch, Metadata, ListOffsets, OffsetCommit,
groups); every other API gets the generic one (group, topics). The error name of the first
failure is appended by body.py.
"""

from __future__ import annotations

from collections.abc import Callable

from kdissect import accel
from kdissect.kafka.ops import Ctx
from kdissect.kafka.topicids import topic_ids
from kdissect.model import Field
from kdissect.text import cut, plural, value_word

Summariser = Callable[[list[Field], Ctx], str]
MAX_TOPICS = 5
# Characters of a name (a topic, client id, group, transactional id) a summary shows: Kafka's
# longest topic name; a longer name (any up to 32,767 on the wire) is cut, with "…".
MAX_NAME = 249
ACKS = {-1: "all", 0: "0", 1: "1"}


def child(fields: list[Field] | None, name: str) -> Field | None:
    for f in fields or ():
        if f.name == name:
            return f
    return None


def value(fields: list[Field] | None, name: str) -> object:
    f = child(fields, name)
    return None if f is None else f.value


def short(name: str) -> str:
    """A name as summaries write it: cut after MAX_NAME characters."""
    return cut(name, MAX_NAME)


def text(fields: list[Field] | None, name: str) -> str:
    """The value of a child as summaries write it (null, true, false; never None; cut as short
    cuts it)."""
    return short(value_word(value(fields, name)))


def elements(fields: list[Field] | None, name: str) -> list[Field]:
    f = child(fields, name)
    return f.children or [] if f is not None else []


def topic_label(t: Field, ctx: Ctx) -> str:
    """A topic's name; for a topic named by its id only, the name learned for that id earlier in
    the capture (topicids.py), else the id's first 8 hex digits."""
    for key in ("name", "topic", "topic_name"):
        v = value(t.children, key)
        if isinstance(v, str):
            return short(v)
    tid = value(t.children, "topic_id")
    if tid is None:
        return "?"
    ids = topic_ids(ctx)
    known = ids.name(tid) if ids is not None else None
    return short(known) if known is not None else str(tid)[:8]


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
            parts.append(f"{text(p.children, 'index')}" + ("" if n is None else f":{plural(n, 'record')}"))
        topics.append(f"{topic_label(t, ctx)}[{', '.join(parts)}]")
    return f"acks={ACKS.get(acks, acks) if isinstance(acks, int) else acks} {_limit(topics)}"


def partition_offsets(fields: list[Field], ctx: Ctx, topics_key: str, parts_key: str, part: str, offset: str) -> str:
    """`topic[partition@offset, ...]` for each topic of a request or response."""
    topics = []
    for t in elements(fields, topics_key):
        parts = [f"{text(p.children, part)}@{text(p.children, offset)}" for p in elements(t.children, parts_key)]
        topics.append(f"{topic_label(t, ctx)}[{', '.join(parts)}]")
    return _limit(topics)


def produce_response(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, ctx, "responses", "partition_responses", "index", "base_offset")


def fetch_request(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, ctx, "topics", "partitions", "partition", "fetch_offset")


def fetch_response(fields: list[Field], ctx: Ctx) -> str:
    topics = []
    batches = records = 0
    for t in elements(fields, "responses"):
        parts = []
        for p in elements(t.children, "partitions"):
            parts.append(f"{text(p.children, 'partition_index')}")
            stats = record_stats(ctx, p)
            batches += stats.get("batches", 0)
            records += stats.get("records", 0)
            hw = value(p.children, "high_watermark")
        topics.append(f"{topic_label(t, ctx)}[{', '.join(parts)}]")
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
    return f"topics=[{_limit([topic_label(t, ctx) for t in topics.children])}]"


def metadata_response(fields: list[Field], ctx: Ctx) -> str:
    brokers = len(elements(fields, "brokers"))
    topics = [f"{topic_label(t, ctx)}({len(elements(t.children, 'partitions'))})" for t in elements(fields, "topics")]
    return f"{plural(brokers, 'broker')} topics=[{_limit(topics)}]"


def generic(fields: list[Field], ctx: Ctx) -> str:
    out = []
    if ctx.groups:
        out.append(f"group={short(ctx.groups[0])}")
    topics = [short(t) for t in dict.fromkeys(ctx.topics)]
    if topics:
        out.append(f"topics=[{_limit(topics)}]")
    return " ".join(out)


def find_coordinator(fields: list[Field], ctx: Ctx) -> str:
    key = value(fields, "key")
    keys = [short(value_word(k.value)) for k in elements(fields, "coordinator_keys")]
    return f"key={short(value_word(key))}" if key is not None else f"keys=[{_limit(keys)}]"


def api_versions_response(fields: list[Field], ctx: Ctx) -> str:
    keys = child(fields, "api_keys")
    return "" if keys is None else f"{len(keys.children or [])} apis"


def join_group_request(fields: list[Field], ctx: Ctx) -> str:
    names = [text(p.children, "name") for p in elements(fields, "protocols")]
    return f"group={text(fields, 'group_id')} protocols=[{_limit(names)}]"


def join_group_response(fields: list[Field], ctx: Ctx) -> str:
    out = f"generation={text(fields, 'generation_id')} leader={text(fields, 'leader')}"
    members = child(fields, "members")
    if members is not None and members.children:
        out += f" {plural(len(members.children), 'member')}"
    return out


def offset_commit_request(fields: list[Field], ctx: Ctx) -> str:
    offsets = partition_offsets(fields, ctx, "topics", "partitions", "partition_index", "committed_offset")
    return f"group={text(fields, 'group_id')} {offsets}"


def list_offsets_request(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, ctx, "topics", "partitions", "partition_index", "timestamp")


def list_offsets_response(fields: list[Field], ctx: Ctx) -> str:
    return partition_offsets(fields, ctx, "topics", "partitions", "partition_index", "offset")


def find_coordinator_response(fields: list[Field], ctx: Ctx) -> str:
    nodes = [(value(fields, "node_id"), value(fields, "host"), value(fields, "port"))]
    if nodes[0][0] is None:
        nodes = [(value(c.children, "node_id"), value(c.children, "host"), value(c.children, "port"))
                 for c in elements(fields, "coordinators")]
    return _limit([f"node={n} {short(str(h))}:{p}" for n, h, p in nodes])


def _producer(fields: list[Field]) -> str:
    """`producer=ID epoch=N`, when the body carries a producer id."""
    pid = value(fields, "producer_id")
    return "" if pid is None else f"producer={pid} epoch={text(fields, 'producer_epoch')}"


def _words(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def init_producer_id_request(fields: list[Field], ctx: Ctx) -> str:
    """A transactional producer's id and transaction timeout; a null id is an idempotent
    producer (its timeout means nothing). v3+ name the producer being bumped (-1: none)."""
    txn = value(fields, "transactional_id")
    pid = value(fields, "producer_id")
    bump = _producer(fields) if isinstance(pid, int) and pid >= 0 else ""
    if txn is None:
        return _words("idempotent", bump)
    return _words(f"txn={short(value_word(txn))} timeout={text(fields, 'transaction_timeout_ms')}ms", bump)


def producer_response(fields: list[Field], ctx: Ctx) -> str:
    return _producer(fields)


def end_txn_request(fields: list[Field], ctx: Ctx) -> str:
    committed = value(fields, "committed")
    outcome = "COMMIT" if committed else "ABORT" if committed is not None else ""
    return _words(outcome, f"txn={text(fields, 'transactional_id')}", _producer(fields))


def sasl_handshake_request(fields: list[Field], ctx: Ctx) -> str:
    return f"mechanism={text(fields, 'mechanism')}"


def sasl_handshake_response(fields: list[Field], ctx: Ctx) -> str:
    """The mechanisms the broker enables, when it refused the one asked for."""
    if not ctx.errors:
        return ""
    return f"enabled=[{', '.join(value_word(m.value) for m in elements(fields, 'mechanisms'))}]"


# SASL steps whose token names the user (the field that holds it): never the secret.
SASL_USER = ("username", "authzid")


def _sasl_token(fields: list[Field]) -> str:
    """The mechanism, step and user of SaslAuthenticate's decoded auth_bytes (sasl.py)."""
    token = child(fields, "auth_bytes")
    kids = token.children if token is not None else None
    if not kids:
        return ""
    mech = value(kids, "mechanism")
    step = value(kids, "step")
    user = next((v for v in (value(kids, k) for k in SASL_USER) if isinstance(v, str) and v), None)
    return _words(str(mech or ""), "" if step in (None, "plain") else str(step),
                  f"user={short(user)}" if user is not None else "")


def sasl_authenticate_request(fields: list[Field], ctx: Ctx) -> str:
    return _sasl_token(fields)


def sasl_authenticate_response(fields: list[Field], ctx: Ctx) -> str:
    message = value(fields, "error_message")
    return _words(_sasl_token(fields), f"message={message!r}" if message else "")


# The compiled twins replace these functions before the table below takes them.
accel.bind(globals(), "kdissect.kafka._summary", (
    "child", "value", "text", "elements", "topic_label", "_limit", "produce_request", "partition_offsets"))

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
    (17, True): sasl_handshake_request,
    (17, False): sasl_handshake_response,
    (18, False): api_versions_response,
    (22, True): init_producer_id_request,
    (22, False): producer_response,
    (26, True): end_txn_request,
    (26, False): producer_response,
    (36, True): sasl_authenticate_request,
    (36, False): sasl_authenticate_response,
}


def summarise(api_key: int, is_request: bool, fields: list[Field], ctx: Ctx) -> str:
    return SUMMARISERS.get((api_key, is_request), generic)(fields, ctx)
