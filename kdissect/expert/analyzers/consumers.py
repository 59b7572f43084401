"""Kafka consumers: lag per group, topic and partition (Fetch positions against the high
watermark; committed offsets against the latest end offset known), rebalances per group (classic
JoinGroup/SyncGroup generations and KIP-848 ConsumerGroupHeartbeat member epochs, who joined and
left and why), max.poll stalls (a member that stopped fetching for longer than its rebalance
timeout, then rejoined or was forgotten), partition moves between members, and commits that go
backwards.

A Fetch names no group: a fetching client is tied to its group by the client id its group
requests carry; until one is seen the client id stands for the group.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.expected import EXPECTED_ERRORS
from kdissect.analysis.stats import error_of, request_facts
from kdissect.analysis.throughput import short_name
from kdissect.expert.catalogue import Finding, Kind
from kdissect.expert.series import Clock, Points
from kdissect.expert.tree import elements, integer, number, put, text, top, value
from kdissect.model import STRUCT, Field, Message, Severity
from kdissect.text import plural

PROTOCOL = "kafka"
LAG_WARN_RECORDS = 1000  # lag at the end above this, and not shrinking: a warning
LAG_NOTE_RECORDS = 100  # lag that stayed at least this high over the last quarter: a note
SHRINK_SHARE = 0.9  # the lag shrinks when it ends below this share of where the last quarter began
REBALANCE_WARN = 3  # rebalances in one capture that make the group's finding a warning
STALL_REJOIN = ("JoinGroup", "LeaveGroup", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_MEMBER_EPOCH")
# Answers that end a member's place in its group: they raise the group's finding.
FENCING = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID", "FENCED_MEMBER_EPOCH"})
# The answers to group requests that belong to a rebalance (other errors are no rebalance's).
REBALANCE_ERRORS = FENCING | {"REBALANCE_IN_PROGRESS", "UNRELEASED_INSTANCE_ID", "GROUP_MAX_SIZE_REACHED",
                              "INCONSISTENT_GROUP_PROTOCOL", "STALE_MEMBER_EPOCH", "UNSUPPORTED_ASSIGNOR"}
GROUP_OPS = frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "ConsumerGroupHeartbeat"})
ANSWERED_OPS = GROUP_OPS | {"LeaveGroup"}  # whose error answers count for the group
LEAVE_EPOCHS = {-1: "member epoch -1", -2: "member epoch -2, static"}  # ConsumerGroupHeartbeat member_epoch of a leaving member

MAX_GROUPS = 200
MAX_MEMBERS = 500  # per group
MAX_GENERATIONS = 200  # per group; older ones are folded into a count
MAX_EVENTS = 500  # per group, in the rebalances chart
MAX_CLIENTS = 10_000  # client ids tied to groups, fetch positions, fetch gaps
MAX_PARTITIONS = 20_000  # positions, end offsets, commits, owners
MAX_SERIES = 500  # lag series
POINTS = 1000  # points per lag series
MAX_LISTED = 50  # moves, commits, partitions, stalls listed in a finding's values
REJOIN_EVENTS = 16  # per client: the latest rejoins and fencing answers, evidence for stalls

TP = tuple[str, int]

LAG = Kind("kafka.consumer.lag", Severity.WARNING, "consumer", "Consumer lag",
           "Compare the consumers' fetch rate with the producers' (records per second per partition); "
           "add consumers (up to the partition count) or speed up processing; check the group is not "
           "rebalancing or stalled.")
REBALANCE = Kind("kafka.consumer.rebalance", Severity.NOTE, "consumer", "Consumer group rebalances",
                 "Every rebalance pauses consumption. Look at why members join and leave: session.timeout.ms "
                 "and heartbeat.interval.ms for members that miss heartbeats, max.poll.interval.ms for slow "
                 "processing, group.instance.id (static membership) for restarts, and the cooperative-sticky "
                 "assignor or KIP-848 (group.protocol=consumer) to avoid stop-the-world rebalances.")
MAX_POLL = Kind("kafka.consumer.max_poll_stall", Severity.WARNING, "consumer", "Consumer stalled past max.poll.interval.ms",
                "The application did not call poll() within max.poll.interval.ms (the JoinGroup's "
                "rebalance_timeout_ms), so the member was dropped and rejoined: process faster, lower "
                "max.poll.records, or raise max.poll.interval.ms.")
ASSIGNMENT = Kind("kafka.consumer.assignment", Severity.NOTE, "consumer", "Partitions moved between members",
                  "A moved partition is consumed from its last committed offset by its new owner: records "
                  "processed but not committed by the old owner are processed again.")
COMMIT_BACK = Kind("kafka.consumer.commit_backwards", Severity.WARNING, "consumer", "Committed offset went backwards",
                   "A commit below the group's previous commit rewinds the group: records are consumed again after "
                   "a restart or rebalance. Look for an offset reset (auto.offset.reset, a seek), a stale commit "
                   "sent after a rebalance by the partition's previous owner, or two groups sharing a group id.")


# -- lag ------------------------------------------------------------------------------------------

@dataclass(slots=True)
class LagSeries:
    """The lag of one partition seen by one client (fetch) or one group (commits)."""

    points: Points = field(default_factory=lambda: Points(POINTS))
    end: int = 0
    end_ts: float = 0.0
    max: int = -1
    max_ts: float = 0.0
    position: int = 0
    hw: int = 0
    frames: list[int] = field(default_factory=list)  # where the maximum and the end were seen

    def add(self, ts: float, lag: int, position: int, hw: int, frame: int) -> None:
        self.points.add(ts, lag)
        self.end, self.end_ts, self.position, self.hw = lag, ts, position, hw
        if lag > self.max:
            self.max, self.max_ts = lag, ts
            self.frames = [frame]
        self.frames = self.frames[:1] + [frame]


@dataclass(slots=True)
class LagVerdict:
    severity: Severity
    why: str


def merge_series(parts: list[LagSeries]) -> LagSeries:
    """One series from several (the clients that fetched a partition in turn), in time order."""
    if len(parts) == 1:
        return parts[0]
    out = LagSeries()
    for t, v in sorted((t, v) for s in parts for t, v in zip(s.points.t, s.points.v, strict=True)):
        out.points.add(t, v)
    last = max(parts, key=lambda s: s.end_ts)
    top = max(parts, key=lambda s: s.max)
    out.end, out.end_ts, out.position, out.hw = last.end, last.end_ts, last.position, last.hw
    out.max, out.max_ts = top.max, top.max_ts
    out.frames = top.frames[:1] + last.frames[-1:]
    return out


def judge_lag(s: LagSeries) -> LagVerdict | None:
    """Whether a lag series is worth a finding, and how bad it is."""
    ts, vs = s.points.t, s.points.v
    window = [v for t, v in zip(ts, vs, strict=True) if t >= ts[-1] - (ts[-1] - ts[0]) / 4] if ts else []
    shrinking = len(window) > 1 and s.end <= SHRINK_SHARE * window[0]
    if s.end > LAG_WARN_RECORDS and not shrinking:
        return LagVerdict(Severity.WARNING, "and not shrinking")
    if s.end > LAG_WARN_RECORDS:
        return LagVerdict(Severity.NOTE, "and shrinking")
    if s.end >= LAG_NOTE_RECORDS and len(window) > 1 and min(window) >= LAG_NOTE_RECORDS:
        return LagVerdict(Severity.NOTE, "persistently")
    if s.max > LAG_WARN_RECORDS:
        return LagVerdict(Severity.NOTE, "after a peak")
    return None


# -- groups ---------------------------------------------------------------------------------------

@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str | None = None
    instance_id: str | None = None
    conn: str | None = None  # the client end of the connection its group requests come on
    joined_ts: float | None = None
    last_seen: float | None = None  # its latest heartbeat, commit, sync or join
    session_ms: int | None = None
    rebalance_ms: int | None = None
    left: str | None = None  # the reason it gave (or "left")
    epoch: int | None = None  # KIP-848 member epoch

    def label(self) -> str:
        name = self.client_id or self.member_id or "?"
        return f"{name} (static {self.instance_id})" if self.instance_id else name


@dataclass(slots=True)
class Generation:
    gen: int
    ts: float
    frame: int
    protocol: str | None = None
    members: set[str] = field(default_factory=set)


@dataclass(slots=True)
class Group:
    name: str
    first_ts: float
    last_ts: float
    members: dict[str, Member] = field(default_factory=dict)
    generations: dict[int, Generation] = field(default_factory=dict)
    folded: int = 0  # generations dropped to stay bounded
    protocols: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)
    error_frames: list[int] = field(default_factory=list)
    joins: int = 0
    longest_join: tuple[float, int] = (0.0, 0)  # the slowest JoinGroup answer: seconds, frame
    leaves: list[tuple[str, str]] = field(default_factory=list)  # (member label, reason)
    events: list[dict[str, Any]] = field(default_factory=list)
    dropped_events: int = 0
    frames: list[int] = field(default_factory=list)
    owners: dict[TP, str] = field(default_factory=dict)  # partition -> the member id that last had it
    moves: list[dict[str, Any]] = field(default_factory=list)
    move_count: int = 0
    move_frames: list[int] = field(default_factory=list)
    commits: dict[TP, tuple[int, int]] = field(default_factory=dict)  # (offset, frame)
    backwards: list[dict[str, Any]] = field(default_factory=list)
    backward_count: int = 0

    def member(self, member_id: str) -> Member | None:
        m = self.members.get(member_id)
        if m is None and len(self.members) < MAX_MEMBERS:
            m = self.members[member_id] = Member(member_id)
        return m

    def label(self, member_id: str | None) -> str:
        m = self.members.get(member_id or "")
        return m.label() if m is not None else (member_id or "?")

    def event(self, ts: float, event: str, member: str, generation: int | None, detail: str) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped_events += 1
            return
        self.events.append({"t": ts, "event": event, "member": member, "generation": generation, "detail": detail})

    def generation(self, gen: int, ts: float, frame: int) -> Generation:
        g = self.generations.get(gen)
        if g is None:
            if len(self.generations) >= MAX_GENERATIONS:
                del self.generations[min(self.generations)]
                self.folded += 1
            g = self.generations[gen] = Generation(gen, ts, frame)
            if len(self.frames) < MAX_LISTED:
                self.frames.append(frame)
        return g

    def same_consumer(self, a: str, b: str) -> bool:
        """Whether two member ids are one consumer that rejoined (same client id, same connection)."""
        ma, mb = self.members.get(a), self.members.get(b)
        return ma is not None and mb is not None and ma.conn is not None and \
            (ma.client_id, ma.conn) == (mb.client_id, mb.conn)

    def move(self, tp: TP, old: str, new: str, gen: int | None, frame: int) -> None:
        self.move_count += 1
        if len(self.move_frames) < MAX_LISTED:
            self.move_frames.append(frame)
        if len(self.moves) < MAX_LISTED:
            self.moves.append({"topic": tp[0], "partition": tp[1], "from": self.label(old), "to": self.label(new),
                               "generation": gen})


@dataclass(slots=True)
class FetchGap:
    client_id: str
    ts: float
    frame: int
    timeout_ms: int | None  # the client's rebalance timeout when it sent this Fetch


@dataclass(slots=True)
class Stall:
    client_id: str
    group: str | None
    start: float
    end: float
    timeout_ms: int
    evidence: str
    frames: list[int]


def _assigned(node: Field | None, names: Callable[[Any, Any], str | None]) -> set[TP]:
    """The partitions of a ConsumerProtocol assignment (assigned_partitions) or of a KIP-848
    assignment (topic_partitions, by topic id)."""
    out: set[TP] = set()
    if node is None or node.hint != STRUCT:
        return out
    for t in (*elements(node, "assigned_partitions"), *elements(node, "topic_partitions")):
        topic = names(value(t, "topic"), value(t, "topic_id"))
        if topic is None:
            continue
        for p in elements(t, "partitions"):
            if (i := integer(p.value)) is not None and len(out) < MAX_PARTITIONS:
                out.add((topic, i))
    return out


def _follower(req: Message) -> bool:
    """Whether a Fetch comes from a replica (a broker) rather than a consumer."""
    replica = number(req, "replica_id")
    if replica is None:
        replica = number(top(req, "replica_state"), "replica_id")
    return replica is not None and replica >= 0


def _tps(tps: set[TP] | list[TP]) -> str:
    shown = sorted(tps)[:8]
    more = f" +{len(tps) - len(shown)}" if len(tps) > len(shown) else ""
    return ", ".join(f"{t}/{p}" for t, p in shown) + more


class Consumers:
    KINDS: ClassVar[tuple[Kind, ...]] = (LAG, REBALANCE, MAX_POLL, ASSIGNMENT, COMMIT_BACK)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.topic_names: dict[str, str] = {}  # topic id -> name, from Metadata responses
        self.client_group: dict[str, str] = {}
        self.client_rebalance_ms: dict[str, int] = {}
        self.positions: dict[tuple[str, str, int], int] = {}  # (client, topic, partition) -> fetch offset
        self.ends: dict[TP, int] = {}  # latest high watermark or end offset
        self.fetch_lag: dict[tuple[str, str, int], LagSeries] = {}
        self.commit_lag: dict[tuple[str, str, int], LagSeries] = {}
        self.groups: dict[str, Group] = {}
        self.last_fetch: dict[int, FetchGap] = {}  # conversation -> its latest Fetch
        self.rejoins: dict[str, deque[tuple[float, str, int]]] = {}
        self.stalls: list[Stall] = []
        self.handlers: dict[tuple[str, str], Callable[[Message], None]] = {
            ("Metadata", "response"): self._metadata,
            ("Fetch", "request"): self._fetch_request,
            ("Fetch", "response"): self._fetch_response,
            ("ListOffsets", "response"): self._list_offsets,
            ("OffsetCommit", "response"): self._offset_commit,
            ("JoinGroup", "request"): self._join_request,
            ("JoinGroup", "response"): self._join_response,
            ("SyncGroup", "request"): self._sync_request,
            ("SyncGroup", "response"): self._sync_response,
            ("Heartbeat", "request"): self._heartbeat,
            ("LeaveGroup", "request"): self._leave,
            ("ConsumerGroupHeartbeat", "request"): self._cg_heartbeat_request,
            ("ConsumerGroupHeartbeat", "response"): self._cg_heartbeat_response,
        }

    # -- input ---------------------------------------------------------------------------------

    def add(self, m: Message) -> None:
        if m.protocol != PROTOCOL:
            return
        facts = request_facts(m)
        op = text(facts.get("op"))
        if op is None:
            return
        if m.kind == "request" and op in GROUP_OPS:
            self._learn_client(m)
        if m.kind == "response" and op in ANSWERED_OPS:
            self._answer(m, op)
        handler = self.handlers.get((op, m.kind))
        if handler is not None:
            handler(m)

    def conversation_ended(self, conv: Any) -> None:
        index = getattr(conv, "index", None)
        if isinstance(index, int):
            self.last_fetch.pop(index, None)

    def _topic(self, name: Any, topic_id: Any = None) -> str | None:
        if isinstance(name, str) and name:
            return short_name(name)
        return self.topic_names.get(topic_id) if isinstance(topic_id, str) else None

    def _group(self, name: Any, ts: float) -> Group | None:
        if not isinstance(name, str):
            return None
        name = short_name(name)
        g = self.groups.get(name)
        if g is None and len(self.groups) < MAX_GROUPS:
            g = self.groups[name] = Group(name, ts, ts)
        if g is not None:
            g.last_ts = max(g.last_ts, ts)
        return g

    def _member(self, g: Group, m: Message, member_id: Any, instance_id: Any = None) -> Member | None:
        """The group's member that sent request m (its client id and static instance id noted)."""
        if not isinstance(member_id, str) or not member_id:
            return None
        mem = g.member(member_id)
        if mem is not None:
            mem.client_id = text(m.info.get("client_id")) or mem.client_id
            mem.instance_id = text(instance_id) or mem.instance_id
            mem.conn = m.src if m.kind == "request" else m.dst
            mem.last_seen = m.ts
        return mem

    def _learn_client(self, m: Message) -> None:
        cid, group = text(m.info.get("client_id")), text(m.info.get("group")) or text(value(m, "group_id"))
        if cid is not None and group is not None:
            put(self.client_group, cid, group, MAX_CLIENTS)

    def _rejoin(self, cid: Any, ts: float, what: str, frame: int) -> None:
        if not isinstance(cid, str):
            return
        q = self.rejoins.get(cid)
        if q is None:
            if len(self.rejoins) >= MAX_CLIENTS:
                return
            q = self.rejoins[cid] = deque(maxlen=REJOIN_EVENTS)
        q.append((ts, what, frame))

    def _answer(self, m: Message, op: str) -> None:
        """An error answer to a group request: counted for the group, and kept as stall evidence."""
        err = error_of(m)
        peer = m.peer
        if err is None or peer is None or err not in REBALANCE_ERRORS or (PROTOCOL, op, err) in EXPECTED_ERRORS:
            return
        g = self._group(peer.info.get("group") or value(peer, "group_id"), m.ts)
        if g is None:
            return
        g.errors[err] += 1
        if len(g.error_frames) < MAX_LISTED:
            g.error_frames.append(m.frame)
        member = g.label(text(value(peer, "member_id")))
        gen = next((n for k in ("generation_id", "generation_id_or_member_epoch", "member_epoch")
                    if (n := number(peer, k)) is not None), None)
        g.event(m.ts, "error", member, gen, f"{op}: {err}")
        if err in STALL_REJOIN:
            self._rejoin(peer.info.get("client_id"), m.ts, err, m.frame)

    # -- topics, positions, end offsets -------------------------------------------------------

    def _metadata(self, m: Message) -> None:
        for t in elements(m, "topics"):
            tid, name = value(t, "topic_id"), value(t, "name")
            if isinstance(tid, str) and isinstance(name, str) and name and tid.strip("0-"):
                put(self.topic_names, tid, short_name(name), MAX_PARTITIONS)

    def _fetch_positions(self, req: Message) -> Iterator[tuple[str, int, int]]:
        for t in elements(req, "topics"):
            topic = self._topic(value(t, "topic"), value(t, "topic_id"))
            if topic is None:
                continue
            for p in elements(t, "partitions"):
                part, offset = number(p, "partition"), number(p, "fetch_offset")
                if part is not None and offset is not None and offset >= 0:
                    yield topic, part, offset

    def _fetch_request(self, m: Message) -> None:
        cid = text(m.info.get("client_id"))
        if cid is None or _follower(m):
            return
        for topic, part, offset in self._fetch_positions(m):
            put(self.positions, (cid, topic, part), offset, MAX_PARTITIONS)
        self._fetch_gap(m, cid)

    def _fetch_response(self, m: Message) -> None:
        req = m.peer
        cid = text(req.info.get("client_id")) if req is not None else None
        if req is None or cid is None or _follower(req):
            return
        asked = {(t, p): o for t, p, o in self._fetch_positions(req)}
        committed = number(req, "isolation_level") == 1
        for t in elements(m, "responses"):
            topic = self._topic(value(t, "topic"), value(t, "topic_id"))
            if topic is None:
                continue
            for p in elements(t, "partitions"):
                part = number(p, "partition_index")
                if part is not None and not number(p, "error_code"):
                    position = asked.get((topic, part), self.positions.get((cid, topic, part)))
                    self._fetched(m, cid, (topic, part), p, position, committed)

    def _fetched(self, m: Message, cid: str, tp: TP, p: Field, position: int | None, committed: bool) -> None:
        hw, lso, start = number(p, "high_watermark"), number(p, "last_stable_offset"), number(p, "log_start_offset")
        if hw is None or hw < 0:
            return
        put(self.ends, tp, hw, MAX_PARTITIONS)
        if position is None:
            return
        end = lso if committed and lso is not None and lso >= 0 else hw
        lag = max(0, end - max(position, start if start is not None else 0))
        key = (cid, *tp)
        s = self.fetch_lag.get(key)
        if s is None and len(self.fetch_lag) + len(self.commit_lag) < MAX_SERIES:
            s = self.fetch_lag[key] = LagSeries()
        if s is not None:
            s.add(m.ts, lag, position, end, m.frame)

    def _list_offsets(self, m: Message) -> None:
        req = m.peer
        if req is None:
            return
        latest = {(self._topic(value(t, "name")), number(p, "partition_index"))
                  for t in elements(req, "topics") for p in elements(t, "partitions") if number(p, "timestamp") == -1}
        for t in elements(m, "topics"):
            topic = self._topic(value(t, "name"))
            for p in elements(t, "partitions"):
                part, offset = number(p, "partition_index"), number(p, "offset")
                if topic is not None and part is not None and (topic, part) in latest and offset is not None \
                        and offset >= 0 and not number(p, "error_code"):
                    put(self.ends, (topic, part), offset, MAX_PARTITIONS)

    # -- commits ------------------------------------------------------------------------------

    def _offset_commit(self, m: Message) -> None:
        req = m.peer
        if req is None:
            return
        g = self._group(req.info.get("group") or value(req, "group_id"), m.ts)
        if g is None:
            return
        failed = {(self._topic(value(t, "name"), value(t, "topic_id")), number(p, "partition_index"))
                  for t in elements(m, "topics") for p in elements(t, "partitions") if number(p, "error_code")}
        member = text(value(req, "member_id"))
        self._member(g, req, member, value(req, "group_instance_id"))
        for t in elements(req, "topics"):
            topic = self._topic(value(t, "name"), value(t, "topic_id"))
            for p in elements(t, "partitions"):
                part, offset = number(p, "partition_index"), number(p, "committed_offset")
                if topic is not None and part is not None and offset is not None and offset >= 0 \
                        and (topic, part) not in failed:
                    self._committed(g, m, req, (topic, part), offset, member)

    def _committed(self, g: Group, m: Message, req: Message, tp: TP, offset: int, member: str | None) -> None:
        prev = g.commits.get(tp)
        if prev is not None and offset < prev[0]:
            g.backward_count += 1
            if len(g.backwards) < MAX_LISTED:
                g.backwards.append({"topic": tp[0], "partition": tp[1], "previous": prev[0], "offset": offset,
                                    "previous_frame": prev[1], "frame": req.frame, "member": g.label(member),
                                    "t": m.ts})
        put(g.commits, tp, (offset, req.frame), MAX_PARTITIONS)
        hw = self.ends.get(tp)
        if hw is None:
            return
        key = (g.name, *tp)
        s = self.commit_lag.get(key)
        if s is None and len(self.fetch_lag) + len(self.commit_lag) < MAX_SERIES:
            s = self.commit_lag[key] = LagSeries()
        if s is not None:
            s.add(m.ts, max(0, hw - offset), offset, hw, req.frame)

    # -- classic groups -------------------------------------------------------------------------

    def _join_request(self, m: Message) -> None:
        g = self._group(m.info.get("group") or value(m, "group_id"), m.ts)
        cid = text(m.info.get("client_id"))
        session, rebalance = number(m, "session_timeout_ms"), number(m, "rebalance_timeout_ms")
        if cid is not None and (timeout := rebalance or session):
            put(self.client_rebalance_ms, cid, timeout, MAX_CLIENTS)
        self._rejoin(cid, m.ts, "JoinGroup", m.frame)
        if g is None:
            return
        g.joins += 1
        mem = self._member(g, m, value(m, "member_id"), value(m, "group_instance_id"))
        if mem is not None:
            mem.session_ms, mem.rebalance_ms = session, rebalance or session

    def _join_response(self, m: Message) -> None:
        req = m.peer
        gen = number(m, "generation_id")
        if req is None or error_of(m) is not None or gen is None or gen < 0:
            return
        g = self._group(req.info.get("group") or value(req, "group_id"), m.ts)
        member_id = text(value(m, "member_id"))
        if g is None or member_id is None:
            return
        if m.match is not None and m.match.rtt is not None and m.match.rtt > g.longest_join[0]:
            g.longest_join = (m.match.rtt, m.frame)
        mem = g.member(member_id)
        if mem is not None:
            mem.client_id = text(req.info.get("client_id")) or mem.client_id
            mem.instance_id = text(value(req, "group_instance_id")) or mem.instance_id
            mem.conn = req.src
            mem.session_ms = number(req, "session_timeout_ms") or mem.session_ms
            mem.rebalance_ms = number(req, "rebalance_timeout_ms") or mem.session_ms
            mem.joined_ts = mem.last_seen = m.ts
            mem.left = None
        generation = g.generation(gen, m.ts, m.frame)
        generation.protocol = text(value(m, "protocol_name")) or generation.protocol
        if generation.protocol is not None and len(g.protocols) < MAX_LISTED:
            g.protocols.add(generation.protocol)
        for e in elements(m, "members"):
            if isinstance(mid := value(e, "member_id"), str) and len(generation.members) < MAX_MEMBERS:
                generation.members.add(mid)
                self._static(g, mid, value(e, "group_instance_id"))
        generation.members.add(member_id)
        leader = text(value(m, "leader"))
        detail = f"generation {gen}, protocol {generation.protocol or '?'}" + (
            ", leader" if leader == member_id else "")
        g.event(m.ts, "join", g.label(member_id), gen, detail)

    @staticmethod
    def _static(g: Group, member_id: str, instance_id: Any) -> None:
        mem = g.member(member_id)
        if mem is not None and isinstance(instance_id, str):
            mem.instance_id = instance_id

    def _sync_request(self, m: Message) -> None:
        g = self._group(m.info.get("group") or value(m, "group_id"), m.ts)
        gen = number(m, "generation_id")
        if g is None or gen is None or gen < 0:
            return
        self._member(g, m, value(m, "member_id"), value(m, "group_instance_id"))
        generation = g.generation(gen, m.ts, m.frame)
        if isinstance(mid := value(m, "member_id"), str) and len(generation.members) < MAX_MEMBERS:
            generation.members.add(mid)
        for a in elements(m, "assignments"):
            mid = value(a, "member_id")
            if isinstance(mid, str):
                self._assign(g, generation, mid, _assigned(a.child("assignment"), self._topic), m.frame)

    def _sync_response(self, m: Message) -> None:
        req = m.peer
        if req is None or error_of(m) is not None:
            return
        g = self._group(req.info.get("group") or value(req, "group_id"), m.ts)
        gen, mid = number(req, "generation_id"), text(value(req, "member_id"))
        if g is None or gen is None or mid is None:
            return
        tps = _assigned(top(m, "assignment"), self._topic)
        self._assign(g, g.generation(gen, m.ts, m.frame), mid, tps, m.frame)
        g.event(m.ts, "sync", g.label(mid), gen, f"{len(tps)} partitions" + (f": {_tps(tps)}" if tps else ""))

    @staticmethod
    def _assign(g: Group, gen: Generation, member_id: str, tps: set[TP], frame: int) -> None:
        """A member's partitions in a generation (or member epoch): a partition another member had
        last has moved (with the cooperative protocol it was revoked a generation before)."""
        if len(gen.members) < MAX_MEMBERS:
            gen.members.add(member_id)
        for tp in sorted(tps):
            old = g.owners.get(tp)
            if old is not None and old != member_id and not g.same_consumer(old, member_id):
                g.move(tp, old, member_id, gen.gen, frame)
            put(g.owners, tp, member_id, MAX_PARTITIONS)

    def _heartbeat(self, m: Message) -> None:
        g = self._group(m.info.get("group") or value(m, "group_id"), m.ts)
        gen, mid = number(m, "generation_id"), value(m, "member_id")
        if g is None or self._member(g, m, mid, value(m, "group_instance_id")) is None:
            return
        if gen is not None and gen >= 0:
            generation = g.generation(gen, m.ts, m.frame)
            if len(generation.members) < MAX_MEMBERS:
                generation.members.add(mid)

    def _leave(self, m: Message) -> None:
        g = self._group(m.info.get("group") or value(m, "group_id"), m.ts)
        self._rejoin(m.info.get("client_id"), m.ts, "LeaveGroup", m.frame)
        if g is None:
            return
        leaving = [(value(e, "member_id"), value(e, "group_instance_id"), value(e, "reason"))
                   for e in elements(m, "members")] or [(value(m, "member_id"), None, None)]
        for mid, instance, reason in leaving[:MAX_MEMBERS]:
            mem = self._member(g, m, mid, instance)
            why = text(reason) or "left"
            if mem is not None:
                mem.left = why
            label = mem.label() if mem is not None else str(mid)
            if len(g.leaves) < MAX_LISTED:
                g.leaves.append((label, why))
            g.event(m.ts, "leave", label, None, why)

    # -- KIP-848 groups -------------------------------------------------------------------------

    def _cg_heartbeat_request(self, m: Message) -> None:
        g = self._group(m.info.get("group") or value(m, "group_id"), m.ts)
        cid = text(m.info.get("client_id"))
        rebalance = number(m, "rebalance_timeout_ms")
        if cid is not None and rebalance is not None and rebalance > 0:
            put(self.client_rebalance_ms, cid, rebalance, MAX_CLIENTS)
        epoch = number(m, "member_epoch")
        if g is None or epoch is None:
            return
        mem = self._member(g, m, value(m, "member_id"), value(m, "instance_id"))
        if epoch == 0:
            g.joins += 1
            self._rejoin(cid, m.ts, "JoinGroup", m.frame)
            g.event(m.ts, "join", mem.label() if mem is not None else cid or "?", 0, "join (member epoch 0)")
            if (server := text(value(m, "server_assignor"))) and len(g.protocols) < MAX_LISTED:
                g.protocols.add(server)
        elif epoch in LEAVE_EPOCHS:
            why = LEAVE_EPOCHS[epoch]
            label = mem.label() if mem is not None else str(value(m, "member_id"))
            if mem is not None:
                mem.left = why
            if len(g.leaves) < MAX_LISTED:
                g.leaves.append((label, why))
            self._rejoin(cid, m.ts, "LeaveGroup", m.frame)
            g.event(m.ts, "leave", label, epoch, why)
        if mem is not None and rebalance is not None and rebalance > 0:
            mem.rebalance_ms = rebalance

    def _cg_heartbeat_response(self, m: Message) -> None:
        req = m.peer
        epoch = number(m, "member_epoch")
        if req is None or error_of(m) is not None or epoch is None or epoch <= 0:
            return
        g = self._group(req.info.get("group") or value(req, "group_id"), m.ts)
        mid = text(value(m, "member_id")) or text(value(req, "member_id"))
        if g is None or mid is None:
            return
        mem = self._member(g, req, mid, value(req, "instance_id"))
        if mem is None:
            return
        mem.last_seen = m.ts
        assignment = top(m, "assignment")
        tps = _assigned(assignment, self._topic) if assignment is not None and assignment.children else None
        if epoch != mem.epoch or tps is not None:
            before = mem.epoch
            mem.epoch = epoch
            if mem.joined_ts is None or before is None:
                mem.joined_ts = m.ts
            generation = g.generation(epoch, m.ts, m.frame)
            generation.members.add(mid)
            detail = f"member epoch {before if before is not None else '-'} → {epoch}" + (
                f", {len(tps)} partitions" if tps is not None else "")
            g.event(m.ts, "heartbeat", mem.label(), epoch, detail)
            if tps is not None:
                self._assign(g, generation, mid, tps, m.frame)

    # -- max.poll stalls --------------------------------------------------------------------------

    def _fetch_gap(self, m: Message, cid: str) -> None:
        """The time since the previous Fetch on the same connection (a restarted consumer opens
        new ones): a stall when past the rebalance timeout and the consumer rejoined meanwhile."""
        prev = self.last_fetch.get(m.stream)
        gap = FetchGap(cid, m.ts, m.frame, self.client_rebalance_ms.get(cid))
        put(self.last_fetch, m.stream, gap, MAX_CLIENTS)
        if prev is not None and prev.client_id == cid:
            self._check_stall(prev, m.ts, m.frame)

    def _check_stall(self, prev: FetchGap, end: float, frame: int) -> None:
        timeout, cid = prev.timeout_ms, prev.client_id
        if timeout is None or timeout <= 0 or (end - prev.ts) * 1000.0 <= timeout:
            return
        evidence = [(ts, what, f) for ts, what, f in self.rejoins.get(cid, ()) if prev.ts < ts <= end]
        if all(what == "LeaveGroup" for _, what, _ in evidence):  # none, or a consumer that closed
            return
        if len(self.stalls) < MAX_LISTED:
            frames = [prev.frame, *(f for _, _, f in evidence), frame]
            what = ", then ".join(dict.fromkeys(w for _, w, _ in evidence))
            self.stalls.append(Stall(cid, self.client_group.get(cid), prev.ts, end, timeout, what, frames))

    # -- output -------------------------------------------------------------------------------

    def finish(self) -> list[Finding]:
        out = self._lag_findings()
        out += [self._stall_finding(s) for s in self._unique_stalls()]
        for g in self.groups.values():
            out += self._group_findings(g)
        return out

    def _unique_stalls(self) -> list[Stall]:
        """One stall per client and time: a client fetching from several brokers stalls on each
        connection at once (the longest gap of those that overlap is kept)."""
        out: list[Stall] = []
        for s in sorted(self.stalls, key=lambda s: (s.client_id, s.start)):
            last = out[-1] if out else None
            if last is None or last.client_id != s.client_id or s.start >= last.end:
                out.append(s)
            elif s.end - s.start > last.end - last.start:
                out[-1] = s
        return out

    def _lag_series(self) -> dict[tuple[str, str, int], tuple[LagSeries, str]]:
        """Every lag series by (group, topic, partition): fetch lag of the group's clients merged,
        else the committed lag."""
        parts: dict[tuple[str, str, int], list[LagSeries]] = {}
        for (cid, topic, part), s in self.fetch_lag.items():
            parts.setdefault((self.client_group.get(cid, f"client {cid}"), topic, part), []).append(s)
        out = {k: (merge_series(v), "fetch") for k, v in parts.items()}
        for k, s in self.commit_lag.items():
            out.setdefault(k, (s, "committed"))
        return out

    def _lag_findings(self) -> list[Finding]:
        by_topic: dict[tuple[str, str], list[tuple[int, LagSeries, str, LagVerdict]]] = {}
        for (group, topic, part), (s, measure) in self._lag_series().items():
            verdict = judge_lag(s)
            if verdict is not None:
                by_topic.setdefault((group, topic), []).append((part, s, measure, verdict))
        return [self._lag_finding(group, topic, rows) for (group, topic), rows in sorted(by_topic.items())]

    def _lag_finding(self, group: str, topic: str, rows: list[tuple[int, LagSeries, str, LagVerdict]]) -> Finding:
        order = list(Severity)
        rows.sort(key=lambda r: (-order.index(r[3].severity), -r[1].end, -r[1].max, r[0]))
        part, s, measure, verdict = rows[0]
        origin = self.clock.origin or 0.0
        more = f"; {plural(len(rows), 'partition')} of {topic} with lag" if len(rows) > 1 else ""
        summary = (f"group {group} {topic}/{part}: {measure} lag {s.end:,} records at the end {verdict.why} "
                   f"(max {s.max:,} at {s.max_ts - origin:.1f} s; position {s.position:,}, "
                   f"high watermark {s.hw:,}){more}")
        values = {"group": group, "topic": topic, "partition": part, "lag_end": s.end, "lag_max": s.max,
                  "lag_max_t": round(s.max_ts - origin, 6), "position": s.position, "high_watermark": s.hw,
                  "measure": measure, "partitions": {str(p): r.end for p, r, _, _ in rows[:MAX_LISTED]}}
        first_ts = min(r.points.t[0] for _, r, _, _ in rows if r.points.t)
        return LAG.finding(summary, PROTOCOL, first_ts, last_ts=max(r.end_ts for _, r, _, _ in rows),
                           frames=[f for _, r, _, _ in rows for f in r.frames], values=values, count=len(rows),
                           severity=verdict.severity)

    def _stall_finding(self, s: Stall) -> Finding:
        gap = s.end - s.start
        group = s.group or "?"
        summary = (f"client {s.client_id} of group {group} sent no Fetch for {gap:.1f} s, past its "
                   f"rebalance timeout (max.poll.interval.ms) of {s.timeout_ms / 1000:.1f} s; then {s.evidence}")
        values = {"group": s.group, "client_id": s.client_id, "gap_s": round(gap, 3),
                  "rebalance_timeout_ms": s.timeout_ms, "evidence": s.evidence}
        return MAX_POLL.finding(summary, PROTOCOL, s.start, last_ts=s.end, frames=s.frames, values=values)

    def _group_findings(self, g: Group) -> list[Finding]:
        out: list[Finding] = []
        if g.generations or g.leaves or g.errors:
            out.append(self._rebalance_finding(g))
        if g.move_count:
            summary = (f"group {g.name}: {g.move_count} partition moves between members; "
                       + "; ".join(f"{mv['topic']}/{mv['partition']} {mv['from']} → {mv['to']}" for mv in g.moves[:5])
                       + (" …" if g.move_count > 5 else ""))
            out.append(ASSIGNMENT.finding(summary, PROTOCOL, g.first_ts, last_ts=g.last_ts, frames=g.move_frames,
                                          values={"group": g.name, "moves": g.moves, "move_count": g.move_count},
                                          count=g.move_count))
        if g.backward_count:
            b = g.backwards[0]
            summary = (f"group {g.name}: {g.backward_count} commits went backwards; {b['topic']}/{b['partition']} "
                       f"from {b['previous']:,} (frame {b['previous_frame']}) to {b['offset']:,} "
                       f"(frame {b['frame']}) by {b['member']}")
            frames = [f for c in g.backwards for f in (c["previous_frame"], c["frame"])]
            out.append(COMMIT_BACK.finding(summary, PROTOCOL, b["t"], last_ts=g.backwards[-1]["t"], frames=frames,
                                           values={"group": g.name, "commits": [{k: v for k, v in c.items() if k != "t"}
                                                                                for c in g.backwards]},
                                           count=g.backward_count))
        return out

    def _rebalance_finding(self, g: Group) -> Finding:
        gens = sorted(g.generations)
        rebalances = max(0, len(gens) - 1) + g.folded
        causes = self._causes(g, gens)
        joined = sorted({m.label() for m in g.members.values() if m.joined_ts is not None})
        values = {"group": g.name, "rebalances": rebalances, "join_requests": g.joins,
                  "generations": gens[-MAX_LISTED:], "duration_s": round(g.last_ts - g.first_ts, 3),
                  "protocols": sorted(g.protocols), "longest_join_s": round(g.longest_join[0], 3),
                  "joined": joined[:MAX_LISTED], "left": [{"member": w, "reason": r} for w, r in g.leaves],
                  "errors": dict(g.errors.most_common(MAX_LISTED)), "causes": causes[:MAX_LISTED],
                  "events_not_charted": g.dropped_events,
                  "members": {mid: {"client_id": m.client_id, "instance_id": m.instance_id}
                              for mid, m in list(g.members.items())[:MAX_LISTED]}}
        return REBALANCE.finding(_rebalance_summary(g, gens, rebalances, joined, causes), PROTOCOL, g.first_ts,
                                 last_ts=g.last_ts, values=values, count=max(1, rebalances),
                                 frames=[*g.frames, *g.error_frames, *(f for f in g.longest_join[1:] if f)],
                                 severity=_rebalance_severity(g, gens, rebalances, causes))

    def _causes(self, g: Group, gens: list[int]) -> list[str]:
        """Why members dropped out between generations: missed heartbeats (the gap since the
        member was last heard reached its session timeout) or a max.poll stall."""
        out: list[str] = []
        stalled = {s.client_id for s in self.stalls if s.group == g.name}
        for a, b in zip(gens, gens[1:], strict=False):
            nxt = g.generations[b]
            for mid in sorted(g.generations[a].members - nxt.members):
                mem = g.members.get(mid)
                if mem is not None and mem.client_id in stalled:
                    out.append(f"{mem.label()} stalled past max.poll.interval.ms before generation {b}")
                elif mem is not None and _timed_out(mem, nxt.ts) and mem.last_seen is not None and mem.session_ms:
                    out.append(f"{mem.label()} stopped heartbeating {nxt.ts - mem.last_seen:.1f} s before generation "
                               f"{b} (session timeout {mem.session_ms / 1000:.1f} s)")
        return list(dict.fromkeys(out))

    def charts(self) -> dict[str, Any]:
        origin = self.clock.origin
        lag = {f"{group} {topic}/{part}" + ("" if measure == "fetch" else " (committed)"): s.points.to_json(origin)
               for (group, topic, part), (s, measure) in sorted(self._lag_series().items())}
        o = origin or 0.0
        rebalances: dict[str, Any] = {}
        for name, g in sorted(self.groups.items()):
            rebalances[name] = [{**e, "t": round(e["t"] - o, 6)} for e in g.events]
        return {"lag": lag, "rebalances": rebalances}


def _timed_out(mem: Member, ts: float) -> bool:
    """Whether a member that did not leave was last heard a session timeout or more before ts."""
    return mem.left is None and bool(mem.session_ms) and mem.last_seen is not None \
        and (ts - mem.last_seen) * 1000 >= (mem.session_ms or 0)


def _rebalance_summary(g: Group, gens: list[int], rebalances: int, joined: list[str], causes: list[str]) -> str:
    span = f" {gens[0]}→{gens[-1]}" if len(gens) > 1 else f" {gens[0]}" if gens else ""
    parts = [f"group {g.name}: {plural(rebalances, 'rebalance')} ({plural(len(gens) + g.folded, 'generation')}"
             f"{span}) in {g.last_ts - g.first_ts:.1f} s"]
    if g.longest_join[0] >= 1.0:
        parts.append(f"longest JoinGroup wait {g.longest_join[0]:.1f} s")
    if g.protocols:
        parts.append("protocol " + ", ".join(sorted(g.protocols)))
    if joined:
        parts.append("joined: " + ", ".join(joined[:6]) + (" …" if len(joined) > 6 else ""))
    if g.leaves:
        parts.append("left: " + ", ".join(f"{who} ({why})" if why != "left" else who for who, why in g.leaves[:4]))
    parts += causes[:3]
    if g.errors:
        parts.append("answers " + ", ".join(f"{e} ×{n}" for e, n in g.errors.most_common(4)))
    return "; ".join(parts)


def _rebalance_severity(g: Group, gens: list[int], rebalances: int, causes: list[str]) -> Severity | None:
    """A warning for churn (rebalances not explained by members joining for the first time),
    fencing answers or members dropped for timeouts; chat for a group that never rebalanced."""
    if rebalances == 0 and not g.errors:
        return Severity.CHAT
    formed = g.generations[gens[0]].ts if gens else g.first_ts
    newcomers = sum(1 for m in g.members.values() if m.joined_ts is not None and m.joined_ts > formed)
    fenced = any(e in FENCING for e in g.errors)
    return Severity.WARNING if rebalances - newcomers >= REBALANCE_WARN or fenced or causes else None
