"""One-line summaries of requests and responses, driven by tables of ext-field keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kdissect.rocketmq.bodies import Body
from kdissect.rocketmq.tables import (
    ALL_SEND_CODES,
    PARTIAL_SUCCESS_CODES,
    PULL_CODES,
    PULL_STATUS_CODES,
    SUCCESS,
)
from kdissect.text import cut, plural, value_word

Spec = tuple[tuple[str, str], ...]

_SEND: Spec = (("topic", "topic"), ("queue", "queueId"))
_PULL: Spec = (("topic", "topic"), ("queue", "queueId"), ("offset", "queueOffset"))
_OFFSET: Spec = (("group", "consumerGroup"), ("topic", "topic"), ("queue", "queueId"))
_QUEUE: Spec = (("topic", "topic"), ("queue", "queueId"))

REQUEST_SPECS: dict[int, Spec] = {
    **{c: _SEND for c in ALL_SEND_CODES},
    **{c: _PULL for c in PULL_CODES},
    14: _OFFSET,
    15: _OFFSET + (("offset", "commitOffset"),),
    29: _QUEUE + (("timestamp", "timestamp"),),
    30: _QUEUE,
    31: _QUEUE,
    35: (("client", "clientID"), ("producer", "producerGroup"), ("consumer", "consumerGroup")),
    36: (("group", "group"), ("offset", "offset")),
    37: (("producer", "producerGroup"), ("msgId", "msgId")),
    38: (("group", "consumerGroup"),),
    40: (("group", "consumerGroup"),),
    105: (("topic", "topic"),),
}
DEFAULT_SPEC: Spec = (("topic", "topic"), ("group", "consumerGroup"), ("group", "producerGroup"), ("group", "group"))

# Responses: ext-field keys worth a glance, per request code.
_OFFSET_RESPONSE: Spec = (("offset", "offset"),)
RESPONSE_SPECS: dict[int, Spec] = {
    **{c: (("msgId", "msgId"), ("queue", "queueId"), ("offset", "queueOffset")) for c in ALL_SEND_CODES},
    **{c: (("next", "nextBeginOffset"),) for c in PULL_CODES},
    14: _OFFSET_RESPONSE,
    29: _OFFSET_RESPONSE,
    30: _OFFSET_RESPONSE,
    31: _OFFSET_RESPONSE,
}

# Property names shown in send summaries.
SEND_PROPERTIES = (("keys", "KEYS"), ("tags", "TAGS"))
# Characters of a remark a summary or diagnostic quotes (the field keeps it whole).
MAX_REMARK = 120
# ... and of a name (a topic, group, client id, property) a summary shows, cut with "…".
MAX_TEXT = 1024


def short(v: object) -> str:
    return cut(value_word(v), MAX_TEXT)


def _pairs(spec: Spec, ext: dict[str, Any]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for label, key in spec:
        v = ext.get(key)
        if v is None or v == "" or label in seen:
            continue
        seen.add(label)
        out.append(f"{label}={short(v)}")
    return out


def _json_str(body: Body, key: str) -> str | None:
    node = body.json.get(key) if body.json is not None else None
    return node.value if node is not None and isinstance(node.value, str) else None


def request_summary(name: str, code: int | None, ext: dict[str, Any], body: Body) -> str:
    parts = [name] + _pairs(REQUEST_SPECS.get(code, DEFAULT_SPEC) if code is not None else DEFAULT_SPEC, ext)
    props = ext.get("properties")
    if code in ALL_SEND_CODES and isinstance(props, dict):
        parts += [f"{label}={short(props[k])}" for label, k in SEND_PROPERTIES if props.get(k)]
    if body.messages is not None:
        parts.append(plural(len(body.messages), "message"))
    client = _json_str(body, "clientID")
    if client:
        parts.append(f"client={short(client)}")
    return " ".join(parts)


def answering(req: Mapping[str, Any] | None) -> list[str]:
    """`for OP topic=T`: the request a response answers (nothing when it was not captured)."""
    if req is None or not req.get("op"):
        return []
    topic = req.get("topic")
    return [f"for {req['op']}"] + ([f"topic={short(topic)}"] if topic not in (None, "") else [])


def response_summary(name: str, code: int | None, req_code: int | None, remark: str | None, ext: dict[str, Any],
                     body: Body, req: Mapping[str, Any] | None = None) -> str:
    """`req`: the facts (msg.info) of the request answered, if it was captured."""
    parts = [name] + answering(req)
    ok = code == SUCCESS or code in PARTIAL_SUCCESS_CODES or code in PULL_STATUS_CODES
    if body.messages is not None:
        parts.append(plural(len(body.messages), "message"))
    elif ok and req_code is not None:
        parts += _pairs(RESPONSE_SPECS.get(req_code, ()), ext)
    if remark and code != SUCCESS:
        parts.append(f"remark={remark!r}" if len(remark) <= MAX_REMARK else f"remark={remark[:MAX_REMARK - 3]!r}...")
    return " ".join(parts)
