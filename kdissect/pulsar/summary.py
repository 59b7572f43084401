"""One-line summaries and flat facts (msg.info) for Pulsar commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdissect.model import ARRAY, ENUM, STRUCT, Field, Message
from kdissect.pulsar.commands import BARE_FIELDS, ERROR_FIELDS, SUMMARY_FIELDS
from kdissect.pulsar.payload import PayloadFacts
from kdissect.text import cut, plural, value_word

# Characters of a name or text (a topic, producer, URL, error message) a summary shows: a longer
# one is cut, with "…"; the fields and the facts keep it whole.
MAX_TEXT = 1024


def short(text: object) -> str:
    return cut(str(text), MAX_TEXT)


def show(f: Field | None) -> str:
    """A compact text form of a field: enum symbol, message id "ledger:entry", list head."""
    if f is None:
        return ""
    if f.hint == ARRAY:
        items = f.children or []
        head = show(items[0]) if items else "[]"
        return head + (f" (+{len(items) - 1})" if len(items) > 1 else "")
    if f.hint == STRUCT:
        if f.child("ledger_id") is not None:
            return message_id(f)
        # cut as a name is: a message id may nest its first chunk's id, three a level, 24 levels
        return short("{" + ", ".join(f"{c.name}={show(c)}" for c in (f.children or [])[:3]) + "}")
    if f.hint == ENUM and f.display:
        return f.display
    if isinstance(f.value, bytes):
        return f"<{plural(len(f.value), 'byte')}>"
    return short(value_word(f.value))


def message_id(f: Field) -> str:
    parts = [value_word(f.get("ledger_id")), value_word(f.get("entry_id"))]
    for extra in ("partition", "batch_index"):
        v = f.get(extra)
        if isinstance(v, int) and v >= 0:
            parts.append(f"{extra}={v}")
    return ":".join(parts[:2]) + "".join(f" {p}" for p in parts[2:])


def _find(body: Field | None, path: str) -> Field | None:
    node = body
    for part in path.split("."):
        node = node.child(part) if node is not None else None
    return node


def generic(type_name: str, body: Field | None, msg: Message) -> str:
    words = [type_name]
    for path in SUMMARY_FIELDS.get(type_name, ()):
        f = _find(body, path)
        if f is None:
            continue
        words.append(show(f) if path in BARE_FIELDS else f"{f.name}={show(f)}")
    return " ".join(words)


def _payload_words(facts: PayloadFacts | None) -> str:
    if facts is None:
        return ""
    n = facts.messages
    words = " " + plural(n, "message")
    tags = []
    if facts.compression != "NONE":
        tags.append(facts.compression.lower())
    if facts.encryption_keys:
        tags.append("encrypted")
    if facts.chunk:
        tags.append(facts.chunk)
    if facts.null_value:
        tags.append("null value")
    return words + (f" ({', '.join(tags)})" if tags else "")


def _send(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("send")
    head = f"SEND producer={b.get('producer_id')} seq={b.get('sequence_id')}"
    return head + _payload_words(facts) + _topic(msg)


def _message(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("message")
    mid = b.child("message_id")
    head = f"MESSAGE consumer={b.get('consumer_id')}" + (f" id={message_id(mid)}" if mid else "")
    redelivered = b.get("redelivery_count")
    if isinstance(redelivered, int) and redelivered > 0:
        head += f" redelivery={redelivered}"
    return head + _payload_words(facts) + _topic(msg)


def _connect(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("connect")
    out = f"CONNECT client={short(b.get('client_version'))} protocol={b.get('protocol_version') or 0}"
    method = b.get("auth_method_name")
    return out + (f" auth={short(method)}" if method else "")


def _connected(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("connected")
    out = f"CONNECTED server={short(b.get('server_version'))} protocol={b.get('protocol_version') or 0}"
    size = b.get("max_message_size")
    return out + (f" max_message_size={size}" if size is not None else "")


def _lookup_response(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("lookup_topic_response")
    kind = show(b.child("response"))
    out = "LOOKUP " + short(_req_info(msg, "topic") or "?")
    url = b.get("broker_service_url") or b.get("broker_service_url_tls")
    if url:
        out += f" → broker {short(url)}"
    if kind and kind != "Connect":
        out += f" ({kind})"
    return out


def _partitions(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    b = body or Field("partition_metadata_response")
    out = "PARTITIONED_METADATA " + short(_req_info(msg, "topic") or "?")
    n = b.get("partitions")
    return out + (f" → {n} partitions" if n is not None else "")


def _plain_response(type_name: str) -> Callable[[Field | None, Message, PayloadFacts | None], str]:
    def summary(body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
        out = generic(type_name, body, msg)
        if msg.peer is not None:
            req = msg.peer.info
            out += f" for {req.get('op')}" + (f" {short(req['topic'])}" if req.get("topic") else "")
        return out

    return summary


Summarizer = Callable[[Field | None, Message, PayloadFacts | None], str]

SPECIAL: dict[str, Summarizer] = {
    "SEND": _send,
    "MESSAGE": _message,
    "CONNECT": _connect,
    "CONNECTED": _connected,
    "LOOKUP_RESPONSE": _lookup_response,
    "PARTITIONED_METADATA_RESPONSE": _partitions,
    "SUCCESS": _plain_response("SUCCESS"),
    "ERROR": _plain_response("ERROR"),
    "PRODUCER_SUCCESS": _plain_response("PRODUCER_SUCCESS"),
}


def _req_info(msg: Message, key: str) -> Any:
    return msg.peer.info.get(key) if msg.peer is not None else None


def _topic(msg: Message) -> str:
    t = msg.info.get("topic")
    return f" {short(t)}" if t else ""


def summarize(type_name: str, body: Field | None, msg: Message, facts: PayloadFacts | None) -> str:
    fn = SPECIAL.get(type_name)
    out = fn(body, msg, facts) if fn is not None else generic(type_name, body, msg)
    if fn is None and BARE_FIELDS.isdisjoint(SUMMARY_FIELDS.get(type_name, ())) and msg.info.get("topic"):
        out += _topic(msg)
    if msg.info.get("error"):
        text = msg.info.get("error_message")
        out += f" error={msg.info['error']}" + (f": {short(text)}" if text else "")
    return out


def error_of(body: Field | None) -> tuple[int | None, str | None, str | None]:
    """(code, name, text) of the error a command carries, or Nones."""
    if body is None:
        return None, None, None
    for code_name, text_name in ERROR_FIELDS:
        f = body.child(code_name)
        if f is not None and f.hint == ENUM and isinstance(f.value, int):
            text = body.get(text_name)
            return f.value, f.display, text if isinstance(text, str) else None
    return None, None, None
