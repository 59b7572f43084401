"""Request/response matching for Pulsar, per conversation.

Either side may send requests (a broker pings too), so a message's kind comes from its command
type, not from its direction. Keys are distinct tuples per kind of match: ("req", request_id, awaited response type),
("send", producer_id, sequence_id, n), ("ack", consumer_id, request_id), ("connect",),
("auth",), ("ping", direction of the ping), ("scalable", session_id), ...
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from kdissect.model import Field, Message
from kdissect.pulsar.commands import ANSWER, ANSWER_TYPES, ROLES
from kdissect.pulsar.conversation import MAX_SEND_KEYS, PulsarConversation


def _request(msg: Message, state: PulsarConversation, key: Hashable) -> None:
    msg.kind = "request"
    msg.expects_response = True
    state.pending.add(key, msg)


def _response(msg: Message, state: PulsarConversation, key: Hashable) -> None:
    msg.kind = "response"
    msg.expects_response = False
    req = state.pending.pop(key)
    if req is not None:
        msg.peer = req


def _oneway(msg: Message, kind: str) -> None:
    msg.kind = kind
    msg.expects_response = False


def _connect(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _request(msg, state, ("connect",))


def _connected(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _response(msg, state, ("connect",))


def _auth_challenge(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    # During the handshake a challenge answers CONNECT (or the previous AUTH_RESPONSE); later,
    # a broker refreshing credentials asks on its own and waits for an AUTH_RESPONSE.
    if state.pending.peek(("connect",)) is not None:
        _response(msg, state, ("connect",))
    else:
        _request(msg, state, ("auth",))


def _auth_response(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    if state.pending.peek(("auth",)) is not None:
        _response(msg, state, ("auth",))
    else:
        _request(msg, state, ("connect",))  # the handshake goes on: CONNECTED or another challenge


def _ping(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _request(msg, state, ("ping", msg.to_server))


def _pong(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _response(msg, state, ("ping", not msg.to_server))


def _ack(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    rid = body.get("request_id") if body is not None else None
    if rid is None:
        _oneway(msg, "request")
        return
    msg.info["corr"] = rid
    _request(msg, state, ("ack", body.get("consumer_id") if body else None, rid))


def _ack_response(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    rid = body.get("request_id") if body is not None else None
    msg.info["corr"] = rid
    _response(msg, state, ("ack", body.get("consumer_id") if body else None, rid))



def _send_key(msg: Message, state: PulsarConversation, body: Field | None, answer: bool) -> tuple[Any, ...]:
    """("send", producer_id, sequence_id, n): the chunks of one message share a sequence id, so
    the n-th SEND with that id waits for the n-th receipt. A SEND whose id no other SEND waiting
    for its receipt has, and the receipt of such a SEND, are the 0th and keep no counter: only
    a second SEND while the first waits (the chunks of one message) starts one, so that SENDs
    never answered leave nothing behind them but their pending entries."""
    pid = body.get("producer_id") if body is not None else None
    seq = body.get("sequence_id") if body is not None else None
    msg.info["corr"] = f"{pid}:{seq}"
    counters = state.send_seq
    c = counters.get((pid, seq))
    if c is None:
        if answer or state.pending.peek(("send", pid, seq, 0)) is None:
            return ("send", pid, seq, 0)
        if len(counters) >= MAX_SEND_KEYS:
            counters.pop(next(iter(counters)))
        c = counters[(pid, seq)] = [1, 0]
    slot = 1 if answer else 0
    n = c[slot]
    c[slot] += 1
    if c[1] >= c[0]:
        counters.pop((pid, seq), None)
    return ("send", pid, seq, n)


def _send(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _request(msg, state, _send_key(msg, state, body, False))


def _send_answer(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    _response(msg, state, _send_key(msg, state, body, True))


def _error(msg: Message, state: PulsarConversation, body: Field | None) -> None:
    """ERROR may answer any request with a request_id, whatever response it waited for."""
    rid = body.get("request_id") if body is not None else None
    msg.info["corr"] = rid
    for answer in ANSWER_TYPES:
        if state.pending.peek(("req", rid, answer)) is not None:
            _response(msg, state, ("req", rid, answer))
            return
    _response(msg, state, ("req", rid, "SUCCESS"))


Special = Callable[[Message, PulsarConversation, "Field | None"], None]

SPECIAL: dict[str, Special] = {
    "CONNECT": _connect,
    "CONNECTED": _connected,
    "AUTH_CHALLENGE": _auth_challenge,
    "AUTH_RESPONSE": _auth_response,
    "PING": _ping,
    "PONG": _pong,
    "ACK": _ack,
    "ACK_RESPONSE": _ack_response,
    "ERROR": _error,
    "SEND": _send,
    "SEND_RECEIPT": _send_answer,
    "SEND_ERROR": _send_answer,
}


def _corr(values: list[Any]) -> Any:
    if len(values) == 1:
        return values[0]
    return ":".join(str(v) for v in values)


def apply(msg: Message, state: PulsarConversation, type_name: str, body: Field | None) -> None:
    """Set msg.kind, msg.expects_response and msg.peer for a command of type `type_name`."""
    special = SPECIAL.get(type_name)
    if special is not None:
        special(msg, state, body)
        return
    role = ROLES.get(type_name)
    if role is None:
        return  # unknown type: keep the defaults from the direction
    kind, name, fields = role
    values = [body.get(f) if body is not None else None for f in fields]
    key: tuple[Any, ...] = (name, *values)
    if name == "req":
        key += (type_name if kind == "response" else ANSWER.get(type_name, "SUCCESS"),)
    if fields:
        msg.info["corr"] = _corr(values)
    if kind == "request" or (kind == "close" and msg.to_server):
        _request(msg, state, key)
    elif kind == "response":
        _response(msg, state, key)
        not_ready = type_name == "PRODUCER_SUCCESS" and body is not None and body.get("producer_ready") is False
        if not_ready and msg.peer is not None:
            # not ready yet: a second PRODUCER_SUCCESS will answer the same request
            state.pending.add(key, msg.peer)
    elif kind == "update":
        if state.pending.peek(key) is not None:
            _response(msg, state, key)
        else:
            _oneway(msg, "event")
    elif kind == "oneway":
        _oneway(msg, "request")
    else:
        _oneway(msg, "event")
