"""Message -> table rows (dicts keyed by the columns of kdissect.spark.schema). Pure Python.

Everything a row says comes from kdissect.render.jsonout.message_dict, the export contract:
`fields` is the export's fields object as JSON text, `info` a map of the export's info object
(each value as JSON text); the typed columns and protocol structs are projections of the same
values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdissect import accel, protocols
from kdissect.dissect.base import Projection
from kdissect.model import Message
from kdissect.render.jsonout import message_dict
from kdissect.spark.records import extract
from kdissect.spark.sqltypes import SqlType
from kdissect.spark.values import (
    Path,
    as_int,
    as_text,
    converter,
    json_map,
    json_text,
    parse_path,
    utc_date,
    walk,
)

Row = dict[str, Any]


def micros(ts: float) -> int:
    return round(ts * 1_000_000)


def nanos(ts: float) -> int:
    return round(ts * 1_000_000_000)


# A projection ready to apply: per column, its name, its paths (whether a path reads info, and
# its parts) and the function that makes a value of the column's type, with the type itself.
Compiled = tuple[tuple[str, tuple[Path, ...], Callable[[Any], Any], SqlType], ...]


def compile_projection(p: Projection) -> Compiled:
    return tuple((name, tuple(parse_path(path) for path in paths), converter(t), t) for name, t, paths in p)


_COMPILED: dict[str, Compiled] = {}


def _compiled(name: str, p: Projection) -> Compiled:
    c = _COMPILED.get(name)
    if c is None:
        c = _COMPILED[name] = compile_projection(p)
    return c


def project(c: Compiled, fields: dict[str, Any], info: dict[str, Any]) -> Row:
    """A protocol struct: per column, the first path holding a value of the column's type."""
    out: Row = {}
    for name, paths, conv, _ in c:
        value = None
        for in_info, parts in paths:
            v = info.get(parts[0]) if in_info else walk(fields, parts)
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


def transaction_row(m: Message) -> Row | None:
    """The `transactions` row m stands for: a response (`answered` when its request was
    captured, else `no-request`), or a request nothing answered (`unanswered`); None for a
    request whose response has the row, and for events."""
    if m.kind == "response":
        return _transaction(m.peer, m)
    if m.kind == "request" and m.match is None:
        return _transaction(m, None)
    return None


def _transaction(req: Message | None, resp: Message | None) -> Row:
    first = req if req is not None else resp
    assert first is not None
    rinfo = resp.info if resp is not None else {}
    qinfo = req.info if req is not None else {}

    def fact(name: str) -> Any:  # the request's view of the operation, else the response's
        v = qinfo.get(name)
        return rinfo.get(name) if v is None else v

    match = resp.match if resp is not None and req is not None else None
    rtt = match.rtt if match is not None else None
    return {
        "capture": first.capture,
        "stream": first.stream,
        "protocol": first.protocol,
        "status": STATUS[(req is not None, resp is not None)],
        "op": as_text(fact("op")),
        "op_code": as_int(fact("op_code")),
        "version": as_int(fact("version")),
        "corr": as_text(fact("corr")),
        "topic": as_text(fact("topic")),
        "client": req.src if req is not None else first.dst,
        "server": req.dst if req is not None else first.src,
        "expects_response": req.expects_response if req is not None else None,
        **_side("request", req),
        **_side("response", resp),
        "time": micros(first.ts),
        "rtt_ms": None if rtt is None else round(rtt * 1000.0, 3),
        "error_code": as_int(rinfo.get("error_code")),
        "error": as_text(rinfo.get("error")),
        "date": utc_date(first.ts),
    }


STATUS = {(True, True): "answered", (True, False): "unanswered", (False, True): "no-request"}


def _side(name: str, m: Message | None) -> Row:
    """The request_* or response_* columns of a transaction (None when that side is missing)."""
    if m is None:
        return {f"{name}_frame": None, f"{name}_ts": None, f"{name}_time": None,
                f"{name}_summary": None, f"{name}_length": None}
    return {f"{name}_frame": m.frame, f"{name}_ts": round(m.ts, 9), f"{name}_time": micros(m.ts),
            f"{name}_summary": m.summary, f"{name}_length": len(m.data)}


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
    return [{**common, **r} for r in recs]


def payload_bytes(row: Row) -> int:
    """The key and value bytes a row holds (in its records, for a combined row)."""
    recs = row.get("_records", (row,))
    return sum(len(r.get("value") or b"") + len(r.get("key") or b"") for r in recs)


def columns(rows: list[Row], names: list[str]) -> list[list[Any]]:
    """The rows' values column by column (None where a row has no such key)."""
    return [[row.get(name) for row in rows] for name in names]


def combined_row(m: Message, max_bytes: int = 256) -> Row:
    """One pass for all three tables: the message row with its records (their own columns:
    schema.combined_columns) and transaction."""
    row = message_row(m, max_bytes)
    row["_records"] = extract(m, max_bytes)
    row["_transaction"] = transaction_row(m)
    return row


LAYER_ROWS = {
    "messages": lambda m, mb: [message_row(m, mb)],
    "transactions": lambda m, mb: [r for r in (transaction_row(m),) if r is not None],
    "records": record_rows,
}


accel.bind(globals(), "kdissect.spark._rows", ("project", "message_row", "transaction_row", "columns"))
