"""How the brokers answer, in every protocol: Kafka leadership errors and the Metadata storms
that follow them, Kafka throttling, responses slow against the capture's own distribution,
requests never answered, and bursts of error answers (expected answers and long polls left out,
as `kdissect stats` does). Charts: error answers per bin and name, throttle time per client and API.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.expected import LONG_POLLS, ErrorClassifier, is_long_poll, request_op
from kdissect.analysis.sketch import QuantileSketch
from kdissect.analysis.stats import bounded, error_of, request_facts
from kdissect.analysis.throughput import record_volumes, short_name
from kdissect.expert.catalogue import MAX_EVIDENCE, Evidence, Finding, Kind
from kdissect.expert.series import Bins, Clock, Points
from kdissect.expert.tree import elements, first, host_of, integer, number, text
from kdissect.kafka.error_codes import error_name
from kdissect.model import Field, Message, Severity
from kdissect.text import plural

OTHER = "(other)"
MAX_KEYS = 1000  # clients, topic names, conversations' unanswered rows... each table at most this
MAX_OPS = 200  # operations with a response-time distribution of their own
MAX_THROTTLED = 100  # throttled (client id, API) pairs followed
MAX_FINDINGS = 20  # findings of one kind, the worst first
MAX_NAMES = 50  # error names counted per table; later ones count as OTHER
TOP_NAMES = 5  # error names a summary spells out

# Kafka: answers that send a client back to Metadata, and where a response holds them.
LEADERSHIP_ERRORS = frozenset({"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH",
                               "UNKNOWN_TOPIC_OR_PARTITION"})
LEADERSHIP_APIS = frozenset({"Produce", "Fetch", "ListOffsets", "Metadata", "OffsetForLeaderEpoch", "DeleteRecords"})
TOPIC_ARRAYS = ("responses", "topics")
PARTITION_ARRAYS = ("partition_responses", "partitions")
TOPIC_NAMES = ("name", "topic", "topic_id")
PARTITION_NUMBERS = ("partition_index", "index", "partition")
MAX_PARTITION_ERRORS = 1000  # per response
STORM_REQUESTS = 10  # Metadata requests from one client ...
STORM_WINDOW_S = 10.0  # ... within this long make a storm
STARTUP_METADATA = 2  # a connection's first Metadata requests are its start-up discovery: not counted
STORM_PARTITIONS = 10  # leadership errors on this many partitions are a storm of their own
MAX_PARTITIONS = 10_000  # (topic, partition) pairs remembered

# Throttling is sustained when the broker keeps throttling a client and API this often, this long.
SUSTAINED_THROTTLES = 5
SUSTAINED_THROTTLE_S = 10.0
THROTTLE_POINTS = 500

# Slow responses: outliers at or above max(p99, SLOW_FACTOR x the median, SLOW_FLOOR_MS) of their
# operation, among operations with at least MIN_SAMPLES responses; SLOW_WARNING_MS makes a warning.
MIN_SAMPLES = 20
SLOW_FACTOR = 5.0
SLOW_FLOOR_MS = 100.0
SLOW_WARNING_MS = 1000.0
SLOWEST_KEPT = 50  # per operation

# Requests never answered. A later answer from the same side proves a request skipped only where answers
# come in request order; elsewhere a long poll may still be held when others are answered. (Events, such
# as ZooKeeper's watch notifications, may come before an answer: they prove nothing.)
ANSWERS_IN_ORDER = frozenset({"kafka", "zookeeper"})
MAX_WAITING = 10_000  # unanswered requests watched for later traffic on their conversation
MAX_STREAMS = 100_000  # conversations remembered as having answered something

# Error bursts: BURST_ERRORS error answers within BURST_WINDOW_S, or more than BURST_SHARE of the
# window's responses when it holds at least BURST_MIN_RESPONSES.
BURST_WINDOW_S = 5
BURST_ERRORS = 20
BURST_SHARE = 0.5
BURST_MIN_RESPONSES = 20
CHART_ERRORS = 20  # error names charted on their own; the others are summed as OTHER
MAX_ERROR_SERIES = 64

LEADERSHIP = Kind(
    "kafka.broker.leadership", Severity.NOTE, "broker", "Leadership errors",
    "Partitions moved or had no leader (broker restart, reassignment, ISR shrink, unknown topic): check the "
    "brokers named for restarts and the controller log for leader elections; many partitions at once "
    "point at a broker that left the cluster.")
METADATA_STORM = Kind(
    "kafka.broker.metadata_storm", Severity.WARNING, "broker", "Metadata storm",
    "A client asks for Metadata again and again: it keeps finding stale leaders or unknown topics. Check "
    "the leadership errors before it, the topic's existence and the client's metadata.max.age.ms and "
    "retry.backoff.ms.")
THROTTLED = Kind(
    "kafka.broker.throttled", Severity.NOTE, "broker", "Throttled by the broker",
    "The broker delays this client's requests to keep it within its quota (produce/fetch byte rate or "
    "request percentage): check the quotas set for the client id or user, or spread the load.")
SLOW = Kind(
    "broker.slow_response", Severity.NOTE, "broker", "Slow responses",
    "Responses far slower than the rest of their operation: check the broker's request queue and disk "
    "at those times (request latency metrics, GC pauses, log flushes), and acks/replication for produce.")
NO_RESPONSE = Kind(
    "broker.no_response", Severity.WARNING, "broker", "Requests never answered",
    "The other side answered later requests on the same connection but never these: a request it cannot "
    "handle (unsupported operation or version), a lost response, or a broker bug; check its log at "
    "that time.")
PENDING_AT_END = Kind(
    "broker.pending_at_end", Severity.CHAT, "broker", "Requests unanswered when the capture ended",
    "Nothing came back on the connection after these requests: the answer may have come after the "
    "capture stopped or the connection closed first; capture longer to tell. A conversation whose "
    "server sent nothing at all may be captured in one direction only.")
ERROR_BURST = Kind(
    "broker.error_burst", Severity.WARNING, "broker", "Burst of error answers",
    "Many requests failed within seconds: look at the error names and the brokers at that time "
    "(a restart, a full disk, an authorization change, a client retrying in a loop).")


def _text(v: Any) -> str | None:
    return text(v) or None


def _rtt_ms(m: Message) -> float | None:
    rtt = m.match.rtt if m.kind == "response" and m.match is not None else None
    if isinstance(rtt, (int, float)) and not isinstance(rtt, bool) and math.isfinite(rtt) and rtt >= 0:
        return rtt * 1000.0
    return None


def _op(m: Message) -> str:
    return str(request_facts(m).get("op") or "(unknown)")


def _client(m: Message) -> str:
    """A client as the brokers see it: its client id at its host (for a response, its request's)."""
    cid = _text(request_facts(m).get("client_id")) or "?"
    return f"{cid}@{host_of(m.src if m.to_server else m.dst)}"


def _count(counter: Counter[str], key: str, n: int = 1, cap: int = MAX_NAMES) -> None:
    counter[key if key in counter or len(counter) < cap else OTHER] += n


def _names(counter: Counter[str]) -> str:
    """"NOT_LEADER_OR_FOLLOWER 10, REQUEST_TIMED_OUT 2": the most frequent names first."""
    top = counter.most_common(TOP_NAMES)
    rest = sum(counter.values()) - sum(n for _, n in top)
    return ", ".join([f"{k} {n}" for k, n in top] + ([f"{OTHER} {rest}"] if rest else []))


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def _ms(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


def partition_errors(m: Message) -> Iterator[tuple[str, str | None, int | None]]:
    """(error name, topic, partition) of each topic and partition a Kafka response fails,
    read from its per-topic and per-partition results (MAX_PARTITION_ERRORS at most)."""
    n = 0
    for arr in TOPIC_ARRAYS:
        for t in elements(m, arr):
            topic = _text(first(t, *TOPIC_NAMES))
            for node, part in _results(t):
                code = number(node, "error_code")
                if code:
                    yield error_name(code), topic, part
                    n += 1
                    if n >= MAX_PARTITION_ERRORS:
                        return


def _results(topic: Field) -> Iterator[tuple[Field, int | None]]:
    """A topic's result, then each of its partitions' (with the partition's number)."""
    yield topic, None
    for arr in PARTITION_ARRAYS:
        for p in elements(topic, arr):
            yield p, integer(first(p, *PARTITION_NUMBERS))


# --- Kafka leadership errors and Metadata storms -------------------------------------------------


@dataclass(slots=True)
class _Storm:
    """One client's Metadata requests: the latest few, and those that came in storms (`later`:
    those after the first STORM_REQUESTS - 1 of each storm)."""

    recent: deque[float] = field(default_factory=lambda: deque(maxlen=STORM_REQUESTS))
    later: Evidence = field(default_factory=Evidence)
    episodes: int = 0
    in_storm: bool = False
    first_ts: float = 0.0
    brokers: Counter[str] = field(default_factory=Counter)
    after_errors: int = 0  # Metadata requests after a leadership error answered this client
    errored: bool = False

    @property
    def requests(self) -> int:
        """The Metadata requests that came in storms."""
        return self.later.count + self.episodes * (STORM_REQUESTS - 1)


class Leadership:
    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()
        self.brokers: Counter[str] = Counter()
        self.topics: Counter[str] = Counter()
        self.partitions: set[tuple[str, int]] = set()
        self.more_partitions = False
        self.failed = Evidence()  # the responses
        self.clients: dict[str, _Storm] = {}
        self.connections: dict[int, int] = {}  # stream -> its Metadata requests, up to STARTUP_METADATA
        self.names: dict[str, str] = {}  # topic id -> name, from Metadata responses

    def add(self, m: Message, error: str | None) -> None:
        """A Kafka message; `error`: a response's error answer (expected answers left out)."""
        op = request_op(m)
        if m.kind == "request":
            if op == "Metadata":
                self._metadata(m)
            return
        if op == "Metadata":
            self._learn(m)
        if error is not None and op in LEADERSHIP_APIS:
            self._errors(m)

    def _learn(self, m: Message) -> None:
        for t in elements(m, "topics"):
            tid, name = first(t, "topic_id"), first(t, "name")
            if isinstance(tid, str) and isinstance(name, str) and name and len(self.names) < MAX_KEYS:
                self.names[tid] = short_name(name)

    def _storm(self, client: str) -> _Storm | None:
        s = self.clients.get(client)
        if s is None and len(self.clients) < MAX_KEYS:
            s = self.clients[client] = _Storm()
        return s

    def _startup(self, m: Message) -> bool:
        """Whether a Metadata request is among the first of its connection (or of one not tracked)."""
        n = self.connections.get(m.stream, 0)
        if n >= STARTUP_METADATA:
            return False
        if n or len(self.connections) < MAX_STREAMS:
            self.connections[m.stream] = n + 1
        return True

    def _metadata(self, m: Message) -> None:
        s = self._storm(_client(m))
        if s is None:
            return
        s.after_errors += s.errored
        if self._startup(m):
            return
        s.recent.append(m.ts)
        storm = len(s.recent) == STORM_REQUESTS and s.recent[-1] - s.recent[0] <= STORM_WINDOW_S
        if storm and not s.in_storm:
            s.episodes += 1
            if s.episodes == 1:
                s.first_ts = s.recent[0]
        if storm:
            s.later.add(m)
            _count(s.brokers, m.dst)
        s.in_storm = storm

    def _errors(self, m: Message) -> None:
        found = [e for e in partition_errors(m) if e[0] in LEADERSHIP_ERRORS]
        top = error_of(m)
        if not found and top in LEADERSHIP_ERRORS:
            found = [(str(top), _text(request_facts(m).get("topic")), None)]
        if not found:
            return
        self.failed.add(m)
        _count(self.brokers, m.src)
        for name, topic, part in found:
            self.errors[name] += 1
            if topic is not None:
                topic = short_name(self.names.get(topic, topic))
                _count(self.topics, topic)
                self._partition(topic, part)
        s = self._storm(_client(m))
        if s is not None:
            s.errored = True

    def _partition(self, topic: str, part: int | None) -> None:
        if part is None:
            return
        if len(self.partitions) < MAX_PARTITIONS:
            self.partitions.add((topic, part))
        elif (topic, part) not in self.partitions:
            self.more_partitions = True

    def findings(self) -> list[Finding]:
        out = [self._leadership()] if self.failed.count else []
        storms = sorted(((c, s) for c, s in self.clients.items() if s.episodes), key=lambda cs: -cs[1].requests)
        return out + [self._metadata_storm(c, s) for c, s in storms[:MAX_FINDINGS]]

    def _leadership(self) -> Finding:
        total = sum(self.errors.values())
        parts = len(self.partitions)
        where = f" on {plural(parts, 'partition')}{'+' if self.more_partitions else ''}" if parts else ""
        if self.topics:
            where += f" {'of' if parts else 'on'} {plural(len(self.topics), 'topic')}"
        followed = sum(s.after_errors for s in self.clients.values())
        then = f"; clients then sent {plural(followed, 'Metadata request')}" if followed else ""
        summary = (f"{plural(total, 'leadership error')} ({_names(self.errors)}){where} from "
                   f"{plural(len(self.brokers), 'broker')}{then}")
        values = {"errors": dict(self.errors), "responses": self.failed.count, "partitions": parts,
                  "topics": dict(self.topics.most_common(MAX_FINDINGS)), "brokers": dict(self.brokers),
                  "metadata_after": followed,
                  "partition_list": [f"{t}-{p}" for t, p in sorted(self.partitions)[:MAX_EVIDENCE]]}
        severity = Severity.WARNING if parts >= STORM_PARTITIONS else None
        return LEADERSHIP.finding(summary, "kafka", evidence=self.failed, values=values, count=total,
                                  severity=severity)

    def _metadata_storm(self, client: str, s: _Storm) -> Finding:
        span = (s.later.last_ts or 0.0) - s.first_ts
        after = f", after leadership errors ({s.after_errors} Metadata requests followed them)" if s.errored else ""
        summary = (f"client {client} sent {s.requests} Metadata requests in {_seconds(span)} "
                   f"({plural(s.episodes, 'storm')} of {STORM_REQUESTS}+ within {STORM_WINDOW_S:g} s) to "
                   f"{plural(len(s.brokers), 'broker')}{after}")
        values = {"client": client, "requests": s.requests, "episodes": s.episodes, "span_s": round(span, 3),
                  "brokers": dict(s.brokers), "after_leadership_errors": s.after_errors}
        return METADATA_STORM.finding(summary, "kafka", s.first_ts, evidence=s.later, values=values,
                                      count=s.requests)


# --- Kafka throttling ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Throttle:
    throttled: Evidence = field(default_factory=Evidence)  # the responses that were
    total_ms: int = 0
    max_ms: int = 0
    last_frame: int = 0
    points: Points = field(default_factory=lambda: Points(THROTTLE_POINTS))


class Throttling:
    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], _Throttle] = {}

    def add(self, m: Message) -> None:
        if m.kind != "response" or m.protocol != "kafka":
            return
        ms = number(m, "throttle_time_ms")
        if ms is None:
            return
        key = (_text(request_facts(m).get("client_id")) or "?", _op(m))
        row = self.keys.get(key)
        if row is None:
            if ms <= 0 or len(self.keys) >= MAX_THROTTLED:
                return
            row = self.keys[key] = _Throttle()
        row.points.add(m.ts, ms)  # once throttled, every answer: the chart shows the recovery too
        if ms <= 0:
            return
        row.throttled.add(m)
        row.total_ms += ms
        row.max_ms = max(row.max_ms, ms)
        row.last_frame = m.frame

    def findings(self) -> list[Finding]:
        rows = sorted(self.keys.items(), key=lambda kv: -kv[1].total_ms)[:MAX_FINDINGS]
        return [self._finding(cid, api, r) for (cid, api), r in rows]

    def _finding(self, cid: str, api: str, r: _Throttle) -> Finding:
        ev = r.throttled
        span = (ev.last_ts or 0.0) - (ev.first_ts or 0.0)
        sustained = ev.count >= SUSTAINED_THROTTLES and span >= SUSTAINED_THROTTLE_S
        summary = (f"client {cid} was throttled on {plural(ev.count, api + ' response')} over {_seconds(span)}: "
                   f"{_ms(r.total_ms)} in all, up to {_ms(r.max_ms)}")
        values = {"client_id": cid, "api": api, "count": ev.count, "total_ms": r.total_ms, "max_ms": r.max_ms,
                  "first_frame": ev.frames[0] if ev.frames else None, "last_frame": r.last_frame,
                  "span_s": round(span, 3)}
        return THROTTLED.finding(summary, "kafka", evidence=ev, values=values,
                                 severity=Severity.WARNING if sustained else None)

    def chart(self, origin: float | None) -> dict[str, Any]:
        return {f"{cid} {api}": r.points.to_json(origin) for (cid, api), r in sorted(self.keys.items())}


# --- Slow responses ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Times:
    sketch: QuantileSketch = field(default_factory=QuantileSketch)
    slowest: list[tuple[float, int, float, int]] = field(default_factory=list)  # min-heap (ms, frame, ts, stream)


class SlowResponses:
    def __init__(self) -> None:
        self.ops: dict[tuple[str, str], _Times] = {}

    def add(self, m: Message, rtt_ms: float, error: str | None) -> None:
        if (m.protocol, request_op(m)) in LONG_POLLS:
            records = sum(v.records for v in record_volumes(m.fields))
            if is_long_poll(m, rtt_ms, error, records):
                return
        key = (m.protocol, _op(m))
        row = self.ops.get(key)
        if row is None:
            if len(self.ops) >= MAX_OPS:
                return
            row = self.ops[key] = _Times()
        row.sketch.add(rtt_ms)
        item = (rtt_ms, m.frame, m.ts, m.stream)
        if len(row.slowest) < SLOWEST_KEPT:
            heapq.heappush(row.slowest, item)
        elif item > row.slowest[0]:
            heapq.heapreplace(row.slowest, item)

    def findings(self) -> list[Finding]:
        out = [f for (proto, op), row in self.ops.items() if (f := self._finding(proto, op, row)) is not None]
        out.sort(key=lambda f: -f.values["rtt_ms"])
        return out[:MAX_FINDINGS]

    def _finding(self, proto: str, op: str, row: _Times) -> Finding | None:
        s = row.sketch
        p50, p99 = s.quantile(0.5), s.quantile(0.99)
        if s.count < MIN_SAMPLES or p50 is None or p99 is None:
            return None
        floor = max(p99, SLOW_FACTOR * p50, SLOW_FLOOR_MS)
        slow = sorted((x for x in row.slowest if x[0] >= floor), reverse=True)
        if not slow:
            return None
        top = slow[0][0]
        more = "+" if len(slow) == len(row.slowest) == SLOWEST_KEPT else ""
        summary = (f"{proto} {op}: {plural(len(slow), 'response')}{more} took {_ms(floor)} or more "
                   f"(slowest {_ms(top)}, frame {slow[0][1]}) against a median of {_ms(p50)} and p99 of "
                   f"{_ms(p99)} over {s.count} responses")
        values = {"op": op, "rtt_ms": round(top, 3), "p50_ms": round(p50, 3), "p99_ms": round(p99, 3),
                  "threshold_ms": round(floor, 3), "responses": s.count,
                  "slow": [{"frame": f, "rtt_ms": round(ms, 3)} for ms, f, _, _ in slow[:MAX_EVIDENCE]]}
        return SLOW.finding(summary, proto, min(x[2] for x in slow), last_ts=max(x[2] for x in slow),
                            frames=[x[1] for x in slow], streams=[x[3] for x in slow], values=values,
                            count=len(slow), severity=Severity.WARNING if top >= SLOW_WARNING_MS else None)


# --- Requests never answered ---------------------------------------------------------------------


@dataclass(slots=True)
class _Waiting:
    """An unanswered request, watched for later answers from the side that should answer it."""

    key: tuple[str, str, bool]  # protocol, operation, whether it went to the server
    frame: int
    ts: float
    stream: int
    to_server: bool


@dataclass(slots=True)
class _Unanswered:
    requests: Evidence = field(default_factory=Evidence)
    seen: set[int] = field(default_factory=set)  # its conversations (the first MAX_KEYS)
    silent: int = 0  # of them, on conversations whose answering side never sent anything
    followed_by: list[int] = field(default_factory=list)  # frames of later answers from the same side


def _settle(table: dict[tuple[str, str, bool], _Unanswered], w: _Waiting, later: int | None,
            silent: bool = False) -> None:
    """Count an unanswered request in its row of `table` (`later`: the answer that followed it;
    `silent`: the side that should answer sent nothing on the conversation)."""
    row = table.get(w.key)
    if row is None:
        if len(table) >= MAX_KEYS:
            return
        row = table[w.key] = _Unanswered()
    row.requests.note(w.ts, w.frame, w.stream)
    row.silent += silent
    if len(row.seen) < MAX_KEYS:
        row.seen.add(w.stream)
    if later is not None and len(row.followed_by) < MAX_EVIDENCE:
        row.followed_by.append(later)


class Unanswered:
    def __init__(self) -> None:
        self.waiting: dict[int, dict[tuple[int, int], _Waiting]] = {}  # stream -> (frame, number) -> request
        # (stream, to_server) -> the times of its watched requests, earliest first: a response
        # reaches only those of the other direction sent before it, without a scan of the rest
        self.due: dict[tuple[int, bool], list[tuple[float, int, tuple[int, int]]]] = {}
        self.watches = 0  # watched so far (the order of the `due` entries)
        self.size = 0
        self.spoke: set[tuple[int, bool]] = set()  # (stream, to_server) of sides that sent something
        self.later: dict[tuple[str, str, bool], _Unanswered] = {}
        self.at_end: dict[tuple[str, str, bool], _Unanswered] = {}

    def add(self, m: Message) -> None:
        if m.kind == "response" and m.peer is not None:
            self._answered(m.peer)
        watched = self.waiting.get(m.stream) if m.kind == "response" else None
        if watched:
            due = self.due.get((m.stream, not m.to_server))
            if due and due[0][0] <= m.ts:
                ready = []
                while due and due[0][0] <= m.ts:
                    _, order, key = heapq.heappop(due)
                    if key in watched:  # (else answered meanwhile)
                        ready.append((order, key))
                for _, key in sorted(ready):  # in the order they were watched
                    _settle(self.later, watched.pop(key), m.frame)
                    self.size -= 1
            if not watched:
                del self.waiting[m.stream]
                self.due.pop((m.stream, False), None)
                self.due.pop((m.stream, True), None)
        if len(self.spoke) < MAX_STREAMS:
            self.spoke.add((m.stream, m.to_server))
        if m.kind == "request" and m.expects_response and m.match is None:
            self._watch(m)

    def _watch(self, m: Message) -> None:
        w = _Waiting((m.protocol, _op(m), m.to_server), m.frame, m.ts, m.stream, m.to_server)
        if m.protocol not in ANSWERS_IN_ORDER and w.key[:2] in LONG_POLLS:
            self._pending(w)  # later answers to others say nothing of it
        elif self.size < MAX_WAITING:
            watched = self.waiting.setdefault(m.stream, {})
            watched[(m.frame, m.number)] = w
            self.size += 1
            due = self.due.setdefault((m.stream, m.to_server), [])
            heapq.heappush(due, (m.ts, self.watches, (m.frame, m.number)))
            self.watches += 1
            if len(due) > 2 * len(watched) + 64:  # mostly requests answered after all: only the watched stay
                due[:] = [d for d in due if d[2] in watched]
                heapq.heapify(due)
        else:  # too many to watch: counted as still waiting
            self._pending(w)

    def _pending(self, w: _Waiting) -> None:
        _settle(self.at_end, w, None, (w.stream, not w.to_server) not in self.spoke)

    def _answered(self, request: Message) -> None:
        """A request released unanswered whose response came after all (long after)."""
        watched = self.waiting.get(request.stream)
        if watched and watched.pop((request.frame, request.number), None) is not None:
            self.size -= 1

    def findings(self) -> list[Finding]:
        for watched in self.waiting.values():
            for w in watched.values():
                self._pending(w)
        self.waiting.clear()
        self.due.clear()
        self.size = 0
        later = sorted(self.later.items(), key=lambda kv: -kv[1].requests.count)[:MAX_FINDINGS]
        at_end = sorted(((k, r) for k, r in self.at_end.items() if k[:2] not in LONG_POLLS and k[2]),
                        key=lambda kv: -kv[1].requests.count)[:MAX_FINDINGS]
        return [self._later(k, r) for k, r in later] + [self._at_end(k, r) for k, r in at_end]

    def _values(self, key: tuple[str, str, bool], r: _Unanswered) -> dict[str, Any]:
        return {"op": key[1], "requests": r.requests.count, "streams": len(r.seen), "to_server": key[2],
                "silent_conversations_requests": r.silent}

    def _later(self, key: tuple[str, str, bool], r: _Unanswered) -> Finding:
        proto, op, to_server = key
        who = "the server" if to_server else "the client"
        asked = "" if to_server else " from the server"
        summary = (f"{proto} {op}: {plural(r.requests.count, 'request')}{asked} never answered, though {who} "
                   f"answered later ones on the same {plural(len(r.seen), 'connection')} (first after frame "
                   f"{r.requests.frames[0]}: frame {r.followed_by[0]})")
        values = {**self._values(key, r), "followed_by_frames": r.followed_by}
        return NO_RESPONSE.finding(summary, proto, evidence=r.requests, values=values,
                                   severity=None if to_server else Severity.NOTE)

    def _at_end(self, key: tuple[str, str, bool], r: _Unanswered) -> Finding:
        proto, op, _ = key
        silent = (f"; {r.silent} of them on conversations whose server sent nothing at all (one direction "
                  f"captured?)") if r.silent else ""
        summary = (f"{proto} {op}: {plural(r.requests.count, 'request')} on {plural(len(r.seen), 'connection')} "
                   f"still unanswered when the connection or the capture ended{silent}")
        return PENDING_AT_END.finding(summary, proto, evidence=r.requests, values=self._values(key, r),
                                      severity=Severity.NOTE if r.silent else None)


# --- Error bursts --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Second:
    second: int
    responses: int = 0
    errors: Evidence = field(default_factory=Evidence)
    names: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Burst:
    first_ts: float
    last_ts: float
    responses: int = 0
    errors: int = 0
    names: Counter[str] = field(default_factory=Counter)
    shown: Evidence = field(default_factory=Evidence)  # frames and streams only


class Bursts:
    """Per protocol, the last BURST_WINDOW_S one-second buckets of answers, and the bursts seen."""

    def __init__(self) -> None:
        self.window: dict[str, deque[_Second]] = {}
        self.current: dict[str, _Burst] = {}
        self.bursts: dict[str, list[_Burst]] = {}
        self.dropped: Counter[str] = Counter()

    def add(self, m: Message, error: str | None) -> None:
        window = self.window.get(m.protocol)
        if window is None:
            if len(self.window) >= MAX_KEYS:
                return
            window = self.window[m.protocol] = deque()
        sec = math.floor(m.ts)
        if window and sec < window[-1].second:
            sec = window[-1].second  # a time that steps back counts in the latest second: the window stays in order
        if not window or window[-1].second != sec:
            window.append(_Second(sec))
        while window[0].second <= sec - BURST_WINDOW_S:
            window.popleft()
        b = window[-1]
        b.responses += 1
        if error is not None:
            b.errors.note(m.ts, m.frame)
            _count(b.names, error)
        self._check(m, window, error)

    def _check(self, m: Message, window: deque[_Second], error: str | None) -> None:
        responses = sum(b.responses for b in window)
        errors = sum(b.errors.count for b in window)
        burst = errors >= BURST_ERRORS or (responses >= BURST_MIN_RESPONSES and errors > BURST_SHARE * responses)
        cur = self.current.get(m.protocol)
        if not burst:
            if cur is not None:
                self._close(m.protocol)
            return
        if cur is None:
            cur = self.current[m.protocol] = _Burst(m.ts, m.ts, responses, errors)
            for b in window:
                for k, n in b.names.items():
                    _count(cur.names, k, n)
                for f in b.errors.frames:
                    cur.shown.cite(f)
            starts = [t for b in window if (t := b.errors.first_ts) is not None]
            cur.first_ts = min([m.ts] + starts)
            cur.shown.cite(stream=m.stream)
            return
        cur.last_ts = m.ts
        cur.responses += 1
        if error is not None:
            cur.errors += 1
            _count(cur.names, error)
            cur.shown.cite(m.frame, m.stream)

    def _close(self, proto: str) -> None:
        cur = self.current.pop(proto)
        done = self.bursts.setdefault(proto, [])
        if len(done) < MAX_FINDINGS:
            done.append(cur)
        else:
            self.dropped[proto] += 1

    def findings(self) -> list[Finding]:
        for proto in list(self.current):
            self._close(proto)
        return [self._finding(p, b) for p, bursts in self.bursts.items() for b in bursts]

    def _finding(self, proto: str, b: _Burst) -> Finding:
        span = max(b.last_ts - b.first_ts, 0.0)
        share = b.errors / b.responses if b.responses else 0.0
        summary = (f"{proto}: {b.errors} error answers in {_seconds(span)} ({_names(b.names)}), "
                   f"{share:.0%} of {b.responses} responses")
        values = {"errors": b.errors, "responses": b.responses, "span_s": round(span, 3),
                  "names": dict(b.names), "later_bursts_not_listed": self.dropped[proto]}
        return ERROR_BURST.finding(summary, proto, b.first_ts, evidence=b.shown, last_ts=b.last_ts, values=values,
                                   count=b.errors)


# --- The analyzer --------------------------------------------------------------------------------


class Brokers:
    KINDS: ClassVar[tuple[Kind, ...]] = (LEADERSHIP, METADATA_STORM, THROTTLED, SLOW, NO_RESPONSE, PENDING_AT_END,
                                         ERROR_BURST)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.classifier = ErrorClassifier(MAX_KEYS)
        self.leadership = Leadership()
        self.throttling = Throttling()
        self.slow = SlowResponses()
        self.unanswered = Unanswered()
        self.bursts = Bursts()
        self.errors: dict[str, Bins] = {}

    def add(self, m: Message) -> None:
        self.unanswered.add(m)
        if m.kind == "request":
            self.classifier.on_request(m)
            if m.protocol == "kafka":
                self.leadership.add(m, None)
            return
        if m.kind != "response":
            return
        error = error_of(m)
        if error is not None and self.classifier.classify(m, error) == "expected":
            error = None
        if error is not None:
            self._chart_error(m, error)
        if m.protocol == "kafka":
            self.leadership.add(m, error)
        self.throttling.add(m)
        rtt = _rtt_ms(m)
        if rtt is not None:
            self.slow.add(m, rtt, error)
        self.bursts.add(m, error)

    def _chart_error(self, m: Message, error: str) -> None:
        bounded(self.errors, f"{m.protocol} {error}", OTHER, lambda: Bins(self.clock), MAX_ERROR_SERIES).add(m.ts)

    def conversation_ended(self, conv: Any) -> None:
        return None

    def finish(self) -> list[Finding]:
        return [*self.leadership.findings(), *self.throttling.findings(), *self.slow.findings(),
                *self.unanswered.findings(), *self.bursts.findings()]

    def charts(self) -> dict[str, Any]:
        return {"errors": self._errors_chart(), "throttle": self.throttling.chart(self.clock.origin)}

    def _errors_chart(self) -> dict[str, list[float | None]]:
        """The CHART_ERRORS most frequent names, the others summed as OTHER."""
        series = {k: v.to_json() for k, v in self.errors.items()}
        ranked = sorted((k for k in series if k != OTHER), key=lambda k: (-sum(x or 0 for x in series[k]), k))
        out = {k: series[k] for k in ranked[:CHART_ERRORS]}
        rest = [series[k] for k in ranked[CHART_ERRORS:]] + ([series[OTHER]] if OTHER in series else [])
        if rest:
            out[OTHER] = [sum(x or 0 for x in col) for col in zip(*rest, strict=True)]
        return out
