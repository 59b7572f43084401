"""The traffic's shape, for the report: I/O graphs (messages and bytes per bin, per protocol
and per topic), response times per operation (points over time and a latency heatmap), and the
top talkers (clients, topics, partitions). It reports no finding of its own."""

from __future__ import annotations

from typing import Any, ClassVar

from kdissect.analysis.report import client_rows, topic_rows
from kdissect.analysis.stats import Stats, bounded, request_facts, topics_of
from kdissect.expert.catalogue import Finding, Kind
from kdissect.expert.series import Bins, Clock, Heatmap, Points
from kdissect.model import Message

MAX_TOPICS = 30  # topics with a series of their own; the others share OTHER
MAX_OPS = 40  # operations with response-time charts of their own
TOP = 10  # rows of each top-talkers table
OTHER = "(other)"


class Traffic:
    KINDS: ClassVar[tuple[Kind, ...]] = ()

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.messages: dict[str, Bins] = {}
        self.bytes: dict[str, Bins] = {}
        self.topic_messages: dict[str, Bins] = {}
        self.topic_bytes: dict[str, Bins] = {}
        self.response_ms: dict[str, Points] = {}
        self.heat: dict[str, Heatmap] = {}
        self.stats = Stats(max_keys=1000)

    def _series(self, table: dict[str, Bins], key: str, cap: int) -> Bins:
        return bounded(table, key, OTHER, lambda: Bins(self.clock), cap)

    def add(self, m: Message) -> None:
        size = len(m.data)
        self._series(self.messages, m.protocol, 16).add(m.ts)
        self._series(self.bytes, m.protocol, 16).add(m.ts, size)
        for t in topics_of(request_facts(m)):
            self._series(self.topic_messages, t, MAX_TOPICS).add(m.ts)
            self._series(self.topic_bytes, t, MAX_TOPICS).add(m.ts, size)
        self.stats.add(m)
        if m.kind == "response" and m.match is not None and m.match.rtt is not None and not self.stats.last_long_poll:
            op = f"{m.protocol} {request_facts(m).get('op') or m.info.get('op') or '?'}"
            if op not in self.response_ms and len(self.response_ms) >= MAX_OPS:
                op = f"{m.protocol} {OTHER}"
            ms = m.match.rtt * 1000.0
            if op not in self.response_ms:
                self.response_ms[op] = Points()
                self.heat[op] = Heatmap(self.clock)
            self.response_ms[op].add(m.ts, round(ms, 3))
            self.heat[op].add(m.ts, ms)

    def conversation_ended(self, conv: Any) -> None:
        return None

    def finish(self) -> list[Finding]:
        self.stats.finish()
        return []

    def charts(self) -> dict[str, Any]:
        origin = self.clock.origin
        rows = topic_rows(self.stats)
        return {
            "io": {
                "messages": {k: v.to_json() for k, v in sorted(self.messages.items())},
                "bytes": {k: v.to_json() for k, v in sorted(self.bytes.items())},
                "topic_messages": {k: v.to_json() for k, v in sorted(self.topic_messages.items())},
                "topic_bytes": {k: v.to_json() for k, v in sorted(self.topic_bytes.items())},
            },
            "response_time": {k: v.to_json(origin) for k, v in sorted(self.response_ms.items())},
            "latency_heatmap": {k: v.to_json() for k, v in sorted(self.heat.items())},
            "top_talkers": {
                "clients": top_rows(client_rows(self.stats), lambda r: r["bytes_sent"] + r["bytes_received"]),
                "topics": top_rows(_by_topic(rows), _volume),
                "partitions": top_rows([r for r in rows if r["partition"] is not None], _volume),
            },
        }


def top_rows(rows: list[dict[str, Any]], weight: Any) -> list[dict[str, Any]]:
    """The TOP heaviest rows, heaviest first (ties: in their order)."""
    return sorted(rows, key=lambda r: -weight(r))[:TOP]


def _volume(r: dict[str, Any]) -> int:
    return int(r["produced"]["bytes"] + r["fetched"]["bytes"])


def _by_topic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Partition rows summed per topic."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = out.setdefault(r["topic"], {"topic": r["topic"], "produced": {"records": 0, "bytes": 0},
                                        "fetched": {"records": 0, "bytes": 0}})
        for way in ("produced", "fetched"):
            for k in ("records", "bytes"):
                t[way][k] += r[way][k]
    return list(out.values())
