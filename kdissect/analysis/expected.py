"""Answers that look like errors or slow responses but are how a protocol works.

Two tables, as data (docs/stats.md lists them):

- EXPECTED_ERRORS: (protocol, operation, error name) -> why a healthy client gets that answer.
  Some hold only when the client acts on the answer: `Retry.LOWER_VERSION` (the client asks
  again, on the same conversation, at a lower version), `Retry.SAME_OP` (the client sends the
  same operation again on the same conversation). Until that request is seen the answer is
  provisional; one never confirmed (the conversation or the capture ends first) is an error.
- LONG_POLLS: (protocol, operation) -> the rule under which the response time is a wait the
  client asked for (the broker holds the request until data comes or a timeout) rather than
  service time.

`ErrorClassifier` applies the first table to a stream of messages; `is_long_poll` the second.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import Enum

from kdissect.model import Message


class Retry(Enum):
    NONE = "none"  # expected as it is
    SAME_OP = "same operation"  # expected when the same operation follows on the conversation
    LOWER_VERSION = "lower version"  # expected when the same operation follows at a lower version


@dataclass(frozen=True, slots=True)
class Expected:
    why: str
    retry: Retry = Retry.NONE


EXPECTED_ERRORS: dict[tuple[str, str, str], Expected] = {
    ("kafka", "ApiVersions", "UNSUPPORTED_VERSION"): Expected(
        "a client opens with its newest ApiVersions version; a broker that does not know it answers "
        "UNSUPPORTED_VERSION with its own version range, and the client asks again at a version the "
        "broker supports (KIP-511)", Retry.LOWER_VERSION),
    ("kafka", "JoinGroup", "MEMBER_ID_REQUIRED"): Expected(
        "a new member's first JoinGroup (v4+) is answered with a member id and MEMBER_ID_REQUIRED; "
        "the client joins again with that id (KIP-394)", Retry.SAME_OP),
    ("zookeeper", "exists", "NoNode"): Expected(
        "exists asks whether a node exists: NoNode is the answer \"no\" (and leaves a watch for the "
        "node's creation when one was asked)"),
    ("rocketmq", "PULL_MESSAGE", "PULL_NOT_FOUND"): Expected(
        "a pull on a queue holding no new message is answered PULL_NOT_FOUND (remark NO_MESSAGE_IN_QUEUE "
        "or OFFSET_OVERFLOW_ONE), usually after the broker held it (long polling); the consumer pulls again"),
}

# What a long-poll response carries when nothing came: no records (and no error), a success, or
# the error that a protocol uses for "nothing".
NO_RECORDS = "(no records)"
SUCCESS = "(success)"
LONG_POLL_SHARE = 0.9  # a bounded wait counts when the response time reaches this share of the bound


@dataclass(frozen=True, slots=True)
class LongPoll:
    wait_field: str | None  # dotted path of the request field bounding the wait (ms); None: no bound
    answer: str  # NO_RECORDS, SUCCESS or an error name
    why: str


LONG_POLLS: dict[tuple[str, str], LongPoll] = {
    ("kafka", "Fetch"): LongPoll(
        "max_wait_ms", NO_RECORDS,
        "the broker holds a Fetch until min_bytes are available or max_wait_ms pass; an empty answer "
        "after that time is the wait running out"),
    ("kafka", "JoinGroup"): LongPoll(
        None, SUCCESS,
        "the coordinator answers JoinGroup when the rebalance completes (every member rejoined, or "
        "group.initial.rebalance.delay.ms for a new group): its time is the rebalance's"),
    ("rocketmq", "PULL_MESSAGE"): LongPoll(
        "ext_fields.suspend_timeout_millis", "PULL_NOT_FOUND",
        "a pull with a suspend timeout is held by the broker until a message arrives or the "
        "timeout passes (checked every few seconds); PULL_NOT_FOUND after that time is the wait running out"),
}


def request_op(m: Message) -> str:
    """The operation a message belongs to: a response's is its request's."""
    facts = m.peer.info if m.kind == "response" and m.peer is not None else m.info
    return str(facts.get("op") or "(unknown)")


def _version(m: Message) -> int | None:
    v = m.info.get("version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(slots=True)
class Pending:
    """A provisional expected answer waiting for the client's retry: the response as `bare`
    keeps it (its facts, not its body)."""

    response: Message
    error: str
    retry: Retry
    version: int | None


class ErrorClassifier:
    """Sorts error answers into errors and expected answers, message by message.

    `classify(response, error)` says "expected" or "error"; an expected answer that needs a retry
    is held (at most `max_pending`; beyond that it is an error at once) until `on_request` sees the
    retry, which confirms it. `unconfirmed()` at the end gives back the held answers whose retry
    never came: the caller counts them as errors instead."""

    def __init__(self, max_pending: int = 10_000) -> None:
        self.max_pending = max_pending
        self.pending: dict[tuple[int, str], Pending] = {}
        self.failed: list[Pending] = []  # replaced by a second failure before any retry

    def classify(self, m: Message, error: str) -> str:
        op = request_op(m)
        exp = EXPECTED_ERRORS.get((m.protocol, op, error))
        if exp is None:
            return "error"
        if exp.retry is Retry.NONE:
            return "expected"
        if len(self.pending) + len(self.failed) >= self.max_pending:
            return "error"
        key = (m.stream, op)
        old = self.pending.get(key)
        if old is not None:  # the same operation failed again before a retry that confirms it
            self.failed.append(old)
        self.pending[key] = Pending(bare(m), error, exp.retry, _version(m.peer) if m.peer is not None else _version(m))
        return "expected"

    def on_request(self, m: Message) -> None:
        """A request that may be the retry confirming a held answer."""
        if not self.pending:
            return
        key = (m.stream, request_op(m))
        p = self.pending.get(key)
        if p is None:
            return
        if p.retry is Retry.LOWER_VERSION:
            v = _version(m)
            if v is None or p.version is None or v >= p.version:
                return
        del self.pending[key]

    def unconfirmed(self) -> list[Pending]:
        """The held answers no retry confirmed (the table is emptied)."""
        out = [*self.failed, *self.pending.values()]
        self.pending.clear()
        self.failed.clear()
        return out


def bare(m: Message) -> Message:
    """A copy of m, and of its request, without their decoded trees, bytes and diagnostics:
    what an answer held until the end of a capture is counted by (its stream, protocol, kind,
    frame, time and facts), without keeping its body alive. A held answer's tree may hold
    100,000 fields (a JoinGroup response listing as many members) and 10,000 answers are held."""
    out = copy.copy(m)
    out.fields, out.data, out.diagnostics, out.frames = [], b"", [], m.frames[:1]
    if m.peer is not None:
        peer = out.peer = copy.copy(m.peer)
        peer.fields, peer.data, peer.diagnostics, peer.frames, peer.peer = [], b"", [], m.peer.frames[:1], None
    return out


def _wait_ms(request: Message, path: str) -> float | None:
    head, _, rest = path.partition(".")
    for f in request.fields:
        if f.name == head:
            v = f.get(rest) if rest else f.value
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            return None
    return None


def is_long_poll(m: Message, rtt_ms: float, error: str | None, records: int) -> bool:
    """Whether a response's time is a wait the client asked for (LONG_POLLS): its answer is the
    rule's (no records and no error, a success, or the named error) and, when the request bounds the
    wait, the response time reaches LONG_POLL_SHARE of that bound (a bound of 0 asks for no wait)."""
    rule = LONG_POLLS.get((m.protocol, request_op(m)))
    if rule is None or m.peer is None:
        return False
    if rule.answer == NO_RECORDS:
        answered = error is None and records == 0
    elif rule.answer == SUCCESS:
        answered = error is None
    else:
        answered = error == rule.answer
    if not answered:
        return False
    if rule.wait_field is None:
        return True
    wait = _wait_ms(m.peer, rule.wait_field)
    return wait is not None and wait > 0 and rtt_ms >= LONG_POLL_SHARE * wait

