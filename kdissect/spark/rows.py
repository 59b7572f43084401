"""Message -> table rows (dicts keyed by the columns of kdissect.spark.schema). Pure Python.

Everything a row says comes from kdissect.render.jsonout.message_dict, the export contract:
`fields` is the export's fields object as JSON text, `info` a map of the export's info object
(each value as JSON text); the typed columns and protocol structs are projections of the same
values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdissect import protocols
from kdissect.dissect.base import Projection
from kdissect.model import Message
from kdissect.render.jsonout import message_dict
from kdissect.spark.records import extract
from kdissect.spark.values import Getter, as_int, as_text, converter, getter, json_map, json_text, utc_date

Row = dict[str, Any]


def micros(ts: float) -> int:
    return round(ts * 1_000_000)


def nanos(ts: float) -> int:
    return round(ts * 1_000_000_000)


Compiled = tuple[tuple[str, tuple[Getter, ...], Callable[[Any], Any]], ...]


def compile_projection(p: Projection) -> Compiled:
    return tuple((name, tuple(getter(path) for path in paths), converter(t)) for name, t, paths in p)


_COMPILED: dict[str, Compiled] = {}


def _compiled(name: str, p: Projection) -> Compiled:
    c = _COMPILED.get(name)
    if c is None:
        c = _COMPILED[name] = compile_projection(p)
    return c


def project(c: Compiled, fields: dict[str, Any], info: dict[str, Any]) -> Row:
    """A protocol struct: per column, the first path holding a value of the column's type."""
    out: Row = {}
    for name, getters, conv in c:
        value = None
        for get in getters:
            v = get(fields, info)
            if v is not None:
                value = conv(v)
                if value is not None:
                    break
        out[name] = value
    return out


def message_row(m: Message, max_bytes: int = 256, d: dict[str, Any] | None = None) -> Row:
    """The `messages` row of m (d: its message_dict, when already made)."""
    d = d if d is not None else message_dict(m, max_bytes)
    info, fields = d["info"], d["fields"]
    ts = d["ts"]
    row: Row = {
        "capture": m.capture,
        "frame": d["frame"],
        "frames": d["frames"],
        "ts": ts,
        "ts_us": micros(ts),
        "ts_ns": nanos(ts),
        "time": micros(ts),
        "stream": d["stream"],
        "src": d["src"],
        "dst": d["dst"],
        "protocol": d["protocol"],
        "kind": d["kind"],
        "summary": d["summary"],
        "length": d["length"],
        **_facts(info),
        "info": json_map(info),
        "fields": json_text(fields),
        "diagnostics": d["diagnostics"],
        "match": d["match"],
        "tls": d.get("tls"),
        "date": utc_date(ts),
    }
    for proto in protocols.dissectors():
        mine = proto.name == m.protocol
        row[proto.name] = project(_compiled(proto.name, proto.columns), fields, info) if mine else None
    return row


def _facts(info: dict[str, Any]) -> Row:
    return {
        "op": as_text(info.get("op")),
        "op_code": as_int(info.get("op_code")),
        "version": as_int(info.get("version")),
        "corr": as_text(info.get("corr")),
        "error_code": as_int(info.get("error_code")),
        "error": as_text(info.get("error")),
        "topic": as_text(info.get("topic")),
    }


def transaction_row(resp: Message) -> Row | None:
    """The `transactions` row of a response matched to its request, else None."""
    req = resp.peer
    if req is None or resp.match is None:
        return None
    rinfo, qinfo = resp.info, req.info

    def fact(name: str) -> Any:  # the request's view of the operation, else the response's
        v = qinfo.get(name)
        return rinfo.get(name) if v is None else v

    rtt = resp.match.rtt
    return {
        "capture": req.capture,
        "stream": req.stream,
        "protocol": req.protocol,
        "op": as_text(fact("op")),
        "op_code": as_int(fact("op_code")),
        "version": as_int(fact("version")),
        "corr": as_text(fact("corr")),
        "topic": as_text(fact("topic")),
        "client": req.src,
        "server": req.dst,
        "request_frame": req.frame,
        "response_frame": resp.frame,
        "request_ts": round(req.ts, 9),
        "response_ts": round(resp.ts, 9),
        "time": micros(req.ts),
        "rtt_ms": None if rtt is None else round(rtt * 1000.0, 3),
        "error_code": as_int(rinfo.get("error_code")),
        "error": as_text(rinfo.get("error")),
        "request_summary": req.summary,
        "response_summary": resp.summary,
        "request_length": len(req.data),
        "response_length": len(resp.data),
        "date": utc_date(req.ts),
    }


def record_rows(m: Message, max_bytes: int = 256) -> list[Row]:
    """The `records` rows of m."""
    recs = extract(m, max_bytes)
    if not recs:
        return []
    ts = round(m.ts, 9)
    common: Row = {
        "capture": m.capture, "frame": m.frame, "stream": m.stream, "ts": ts, "ts_us": micros(ts),
        "time": micros(ts), "protocol": m.protocol, "kind": m.kind, "op": as_text(m.info.get("op")),
        "src": m.src, "dst": m.dst, "date": utc_date(ts),
    }
    return [{**common, "index": r.index, "topic": r.topic, "partition": r.partition, "offset": r.offset,
             "timestamp_ms": r.timestamp_ms, "key": r.key, "value_size": r.value_size,
             "headers": list(r.headers.items())} for r in recs]


def combined_row(m: Message, max_bytes: int = 256) -> Row:
    """One pass for all three tables: the message row with its records and transaction."""
    row = message_row(m, max_bytes)
    row["_records"] = record_rows(m, max_bytes)
    row["_transaction"] = transaction_row(m) if m.peer is not None else None
    return row


LAYER_ROWS = {
    "messages": lambda m, mb: [message_row(m, mb)],
    "transactions": lambda m, mb: [r for r in (transaction_row(m),) if r is not None],
    "records": record_rows,
}
