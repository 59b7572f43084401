"""TCP trouble on the connections that carried a decoded protocol, as Wireshark's TCP expert
info flags it (the transport counts it: stream.tracker, stream.flow.Trouble): retransmitted
segments, zero windows (a receiver that could not keep up) and resets, one finding a connection
and kind, with its stream, endpoints, counts and frames; and the "tcp" chart's rows.

A connection is read when it ends (`conversation_ended`) and kept until the run's end, so its
packets after that (the last ACK, a retransmitted FIN, a RST after the close) count too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kdissect.expert.catalogue import Finding, Kind
from kdissect.expert.series import Clock
from kdissect.expert.tree import integer
from kdissect.model import Message, Severity
from kdissect.text import plural

MAX_CONNECTIONS = 20_000  # decoded connections kept for their later packets; older ones are read then
MAX_TROUBLED = 2_000  # connections with trouble kept for the findings; past it only counted
MAX_FINDINGS = 20  # findings of a kind, the worst connections first; the rest share one more
MAX_ROWS = 200  # rows of the "tcp" chart
RETRANSMISSION_SHARE = 0.01  # of a connection's segments: above it retransmissions are a warning
RETRANSMISSION_COUNT = 10  # retransmissions from which they are a warning whatever the share
RETRANSMISSION_FEW = 3  # fewer than this are a note whatever the share (one lost segment of a short connection)
SERVER_NAME = {"zookeeper": "server"}  # the client's peer, when not called "broker"

RETRANSMISSIONS = Kind(
    "network.retransmissions", Severity.NOTE, "network", "TCP retransmissions",
    "Segments were sent again: lost or delayed on the way (drops, congestion, a saturated link or NIC, "
    "a wrong MTU). Check the network path between the endpoints named and the hosts' interface "
    "counters; a few at a connection's start or end are usually harmless.")
ZERO_WINDOW = Kind(
    "network.zero_window", Severity.WARNING, "network", "TCP zero window",
    "The side named advertised a zero receive window: its application did not read the socket fast "
    "enough and its peer had to stop sending. On a client: slow processing, GC pauses or a full "
    "buffer (fetch sizes, receive.buffer.bytes); on a broker: saturated network threads "
    "(num.network.threads, request queue time) or socket.receive.buffer.bytes.")
RESET = Kind(
    "network.reset", Severity.WARNING, "network", "Connection reset",
    "The connection was aborted, with whatever requests it carried: check the side that sent the reset "
    "(a broker closing idle or unauthenticated connections, connections.max.idle.ms; a client timing "
    "out; a crashed process; a firewall or load balancer's idle timeout).")
RESET_AFTER_CLOSE = Kind(
    "network.reset_after_close", Severity.CHAT, "network", "Reset after close",
    "A reset after the FIN exchange only ends a connection already closed (bytes that came for a closed "
    "socket, or a close with SO_LINGER 0): harmless unless requests were still outstanding.")


@dataclass(slots=True)
class Connection:
    """A decoded connection: its protocol and its latest Conversation (one closed while active
    goes on as another with the same stream and trouble); `earlier` counts the packets of the
    ones before it."""

    protocol: str
    conv: Any
    earlier: int = 0


@dataclass(slots=True)
class Record:
    """A troubled connection, read from its Conversation at the end."""

    stream: int
    protocol: str
    client: str
    server: str
    server_name: str
    client_side: int
    segments: int
    trouble: Any

    def side_name(self, side: int) -> str:
        return "client" if side == self.client_side else self.server_name

    def endpoint(self, side: int) -> str:
        return self.client if side == self.client_side else self.server

    def where(self) -> str:
        return f"{self.protocol} stream {self.stream} (client {self.client}, {self.server_name} {self.server})"

    def values(self) -> dict[str, Any]:
        return {"stream": self.stream, "client": self.client, "server": self.server}

    def by_side(self, count: list[int]) -> dict[str, int]:
        return {"by_client": count[self.client_side], f"by_{self.server_name}": count[1 - self.client_side]}

    def senders(self, count: list[int]) -> str | None:
        """Who sent segments of a kind: "client", the server's name, "both", or None."""
        sides = [self.side_name(s) for s in (0, 1) if count[s]]
        return None if not sides else sides[0] if len(sides) == 1 else "both"


class Network:
    KINDS: ClassVar[tuple[Kind, ...]] = (RETRANSMISSIONS, ZERO_WINDOW, RESET, RESET_AFTER_CLOSE)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.open: dict[int, Connection] = {}  # by stream, oldest first
        self.troubled: list[Record] = []
        self.untold: dict[str, list[int]] = {}  # kind key -> [connections, segments] past MAX_TROUBLED
        self.done = False

    def add(self, m: Message) -> None:
        return None

    def conversation_ended(self, conv: Any) -> None:
        index = getattr(conv, "index", None)
        if not isinstance(index, int):
            return
        known = self.open.get(index)
        if known is not None:
            if known.conv is not conv:
                known.earlier += _int(getattr(known.conv, "packets", 0))
                known.conv = conv
            return
        protocol = _protocol(conv)
        if protocol is None:
            return
        self.open[index] = Connection(protocol, conv)
        if len(self.open) > MAX_CONNECTIONS:
            oldest = next(iter(self.open))
            self._read(oldest, self.open.pop(oldest))

    def finish(self) -> list[Finding]:
        if not self.done:
            for index, conn in self.open.items():
                self._read(index, conn)
            self.open.clear()
            self.done = True
        findings: list[Finding] = []
        for kind, make in ((RETRANSMISSIONS, _retransmissions), (ZERO_WINDOW, _zero_windows),
                           (RESET, _reset), (RESET_AFTER_CLOSE, _reset)):
            found = [f for r in self.troubled if (f := make(kind, r)) is not None]
            found.sort(key=lambda f: (f.severity != Severity.WARNING, -f.count, f.first_ts))
            findings += found[:MAX_FINDINGS]
            findings += _rest(kind, found[MAX_FINDINGS:], self.untold.get(kind.key))
        return findings

    def charts(self) -> dict[str, Any]:
        rows = sorted(self.troubled, key=lambda r: r.stream)[:MAX_ROWS]
        return {"tcp": [{
            "stream": r.stream, "protocol": r.protocol, "client": r.client, "server": r.server,
            "retransmissions": r.trouble.retransmissions.total, "zero_windows": r.trouble.zero_windows.total,
            "reset_by": r.senders(r.trouble.resets.count),
        } for r in rows]}

    def _read(self, index: int, conn: Connection) -> None:
        """Keep a connection that had trouble (or count it, past MAX_TROUBLED)."""
        record = _record(index, conn)
        if record is None:
            return
        if len(self.troubled) < MAX_TROUBLED:
            self.troubled.append(record)
            return
        t = record.trouble
        for key, n in ((RETRANSMISSIONS.key, t.retransmissions.total), (ZERO_WINDOW.key, t.zero_windows.total),
                       (RESET_AFTER_CLOSE.key if t.reset_after_fin else RESET.key, t.resets.total)):
            if n:
                tally = self.untold.setdefault(key, [0, 0])
                tally[0] += 1
                tally[1] += n


def _int(v: Any) -> int:
    return integer(v) or 0


def _protocol(conv: Any) -> str | None:
    """The protocol decoded on a conversation (pipeline.Decoding's dissector), if any."""
    app = getattr(conv, "app", None)
    name = getattr(getattr(app, "dissector", None), "name", None)
    return name if isinstance(name, str) and not getattr(app, "quiet", False) else None


def _record(index: int, conn: Connection) -> Record | None:
    conv = conn.conv
    trouble = getattr(conv, "trouble", None)
    if trouble is None:
        return None
    if not (trouble.retransmissions.total or trouble.zero_windows.total or trouble.resets.total):
        return None
    client = conv.client if conv.client in (0, 1) else 0
    names = conv.names
    return Record(index, conn.protocol, names[client], names[1 - client], SERVER_NAME.get(conn.protocol, "broker"),
                  client, conn.earlier + _int(conv.packets), trouble)


def _retransmissions(kind: Kind, r: Record) -> Finding | None:
    t = r.trouble.retransmissions
    if not t.total:
        return None
    share = t.total / max(r.segments, t.total)
    serious = t.total >= RETRANSMISSION_COUNT or (share > RETRANSMISSION_SHARE and t.total >= RETRANSMISSION_FEW)
    who = ", ".join(f"{n} by the {r.side_name(s)}" for s in (r.client_side, 1 - r.client_side) if (n := t.count[s]))
    return kind.finding(
        f"{r.where()}: {t.total} of its {r.segments} segments retransmitted ({share:.1%}), {who}",
        r.protocol, t.first_ts, last_ts=t.last_ts, frames=t.frames, streams=[r.stream], count=t.total,
        values={**r.values(), "retransmissions": t.total, "segments": r.segments, "share": round(share, 4),
                **r.by_side(t.count)},
        severity=Severity.WARNING if serious else Severity.NOTE)


def _zero_windows(kind: Kind, r: Record) -> Finding | None:
    t = r.trouble.zero_windows
    if not t.total:
        return None
    slow = [s for s in (r.client_side, 1 - r.client_side) if t.count[s]]
    who = " and ".join(f"the {r.side_name(s)} {r.endpoint(s)} ({plural(t.count[s], 'segment')})" for s in slow)
    return kind.finding(
        f"{r.where()}: {who} advertised a zero window: it could not keep up with what it received",
        r.protocol, t.first_ts, last_ts=t.last_ts, frames=t.frames, streams=[r.stream], count=t.total,
        values={**r.values(), "zero_windows": t.total, "slow": r.senders(t.count), **r.by_side(t.count)})


def _reset(kind: Kind, r: Record) -> Finding | None:
    t = r.trouble.resets
    if not t.total or r.trouble.reset_after_fin != (kind is RESET_AFTER_CLOSE):
        return None
    by = r.senders(t.count)
    sender = "both sides" if by == "both" else f"the {by}"
    when = " after its FIN exchange" if kind is RESET_AFTER_CLOSE else ""
    return kind.finding(
        f"{r.where()} was reset by {sender}{when} (frame {t.frames[0]})",
        r.protocol, t.first_ts, last_ts=t.last_ts, frames=t.frames, streams=[r.stream], count=t.total,
        values={**r.values(), "resets": t.total, "reset_by": by, **r.by_side(t.count)})


def _rest(kind: Kind, found: list[Finding], untold: list[int] | None) -> list[Finding]:
    """One finding for the connections of a kind past MAX_FINDINGS (and MAX_TROUBLED)."""
    conns = len(found) + (untold[0] if untold else 0)
    if not conns:
        return []
    segments = sum(f.count for f in found) + (untold[1] if untold else 0)
    first = min((f.first_ts for f in found), default=0.0)
    last = max((f.last_ts for f in found), default=first)
    worst = Severity.WARNING if any(f.severity == Severity.WARNING for f in found) else kind.severity
    return [kind.finding(
        f"{conns} more connections with {kind.title.lower()}: {segments} segments in all",
        found[0].protocol if found else "tcp", first, last_ts=last, streams=[s for f in found for s in f.streams],
        frames=[f.frames[0] for f in found if f.frames], count=segments,
        values={"connections": conns, "segments": segments}, severity=worst)]
