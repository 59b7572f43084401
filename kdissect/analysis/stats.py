"""Streaming statistics over decoded messages (`kdissect stats`), memory bounded.

Per protocol, operation (msg.info["op"]) and version: requests, responses, events, errors by
name, expected answers by name, long polls and a response-time sketch (Wireshark's Service
Response Time); record throughput per topic and partition; per client id; per path (ZooKeeper and
any protocol that sets info["path"]); per conversation; diagnostics by key. Each table holds at
most `max_keys` rows: later keys fold into an OTHER row, and a row's errors (or expected answers)
by name at most MAX_ERROR_NAMES names: later names count as OTHER. Nothing is kept per message, except the
few answers held until the client's retry confirms they were expected (analysis/expected.py).

An error answer is an error or expected (EXPECTED_ERRORS); a response whose time is a wait the
client asked for (LONG_POLLS) is counted as a long poll and kept out of the response-time figures.
`finish()` (called by `add_all`) settles the held answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kdissect.analysis.expected import ErrorClassifier, is_long_poll
from kdissect.analysis.sketch import QuantileSketch
from kdissect.analysis.throughput import Volume, record_volumes, short_name
from kdissect.model import Message

OTHER = "(other)"
MAX_KEYS = 10_000
MAX_ERROR_NAMES = 100  # distinct error (or expected) names an operation's or a path's row keeps
K = TypeVar("K")
V = TypeVar("V")


@dataclass(slots=True)
class OpStats:
    requests: int = 0
    responses: int = 0
    events: int = 0
    unmatched: int = 0  # requests that expected a response and got none in the capture
    bytes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    expected: Counter[str] = field(default_factory=Counter)
    rtt: QuantileSketch = field(default_factory=QuantileSketch)  # service time: long polls left out
    long_polls: QuantileSketch = field(default_factory=QuantileSketch)


@dataclass(slots=True)
class Flow:
    """Records and bytes one way (produced or fetched)."""

    messages: int = 0
    records: int = 0
    bytes: int = 0


@dataclass(slots=True)
class TopicStats:
    produced: Flow = field(default_factory=Flow)
    fetched: Flow = field(default_factory=Flow)


@dataclass(slots=True)
class TopicMessages:
    """Messages naming a topic (msg.info["topic"] / ["topics"]), any protocol."""

    requests: int = 0
    responses: int = 0
    events: int = 0
    errors: int = 0
    bytes: int = 0


@dataclass(slots=True)
class ClientStats:
    requests: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    errors: int = 0
    produced: Flow = field(default_factory=Flow)


@dataclass(slots=True)
class PathStats:
    count: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    expected: Counter[str] = field(default_factory=Counter)
    rtt_total: float = 0.0
    rtt_count: int = 0


@dataclass(slots=True)
class ConvStats:
    protocol: str
    client: str
    server: str
    messages: int = 0
    bytes: int = 0
    errors: int = 0
    expected: int = 0
    long_polls: int = 0
    rtt_total: float = 0.0
    rtt_count: int = 0
    rtt_max: float = 0.0
    first_ts: float = 0.0
    last_ts: float = 0.0


def bounded(table: dict[K, V], key: K, other: K, make: Callable[[], V], max_keys: int) -> V:
    """table[key], created with make(); past max_keys new keys share the `other` row."""
    row = table.get(key)
    if row is None:
        if len(table) >= max_keys:
            key = other
            row = table.get(key)
        if row is None:
            row = table[key] = make()
    return row


def error_of(m: Message) -> str | None:
    """The error name of a response (None on success or when not a response)."""
    err = m.info.get("error")
    if err:
        return str(err)
    code = m.info.get("error_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"error {code}"
    return None


def _tally(counter: Counter[str], key: str, sign: int) -> None:
    """Count (sign 1) or take back (-1) a name; past MAX_ERROR_NAMES names a new one counts as
    OTHER, and a name not kept is taken back from there."""
    if key not in counter and (sign < 0 or len(counter) >= MAX_ERROR_NAMES):
        key = OTHER
    counter[key] += sign
    if counter[key] <= 0:
        del counter[key]


def _fact(m: Message, key: str) -> Any:
    v = m.info.get(key)
    if v is None and m.peer is not None:
        v = m.peer.info.get(key)
    return v


def topics_of(info: dict[str, Any]) -> list[str]:
    """The topics a message names (short_name: cut as the tables keep them)."""
    many = info.get("topics")
    if isinstance(many, list):
        return list(dict.fromkeys(short_name(t) for t in many if isinstance(t, str)))
    one = info.get("topic")
    return [short_name(one)] if isinstance(one, str) else []


def request_facts(m: Message) -> dict[str, Any]:
    """The facts that name a transaction: a response's are its request's (a Pulsar SEND is
    answered by SEND_RECEIPT, a RocketMQ response carries the server's version), like
    Wireshark's service response time, which counts a response under its request."""
    if m.kind == "response" and m.peer is not None:
        return m.peer.info
    return m.info


class Stats:
    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self.messages = 0
        self.bytes = 0
        self.first_ts: float | None = None
        self.last_ts = 0.0
        self.protocols: Counter[str] = Counter()
        self.ops: dict[tuple[str, str, int | None], OpStats] = {}
        self.rtt: dict[str, QuantileSketch] = {}
        self.topics: dict[tuple[str, int | None], TopicStats] = {}
        self.topic_names: dict[str, str] = {}  # topic id -> name, learnt from Metadata responses
        self.topic_messages: dict[tuple[str, str], TopicMessages] = {}
        self.clients: dict[tuple[str, str], ClientStats] = {}
        self.paths: dict[tuple[str, str, str], PathStats] = {}
        self.conversations: dict[int, ConvStats] = {}
        self.diagnostics: Counter[tuple[str, str]] = Counter()
        self.classifier = ErrorClassifier(max_keys)
        self.last_long_poll = False  # whether the latest message added was a long poll's answer

    def add_all(self, messages: Iterable[Message]) -> Stats:
        for m in messages:
            self.add(m)
        self.finish()
        return self

    def finish(self) -> None:
        """Expected answers whose retry never came count as errors after all."""
        for p in self.classifier.unconfirmed():
            self._answer(p.response, p.error, "expected", -1)
            self._answer(p.response, p.error, "error", 1)

    def add(self, m: Message) -> None:
        size = len(m.data)
        self.messages += 1
        self.bytes += size
        if self.first_ts is None:
            self.first_ts = m.ts
        self.last_ts = max(self.last_ts, m.ts)
        self.protocols[m.protocol] += 1
        rtt = m.match.rtt * 1000.0 if m.kind == "response" and m.match and m.match.rtt is not None else None
        err = error_of(m) if m.kind == "response" else None
        if m.kind == "request":
            self.classifier.on_request(m)
        names = self.topic_names if len(self.topic_names) < self.max_keys else None
        volumes = list(record_volumes(m.fields, names))
        long_poll = rtt is not None and is_long_poll(m, rtt, err, sum(v.records for v in volumes))
        self.last_long_poll = long_poll
        service = None if long_poll else rtt
        self._op(m, size, service, rtt if long_poll else None)
        self._volumes(m, volumes)
        self._topic_messages(m, size)
        self._client(m, size)
        self._path(m, service)
        self._conversation(m, size, service, long_poll)
        if err:
            self._answer(m, err, self.classifier.classify(m, err), 1)
        for d in m.diagnostics:
            if len(self.diagnostics) < self.max_keys or (d.severity.value, d.key) in self.diagnostics:
                self.diagnostics[(d.severity.value, d.key)] += 1

    def _op_row(self, m: Message) -> OpStats:
        facts = request_facts(m)
        op = facts.get("op") or "(unknown)"
        version = facts.get("version")
        key = (m.protocol, str(op), version if isinstance(version, int) else None)
        return bounded(self.ops, key, (m.protocol, OTHER, None), OpStats, self.max_keys)

    def _answer(self, m: Message, err: str, outcome: str, sign: int) -> None:
        """Count (sign 1) or take back (sign -1) a response's error as an error or an expected answer."""
        expected = outcome == "expected"
        op = self._op_row(m)
        _tally(op.expected if expected else op.errors, err, sign)
        path = self._path_row(m)
        if path is not None:
            _tally(path.expected if expected else path.errors, err, sign)
        conv = self.conversations.get(m.stream)
        if conv is not None:
            if expected:
                conv.expected += sign
            else:
                conv.errors += sign
        if expected:
            return
        for row in self._topic_rows(m):
            row.errors += sign
        client = self._client_row(m)
        if client is not None:
            client.errors += sign

    def _op(self, m: Message, size: int, rtt: float | None, long_poll: float | None) -> None:
        row = self._op_row(m)
        row.bytes += size
        if m.kind == "request":
            row.requests += 1
            if m.expects_response and m.match is None:
                row.unmatched += 1
        elif m.kind == "response":
            row.responses += 1
        else:
            row.events += 1
        if rtt is not None:
            row.rtt.add(rtt)
            self.rtt.setdefault(m.protocol, QuantileSketch()).add(rtt)
        if long_poll is not None:
            row.long_polls.add(long_poll)

    def _volumes(self, m: Message, volumes: list[Volume]) -> None:
        for v in volumes:
            key = (short_name(v.topic or "?"), v.partition)
            row = bounded(self.topics, key, (OTHER, None), TopicStats, self.max_keys)
            flow = row.produced if m.kind == "request" else row.fetched
            flow.messages += 1
            flow.records += v.records
            flow.bytes += v.bytes
            if m.kind == "request":
                cid = m.info.get("client_id")
                if isinstance(cid, str):
                    c = bounded(self.clients, (m.protocol, short_name(cid)), (m.protocol, OTHER), ClientStats,
                                self.max_keys)
                    c.produced.records += v.records
                    c.produced.bytes += v.bytes

    def _topic_rows(self, m: Message) -> list[TopicMessages]:
        topics = topics_of(m.info) or (topics_of(m.peer.info) if m.peer is not None else [])
        return [bounded(self.topic_messages, (m.protocol, topic), (m.protocol, OTHER), TopicMessages, self.max_keys)
                for topic in topics]

    def _topic_messages(self, m: Message, size: int) -> None:
        for row in self._topic_rows(m):
            row.bytes += size
            if m.kind == "request":
                row.requests += 1
            elif m.kind == "response":
                row.responses += 1
            else:
                row.events += 1

    def _client_row(self, m: Message) -> ClientStats | None:
        cid = _fact(m, "client_id")
        if not isinstance(cid, str):
            return None
        return bounded(self.clients, (m.protocol, short_name(cid)), (m.protocol, OTHER), ClientStats, self.max_keys)

    def _client(self, m: Message, size: int) -> None:
        row = self._client_row(m)
        if row is None:
            return
        if m.kind == "request":
            row.requests += 1
            row.bytes_sent += size
        else:
            row.bytes_received += size

    def _path_row(self, m: Message) -> PathStats | None:
        path = _fact(m, "path")
        if not isinstance(path, str):
            return None
        key = (m.protocol, short_name(str(request_facts(m).get("op") or m.kind)), short_name(path))
        return bounded(self.paths, key, (m.protocol, OTHER, OTHER), PathStats, self.max_keys)

    def _path(self, m: Message, rtt: float | None) -> None:
        row = self._path_row(m)
        if row is None:
            return
        if m.kind != "response":
            row.count += 1
        if rtt is not None:
            row.rtt_total += rtt
            row.rtt_count += 1

    def _conversation(self, m: Message, size: int, rtt: float | None, long_poll: bool) -> None:
        row = self.conversations.get(m.stream)
        if row is None:
            client, server = (m.src, m.dst) if m.to_server else (m.dst, m.src)
            row = ConvStats(m.protocol, client, server, first_ts=m.ts)
            if len(self.conversations) < self.max_keys:
                self.conversations[m.stream] = row
        row.messages += 1
        row.bytes += size
        row.last_ts = max(row.last_ts, m.ts)
        row.long_polls += long_poll
        if rtt is not None:
            row.rtt_total += rtt
            row.rtt_count += 1
            row.rtt_max = max(row.rtt_max, rtt)
