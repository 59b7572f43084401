"""ZooKeeper sessions: sessions that expired (a re-attach refused, or a SessionExpired answer),
connections the server closed without the client's closeSession, reconnect storms (many
ConnectRequests from one client host or for one session in a short window) and watch storms
(many notifications for one path prefix and event type in a short window). Error bursts in
general (ConnectionLoss and the like) are the broker analyzer's."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.stats import bounded
from kdissect.expert.catalogue import MAX_EVIDENCE, Evidence, Finding, Kind
from kdissect.expert.series import Clock
from kdissect.expert.tree import host_of, integer, number, put, text
from kdissect.model import Message, Severity

RECONNECT_STORM = 10  # ConnectRequests from one client host, or for one session...
RECONNECT_WINDOW_S = 10.0  # ...within this many seconds make a reconnect storm
WATCH_STORM = 50  # notifications for one path prefix and event type...
WATCH_WINDOW_S = 10.0  # ...within this many seconds make a watch storm
PREFIX_DEPTH = 2  # path components that name a watch storm's prefix: /brokers/ids
MAX_KEYS = 1000  # clients, sessions, path prefixes tracked; the others share OTHER
MAX_STREAMS = 10_000  # connections followed at once
MAX_EVENTS = 2000  # points of the sessions chart
MAX_NAMED = 10  # sessions a finding names
OTHER = "(other)"
EXPIRED = "SessionExpired"
MASK = 0xFFFFFFFFFFFFFFFF

KIND_EXPIRED = Kind(
    "zookeeper.session_expired", Severity.ERROR, "zookeeper", "ZooKeeper session expired",
    "The server dropped the session after hearing nothing for longer than its timeout: its ephemeral znodes "
    "and watches are gone (a Kafka broker leaves the cluster, a lock is lost). Look for long GC pauses, a "
    "stopped or overloaded client, or network trouble; raise the session timeout if pauses are expected.")
KIND_SERVER_CLOSED = Kind(
    "zookeeper.server_closed", Severity.WARNING, "zookeeper", "ZooKeeper connection closed by the server",
    "The server ended the connection without a closeSession from the client: an expired session, too many "
    "connections from one host (maxClientCnxns), a request over jute.maxbuffer, or a server restart. Check "
    "the server log at that time.")
KIND_RECONNECT_STORM = Kind(
    "zookeeper.reconnect_storm", Severity.WARNING, "zookeeper", "ZooKeeper reconnect storm",
    "A client connects again and again: it cannot keep a connection (refused re-attach, server closing "
    "connections, a load balancer in between) or many clients restart at once. Check the client's log "
    "and the server's connection limits.")
KIND_WATCH_STORM = Kind(
    "zookeeper.watch_storm", Severity.WARNING, "zookeeper", "ZooKeeper watch storm",
    "Many watch notifications fire together (a herd effect): many clients watch the same znodes, or a "
    "subtree changes fast. Watch fewer nodes, use sequential lock recipes that watch one predecessor, or "
    "batch the changes.")


def session_hex(sid: int) -> str:
    return f"0x{sid & MASK:x}"


def prefix_of(path: str) -> str:
    """The first PREFIX_DEPTH components of a znode path: /brokers/ids/3 -> /brokers/ids."""
    parts = [p for p in path.split("/") if p]
    return "/" + "/".join(parts[:PREFIX_DEPTH])


@dataclass(slots=True)
class Burst:
    """Events of one key: whether `threshold` of them ever came within `window` seconds, and
    those that came while they did (`storm`)."""

    threshold: int
    window: float
    recent: deque[tuple[float, int, int]] = field(default_factory=deque)  # (time, frame, stream)
    total: int = 0
    storm: Evidence = field(default_factory=Evidence)

    def add(self, ts: float, frame: int, stream: int) -> None:
        self.total += 1
        recent = self.recent
        recent.append((ts, frame, stream))
        if len(recent) > self.threshold:
            recent.popleft()
        if len(recent) < self.threshold or ts - recent[0][0] > self.window:
            return
        if self.storm.count:
            self.storm.note(ts, frame, stream)
        else:
            for event in recent:
                self.storm.note(*event)


@dataclass(slots=True)
class Conn:
    """One client connection."""

    client: str
    session: int = 0
    timeout_ms: int = 0
    asked: int = 0  # the session id of the pending ConnectRequest (0: a new session)
    last_client_ts: float | None = None
    max_gap: float = 0.0  # the longest time between two of the client's messages
    frames: deque[int] = field(default_factory=lambda: deque(maxlen=5))  # the client's last
    closing: bool = False  # the client sent closeSession
    end: tuple[bool, bool, bool, float] | None = None  # server FIN, client FIN, RST, last packet time


@dataclass(slots=True)
class Expiries:
    """The expired sessions of one client host."""

    # the expiry answers (a session refused twice counts twice), named by the first sessions
    answers: Evidence = field(default_factory=lambda: Evidence(max_names=MAX_NAMED))
    distinct: set[int] = field(default_factory=set)
    silence: float | None = None  # the longest silence before an expiry seen
    timeout_ms: int = 0


class ZooKeeper:
    KINDS: ClassVar[tuple[Kind, ...]] = (KIND_EXPIRED, KIND_SERVER_CLOSED, KIND_RECONNECT_STORM, KIND_WATCH_STORM)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.conns: dict[int, Conn] = {}
        self.ended: deque[int] = deque()
        # session -> the time of its client's last message, its timeout, the longest silence
        self.seen: dict[int, tuple[float, int, float]] = {}
        self.expiries: dict[str, Expiries] = {}
        self.by_host: dict[str, Burst] = {}
        self.by_session: dict[str, Burst] = {}
        self.watches: dict[tuple[str, str], Burst] = {}
        self.closed: list[Finding] = []
        self.events: list[dict[str, Any]] = []

    # -- messages ------------------------------------------------------------------------

    def add(self, m: Message) -> None:
        if m.protocol != "zookeeper":
            return
        op = m.info.get("op")
        if m.kind == "event":
            if op == "notification":
                self._notification(m)
            return
        conn = self._conn(m)
        if conn is None:
            return
        if m.kind == "request":
            self._request(m, conn, op)
        elif op == "connect":
            self._connected(m, conn)
        elif m.info.get("error") == EXPIRED and conn.session:
            self._expired(m, conn, conn.session)

    def _conn(self, m: Message) -> Conn | None:
        conn = self.conns.get(m.stream)
        if conn is None:
            if len(self.conns) >= MAX_STREAMS:
                self._settle(len(self.ended))
            if len(self.conns) >= MAX_STREAMS:
                return None
            conn = self.conns[m.stream] = Conn(m.src if m.kind == "request" else m.dst)
        return conn

    def _request(self, m: Message, conn: Conn, op: Any) -> None:
        if conn.last_client_ts is not None:
            conn.max_gap = max(conn.max_gap, m.ts - conn.last_client_ts)
        conn.last_client_ts = m.ts
        conn.frames.append(m.frame)
        if conn.session and conn.session in self.seen:
            gap = self.seen[conn.session][2]
            self.seen[conn.session] = (m.ts, conn.timeout_ms, max(gap, conn.max_gap))
        if op == "closeSession":
            conn.closing = True
            self.seen.pop(conn.session, None)
            self._event(m.ts, "close", conn.session, conn.client)
        elif op == "connect":
            conn.asked = integer(m.info.get("session_id")) or 0
            table, key = (self.by_session, session_hex(conn.asked)) if conn.asked else \
                (self.by_host, host_of(conn.client))
            bounded(table, key, OTHER, self._reconnects, MAX_KEYS).add(m.ts, m.frame, m.stream)

    @staticmethod
    def _reconnects() -> Burst:
        return Burst(RECONNECT_STORM, RECONNECT_WINDOW_S)

    def _connected(self, m: Message, conn: Conn) -> None:
        asked = conn.asked
        if m.info.get("error") == EXPIRED:
            if asked:
                self._expired(m, conn, asked)
            return
        sid = integer(m.info.get("session_id"))
        if not sid:
            return
        conn.session = sid
        conn.timeout_ms = number(m, "time_out") or 0
        put(self.seen, sid, (m.ts, conn.timeout_ms, self.seen.get(sid, (0.0, 0, 0.0))[2]), MAX_KEYS)
        self._event(m.ts, "reattach" if asked else "connect", sid, conn.client)

    def _expired(self, m: Message, conn: Conn, sid: int) -> None:
        last, timeout, gap = self.seen.pop(sid, (None, conn.timeout_ms, 0.0))
        host = host_of(conn.client)
        e = bounded(self.expiries, host, OTHER, Expiries, MAX_KEYS)
        if len(e.distinct) < MAX_KEYS:
            e.distinct.add(sid)
        if last is not None:
            e.silence = max(e.silence or 0.0, gap, m.ts - last)
        e.timeout_ms = timeout or e.timeout_ms
        e.answers.cite(m.peer.frame if m.peer is not None else None)
        e.answers.add(m, session_hex(sid))
        self._event(m.ts, "expire", sid, conn.client)

    def _notification(self, m: Message) -> None:
        path, event = text(m.info.get("path")), m.info.get("event")  # a key: cut (short_name)
        if path is None or not isinstance(event, str):
            return
        key = (prefix_of(path), event)
        burst = bounded(self.watches, key, (OTHER, OTHER), lambda: Burst(WATCH_STORM, WATCH_WINDOW_S), MAX_KEYS)
        burst.add(m.ts, m.frame, m.stream)

    def _event(self, ts: float, event: str, sid: int, client: str) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append({"t": ts, "event": event, "session": session_hex(sid), "client": client})

    # -- connection ends -------------------------------------------------------------------

    def conversation_ended(self, conv: Any) -> None:
        index, client = getattr(conv, "index", None), getattr(conv, "client", None)
        conn = self.conns.get(index) if isinstance(index, int) else None
        if conn is None or client not in (0, 1):
            return
        fin, rst, last = getattr(conv, "fin", None), getattr(conv, "rst", False), getattr(conv, "last_ts", 0.0)
        if not isinstance(fin, list | tuple) or len(fin) != 2:
            return
        conn.end = (bool(fin[1 - client]), bool(fin[client]), bool(rst), float(last or 0.0))
        self.ended.append(index)  # type: ignore[arg-type]

    def _settle(self, n: int) -> None:
        """Judge and forget the first n ended connections."""
        for _ in range(n):
            conn = self.conns.pop(self.ended.popleft(), None)
            if conn is not None:
                self._judge(conn)

    def _judge(self, conn: Conn) -> None:
        """A finding when the server closed the connection: it sent its FIN and the client did
        not, or the connection ended after the client was silent past its session timeout."""
        if conn.end is None or conn.closing or conn.last_client_ts is None:
            return
        server_fin, client_fin, rst, last = conn.end
        silence = max(conn.max_gap, last - conn.last_client_ts)
        timeout = conn.timeout_ms / 1000.0
        past_timeout = timeout > 0 and silence > timeout
        if not ((server_fin and not client_fin) or ((server_fin or rst) and past_timeout)):
            return
        if len(self.closed) >= MAX_KEYS:
            return
        sid = session_hex(conn.session) if conn.session else None
        what = f"session {sid}" if sid else "connection"
        why = f"; the client was silent {silence:.1f} s" + (f" (session timeout {timeout:g} s)" if timeout else "")
        summary = f"ZooKeeper server closed the {what} of {conn.client} without closeSession{why}"
        self.closed.append(KIND_SERVER_CLOSED.finding(
            summary, "zookeeper", conn.last_client_ts, last_ts=last, frames=conn.frames,
            values={"client": conn.client, "session": sid, "silence_s": round(silence, 3),
                    "timeout_ms": conn.timeout_ms, "rst": rst}))
        if conn.session:
            self._event(last, "close", conn.session, conn.client)

    # -- results ---------------------------------------------------------------------------

    def finish(self) -> list[Finding]:
        self._settle(len(self.ended))
        out = list(self.closed)
        out += [self._expiry(host, e) for host, e in self.expiries.items()]
        out += [self._storm(k, b, "host") for k, b in self.by_host.items() if b.storm.count]
        out += [self._storm(k, b, "session") for k, b in self.by_session.items() if b.storm.count]
        out += [self._watch_storm(k, b) for k, b in self.watches.items() if b.storm.count]
        return out

    @staticmethod
    def _expiry(host: str, e: Expiries) -> Finding:
        sessions, named, count = len(e.distinct), e.answers.names, e.answers.count
        if sessions == 1:
            what = f"ZooKeeper session {named[0]} of {host} expired"
        else:
            names = ", ".join(named) + (", …" if sessions > len(named) else "")
            what = f"{sessions} ZooKeeper sessions of {host} expired ({names})"
        facts = [f"re-attach refused {count} times"] if count > sessions else []
        if e.silence is not None:
            facts.append(f"the client was silent {e.silence:.1f} s")
        if e.timeout_ms:
            facts.append(f"session timeout {e.timeout_ms / 1000:g} s")
        summary = what + (f": {', '.join(facts)}" if facts else "")
        return KIND_EXPIRED.finding(
            summary, "zookeeper", evidence=e.answers,
            values={"client": host, "sessions": named, "expired": sessions, "refusals": count,
                    "silence_s": None if e.silence is None else round(e.silence, 3), "timeout_ms": e.timeout_ms})

    @staticmethod
    def _storm(key: str, b: Burst, by: str) -> Finding:
        storm = b.storm
        span = (storm.last_ts or 0.0) - (storm.first_ts or 0.0)
        what = f"client {key} opened {storm.count} new sessions" if by == "host" else \
            f"session {key} re-attached {storm.count} times"
        summary = (f"ZooKeeper reconnect storm: {what} in {span:.1f} s "
                   f"({RECONNECT_STORM} ConnectRequests within {RECONNECT_WINDOW_S:g} s make a storm)")
        return KIND_RECONNECT_STORM.finding(
            summary, "zookeeper", evidence=storm,
            values={by: key, "connects": storm.count, "total": b.total, "span_s": round(span, 3),
                    "threshold": RECONNECT_STORM, "window_s": RECONNECT_WINDOW_S})

    @staticmethod
    def _watch_storm(key: tuple[str, str], b: Burst) -> Finding:
        prefix, event = key
        storm = b.storm
        span = (storm.last_ts or 0.0) - (storm.first_ts or 0.0)
        conns = len(storm.streams)
        summary = (f"ZooKeeper watch storm: {storm.count} {event} notifications under {prefix} in {span:.1f} s "
                   f"to {conns}{'+' if conns >= MAX_EVIDENCE else ''} connections")
        return KIND_WATCH_STORM.finding(
            summary, "zookeeper", evidence=storm,
            values={"prefix": prefix, "event": event, "notifications": storm.count, "total": b.total,
                    "span_s": round(span, 3), "connections": conns, "threshold": WATCH_STORM,
                    "window_s": WATCH_WINDOW_S})

    def charts(self) -> dict[str, Any]:
        origin = self.clock.origin or 0.0
        return {"zookeeper_sessions": [dict(e, t=round(e["t"] - origin, 6)) for e in self.events]}
