"""Stats -> plain data (the `stats --format json` schema, docs/stats.md), sorted for reading."""

from __future__ import annotations

from typing import Any

from kdissect.analysis.stats import ConvStats, Flow, PathStats, Stats, TopicStats


def _flow(f: Flow) -> dict[str, int]:
    return {"records": f.records, "bytes": f.bytes}


def _mean(total: float, n: int) -> float | None:
    return round(total / n, 3) if n else None


def ops_rows(s: Stats) -> list[dict[str, Any]]:
    rows = []
    for (proto, op, version), o in sorted(s.ops.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or -1)):
        rows.append({
            "protocol": proto, "op": op, "version": version, "requests": o.requests,
            "responses": o.responses, "events": o.events, "unanswered": o.unmatched, "bytes": o.bytes,
            "errors": dict(o.errors.most_common()), "error_count": sum(o.errors.values()),
            "expected": dict(o.expected.most_common()), "expected_count": sum(o.expected.values()),
            "response_time_ms": o.rtt.to_json(),
            "long_polls": o.long_polls.count, "long_poll_time_ms": o.long_polls.to_json(),
        })
    return rows


def topic_rows(s: Stats) -> list[dict[str, Any]]:
    """Per topic and partition; rows keyed by a topic id whose name is known merge into the name."""
    merged: dict[tuple[str, int | None], TopicStats] = {}
    for (t, p), v in s.topics.items():
        row = merged.setdefault((s.topic_names.get(t, t), p), TopicStats())
        for mine, theirs in ((row.produced, v.produced), (row.fetched, v.fetched)):
            mine.messages += theirs.messages
            mine.records += theirs.records
            mine.bytes += theirs.bytes
    return [{"topic": t, "partition": p, "produced": _flow(v.produced), "fetched": _flow(v.fetched)}
            for (t, p), v in sorted(merged.items(), key=lambda kv: (kv[0][0], kv[0][1] if kv[0][1] is not None else -1))]


def topic_message_rows(s: Stats) -> list[dict[str, Any]]:
    return [{"protocol": proto, "topic": t, "requests": v.requests, "responses": v.responses, "events": v.events,
             "errors": v.errors, "bytes": v.bytes}
            for (proto, t), v in sorted(s.topic_messages.items(), key=lambda kv: (kv[0][0], kv[0][1]))]


def client_rows(s: Stats) -> list[dict[str, Any]]:
    return [{"protocol": proto, "client_id": cid, "requests": c.requests, "bytes_sent": c.bytes_sent,
             "bytes_received": c.bytes_received, "errors": c.errors, "produced": _flow(c.produced)}
            for (proto, cid), c in sorted(s.clients.items(), key=lambda kv: (-kv[1].requests, kv[0]))]


def path_rows(s: Stats) -> list[dict[str, Any]]:
    def row(key: tuple[str, str, str], p: PathStats) -> dict[str, Any]:
        return {"protocol": key[0], "op": key[1], "path": key[2], "count": p.count,
                "errors": dict(p.errors.most_common()), "expected": dict(p.expected.most_common()),
                "mean_response_time_ms": _mean(p.rtt_total, p.rtt_count)}

    return [row(k, p) for k, p in sorted(s.paths.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1]))]


def conversation_rows(s: Stats) -> list[dict[str, Any]]:
    def row(stream: int, c: ConvStats) -> dict[str, Any]:
        return {"stream": stream, "protocol": c.protocol, "client": c.client, "server": c.server,
                "messages": c.messages, "bytes": c.bytes, "errors": c.errors, "expected": c.expected,
                "long_polls": c.long_polls,
                "duration_s": round(c.last_ts - c.first_ts, 6),
                "mean_response_time_ms": _mean(c.rtt_total, c.rtt_count),
                "max_response_time_ms": round(c.rtt_max, 3) if c.rtt_count else None}

    return [row(k, c) for k, c in sorted(s.conversations.items())]


def to_json(s: Stats) -> dict[str, Any]:
    duration = (s.last_ts - s.first_ts) if s.first_ts is not None else 0.0
    return {
        "messages": s.messages,
        "bytes": s.bytes,
        "duration_s": round(duration, 6),
        "protocols": dict(s.protocols.most_common()),
        "operations": ops_rows(s),
        "response_time_ms": {p: sk.to_json() for p, sk in sorted(s.rtt.items())},
        "topics": topic_rows(s),
        "topic_messages": topic_message_rows(s),
        "clients": client_rows(s),
        "paths": path_rows(s),
        "conversations": conversation_rows(s),
        "diagnostics": [{"severity": sev, "key": key, "count": n}
                        for (sev, key), n in s.diagnostics.most_common()],
    }
