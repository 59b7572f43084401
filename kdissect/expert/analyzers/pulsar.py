"""Pulsar producers and consumers: consumers stalled with no permits left (FLOW granted, MESSAGE
pushed, no new FLOW for a while), producers' SEND_ERROR and ERROR answers, producers and
consumers the broker closed (CLOSE_PRODUCER / CLOSE_CONSUMER sent by the server), and failed
authentication (an auth error answer, or a connection that ends on an unanswered challenge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.stats import bounded, request_facts
from kdissect.expert.catalogue import Evidence, Finding, Kind
from kdissect.expert.series import Clock, Points
from kdissect.expert.tree import host_of, integer, number, put, text, top, value
from kdissect.model import Message, Severity

STALL_S = 1.0  # permits used up and no FLOW for this many seconds make a stall
MAX_CONSUMERS = 10_000  # consumers followed (per connection and consumer id)
MAX_CHARTS = 20  # consumers with a permits chart
MAX_KEYS = 1000  # producers, topics, clients with findings; the others share OTHER
OTHER = "(other)"
AUTH_ERRORS = frozenset({"AuthenticationError", "AuthorizationError"})
CLOSES = {"CLOSE_PRODUCER": ("producer", "close_producer", "producer_id"),
          "CLOSE_CONSUMER": ("consumer", "close_consumer", "consumer_id")}

KIND_STALL = Kind(
    "pulsar.flow_stall", Severity.WARNING, "pulsar", "Pulsar consumer out of permits",
    "The broker pushed every message the consumer had permits for and no new FLOW came: the application "
    "is not taking messages from the receiver queue (slow or blocked listener, unacknowledged messages, "
    "a full receiver queue). Check the consumer's processing time and receiverQueueSize.")
KIND_SEND_ERROR = Kind(
    "pulsar.producer_error", Severity.ERROR, "pulsar", "Pulsar producer errors",
    "The broker refused the producer's messages or the producer itself: the error name says why "
    "(PersistenceError: BookKeeper trouble; ProducerBlockedQuotaExceeded: backlog quota; ProducerBusy or "
    "ProducerFenced: another producer with that name; TopicTerminated). Check the broker log for the topic.")
KIND_BROKER_CLOSED = Kind(
    "pulsar.broker_closed", Severity.WARNING, "pulsar", "Pulsar broker closed producers or consumers",
    "The broker closed them itself: the topic was unloaded, moved to another broker, deleted or "
    "terminated. Clients reconnect; frequent closes point at bundle unloading (load balancer) or broker "
    "restarts.")
KIND_AUTH = Kind(
    "pulsar.auth_failure", Severity.ERROR, "pulsar", "Pulsar authentication failed",
    "The broker refused the client's credentials or the client did not answer its AUTH_CHALLENGE in time "
    "(an expired token, a wrong role, a client without an auth refresh). Check the client's credentials "
    "and the broker's authentication provider.")


@dataclass(slots=True)
class Consumer:
    topic: str | None = None
    subscription: str | None = None
    granted: int = 0
    pushed: int = 0
    out_since: float | None = None  # when the permits ran out
    out_frame: int = 0
    stalls: Evidence = field(default_factory=Evidence)  # an occurrence at each stall's start
    longest: float = 0.0
    stalled: float = 0.0
    last: float = 0.0  # the end of the latest stall
    closed: bool = False
    points: Points | None = None

    @property
    def available(self) -> int:
        return self.granted - self.pushed

    def stall(self, start: float, end: float, frame: int, next_frame: int | None) -> None:
        length = end - start
        if length < STALL_S:
            return
        self.stalls.note(start, frame)
        self.stalls.cite(next_frame)
        self.longest = max(self.longest, length)
        self.stalled += length
        self.last = end


@dataclass(slots=True)
class Challenge:
    """An AUTH_CHALLENGE waiting for its connection's end: when, in which frame, to which client."""

    ts: float
    frame: int
    client: str


@dataclass(slots=True)
class Told:
    """The answers or commands behind one finding, and the first detail they gave (an error
    message, the broker a topic moved to)."""

    evidence: Evidence = field(default_factory=Evidence)
    detail: str | None = None

    def add(self, m: Message, name: str | None, detail: str | None) -> None:
        self.evidence.add(m, name)
        self.detail = self.detail or detail


class Pulsar:
    KINDS: ClassVar[tuple[Kind, ...]] = (KIND_STALL, KIND_SEND_ERROR, KIND_BROKER_CLOSED, KIND_AUTH)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.consumers: dict[tuple[int, int], Consumer] = {}
        self.charted = 0
        self.producer_names: dict[tuple[int, int], str] = {}
        self.errors: dict[tuple[str, str, str], Told] = {}
        self.closes: dict[tuple[str, str], Told] = {}
        self.auth: dict[str, Evidence] = {}
        # stream -> the challenge (its time, frame and client: not the message, whose tree
        # may be large), answered
        self.challenges: dict[int, tuple[Challenge, bool]] = {}
        self.ends: dict[int, float] = {}  # stream -> its last packet time, once ended
        self.last_ts = 0.0

    # -- messages ------------------------------------------------------------------------

    def add(self, m: Message) -> None:
        if m.protocol != "pulsar":
            return
        self.last_ts = max(self.last_ts, m.ts)
        op = m.info.get("op")
        if not isinstance(op, str):
            return
        if not m.to_server:
            self._from_server(m, op)
        if op == "FLOW":
            self._flow(m)
        elif op == "MESSAGE":
            self._pushed(m)
        elif op == "SUBSCRIBE":
            self._subscribe(m)
        elif op in ("PRODUCER", "PRODUCER_SUCCESS"):
            self._producer(m, op.lower())
        elif op == "CLOSE_CONSUMER":
            self._closed(m)
        elif op == "AUTH_RESPONSE" and m.stream in self.challenges:
            self.challenges[m.stream] = (self.challenges[m.stream][0], True)

    def _from_server(self, m: Message, op: str) -> None:
        error = text(m.info.get("error"))
        if error in AUTH_ERRORS:
            bounded(self.auth, host_of(m.dst), OTHER, Evidence, MAX_KEYS).add(m, error)
            return
        if op == "AUTH_CHALLENGE":
            if m.stream in self.challenges or len(self.challenges) < MAX_CONSUMERS:
                self.challenges[m.stream] = (Challenge(m.ts, m.frame, m.dst), False)
            return
        self.challenges.pop(m.stream, None)
        if error is not None and (op == "SEND_ERROR" or integer(request_facts(m).get("producer_id")) is not None):
            self._producer_error(m, error)
        elif op in CLOSES and m.kind != "response":
            self._broker_close(m, op)

    def _consumer(self, m: Message, create: bool = False) -> Consumer | None:
        cid = integer(m.info.get("consumer_id"))
        if cid is None:
            return None
        key = (m.stream, cid)
        c = self.consumers.get(key)
        if c is None and create and len(self.consumers) < MAX_CONSUMERS:
            c = self.consumers[key] = Consumer(text(m.info.get("topic")))
            if self.charted < MAX_CHARTS:
                c.points = Points()
                self.charted += 1
        return c

    def _subscribe(self, m: Message) -> None:
        c = self._consumer(m, create=True)
        if c is not None:
            c.subscription = text(value(top(m, "subscribe"), "subscription"))

    def _flow(self, m: Message) -> None:
        c = self._consumer(m, create=True)
        permits = number(top(m, "flow"), "message_permits")
        if c is None or permits is None or c.closed:
            return
        if c.out_since is not None:
            c.stall(c.out_since, m.ts, c.out_frame, m.frame)
        c.granted += permits
        if c.available > 0:
            c.out_since = None
        self._chart(c, m.ts)

    def _pushed(self, m: Message) -> None:
        c = self._consumer(m, create=True)
        if c is None or c.closed:
            return
        batch = number(top(m, "metadata"), "num_messages_in_batch")
        c.pushed += batch if batch is not None and batch > 0 else 1
        if c.available <= 0 and c.out_since is None:
            c.out_since, c.out_frame = m.ts, m.frame
        self._chart(c, m.ts)

    def _closed(self, m: Message) -> None:
        c = self._consumer(m)
        if c is None or c.closed:
            return
        if c.out_since is not None:
            c.stall(c.out_since, m.ts, c.out_frame, m.frame)
            c.out_since = None
        c.closed = True
        if not c.stalls.count and c.points is None:  # nothing left to report: make room
            del self.consumers[(m.stream, m.info["consumer_id"])]

    @staticmethod
    def _chart(c: Consumer, ts: float) -> None:
        if c.points is not None:
            c.points.add(ts, c.available)

    def _producer(self, m: Message, body: str) -> None:
        pid = integer(request_facts(m).get("producer_id"))
        name = text(value(top(m, body), "producer_name"))
        if pid is not None and name:
            put(self.producer_names, (m.stream, pid), name, MAX_CONSUMERS)

    def _producer_error(self, m: Message, error: str) -> None:
        facts = request_facts(m)
        pid = integer(m.info.get("producer_id"))
        pid = pid if pid is not None else integer(facts.get("producer_id"))
        name = self.producer_names.get((m.stream, pid if pid is not None else -1)) or f"id {pid}"
        topic = text(m.info.get("topic")) or text(facts.get("topic")) or "?"
        t = bounded(self.errors, (topic, name, error), (OTHER, OTHER, error), Told, MAX_KEYS)
        t.add(m, text(m.info.get("op")), text(m.info.get("error_message")))

    def _broker_close(self, m: Message, op: str) -> None:
        what, body, id_name = CLOSES[op]
        cmd = top(m, body)
        topic = text(m.info.get("topic")) or "?"
        ident = number(cmd, id_name)
        t = bounded(self.closes, (topic, what), (OTHER, what), Told, MAX_KEYS)
        t.add(m, None if ident is None else str(ident), text(value(cmd, "assigned_broker_service_url")))

    def conversation_ended(self, conv: Any) -> None:
        index, last = getattr(conv, "index", None), getattr(conv, "last_ts", None)
        if isinstance(index, int) and isinstance(last, float) and index in self.challenges:
            self.ends[index] = last

    # -- results ---------------------------------------------------------------------------

    def finish(self) -> list[Finding]:
        out = [self._stall_finding(key, c) for key, c in self._stalled()]
        out += [self._error_finding(key, t) for key, t in self.errors.items()]
        out += [self._close_finding(key, t) for key, t in self.closes.items()]
        for stream, (challenge, answered) in self.challenges.items():
            if stream in self.ends:
                why = "AUTH_RESPONSE not accepted" if answered else "AUTH_CHALLENGE not answered"
                ev = bounded(self.auth, host_of(challenge.client), OTHER, Evidence, MAX_KEYS)
                ev.note(challenge.ts, challenge.frame, stream, why)
        out += [self._auth_finding(host, t) for host, t in self.auth.items()]
        return out

    def _stalled(self) -> list[tuple[tuple[int, int], Consumer]]:
        """The consumers that stalled, an open stall measured to the end of the capture."""
        for c in self.consumers.values():
            if c.out_since is not None and not c.closed:
                c.stall(c.out_since, self.last_ts, c.out_frame, None)
                c.out_since = None
        return [(k, c) for k, c in self.consumers.items() if c.stalls.count]

    @staticmethod
    def _stall_finding(key: tuple[int, int], c: Consumer) -> Finding:
        stream, cid = key
        sub = f" (subscription {c.subscription})" if c.subscription else ""
        stalls = c.stalls.count
        summary = (f"Pulsar consumer {cid} on {c.topic or '?'}{sub} ran out of permits {stalls} times, "
                   f"longest {c.longest:.1f} s without a FLOW ({c.granted} permits granted, {c.pushed} messages pushed)")
        return KIND_STALL.finding(
            summary, "pulsar", evidence=c.stalls, last_ts=c.last, streams=[stream],
            values={"consumer_id": cid, "topic": c.topic, "subscription": c.subscription, "stalls": stalls,
                    "longest_s": round(c.longest, 3), "stalled_s": round(c.stalled, 3), "granted": c.granted,
                    "pushed": c.pushed})

    @staticmethod
    def _error_finding(key: tuple[str, str, str], t: Told) -> Finding:
        topic, name, error = key
        ev = t.evidence
        said = f": {t.detail}" if t.detail else ""
        summary = f"Pulsar producer {name} on {topic}: {ev.count} {'/'.join(ev.names)} {error}{said}"
        return KIND_SEND_ERROR.finding(
            summary, "pulsar", evidence=ev,
            values={"topic": topic, "producer": name, "error": error, "message": t.detail, "errors": ev.count,
                    "answers": ev.names})

    @staticmethod
    def _close_finding(key: tuple[str, str], t: Told) -> Finding:
        topic, what = key
        ev = t.evidence
        moved = f"; reassigned to {t.detail}" if t.detail else ""
        ids = ", ".join(ev.names)
        summary = f"Pulsar broker closed {ev.count} {what}{'s' if ev.count > 1 else ''} on {topic} (ids {ids}){moved}"
        return KIND_BROKER_CLOSED.finding(
            summary, "pulsar", evidence=ev,
            values={"topic": topic, "what": what, "closed": ev.count, "ids": ev.names, "assigned_broker": t.detail})

    @staticmethod
    def _auth_finding(host: str, ev: Evidence) -> Finding:
        summary = f"Pulsar authentication of {host} failed {ev.count} times ({', '.join(ev.names)})"
        return KIND_AUTH.finding(summary, "pulsar", evidence=ev,
                                 values={"client": host, "failures": ev.count, "reasons": ev.names})

    def charts(self) -> dict[str, Any]:
        origin = self.clock.origin
        out: dict[str, Any] = {}
        for (stream, cid), c in self.consumers.items():
            if c.points is not None and c.points.t:
                name = f"consumer {cid}" if f"consumer {cid}" not in out else f"consumer {cid} (stream {stream})"
                out[name] = c.points.to_json(origin)
        return {"pulsar_permits": out}
