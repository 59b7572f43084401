"""Message -> table rows. Pure Python.

A row is a tuple of values in the order of its table's columns (kdissect.spark.schema), a
protocol struct or a record a tuple in the order of its own columns: what the executors turn
into Arrow batches, column by column. `message_row`, `transaction_row`, `record_rows` and
`combined_row` give the same rows as dicts keyed by column name, for reading.

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
from kdissect.spark import records
from kdissect.spark.schema import RECORD_COLUMNS, TRANSACTION_COLUMNS, message_columns
from kdissect.spark.sqltypes import SqlType
from kdissect.spark.values import (
    Path,
    as_int,
    as_text,
    converter,
    json_map,
    json_text,
    micros,
    nanos,
    parse_path,
    utc_date,
    walk,
)

Row = dict[str, Any]  # a row as a dict, keyed by column name
Values = tuple[Any, ...]  # a row as values, in the order of its columns


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


def projected(c: Compiled, fields: dict[str, Any], info: dict[str, Any]) -> Values:
    """A protocol struct's values: per column, the first path holding a value of the column's
    type."""
    out = []
    for _, paths, conv, _ in c:
        value = None
        for in_info, parts in paths:
            v = info.get(parts[0]) if in_info else walk(fields, parts)
            if v is not None:
                value = conv(v)
                if value is not None:
                    break
        out.append(value)
    return tuple(out)


def message_values(m: Message, max_bytes: int = 256, d: dict[str, Any] | None = None) -> Values:
    """The `messages` row of m (d: its message_dict, when already made)."""
    d = d if d is not None else message_dict(m, max_bytes)
    info, fields = d["info"], d["fields"]
    ts = d["ts"]
    return (
        m.capture, d["frame"], d["frames"], ts, micros(ts), nanos(ts), micros(ts), d["stream"], d["src"],
        d["dst"], d["protocol"], d["kind"], d["summary"], d["length"],
        as_text(info.get("op")), as_int(info.get("op_code")), as_int(info.get("version")),
        as_text(info.get("corr")), as_int(info.get("error_code")), as_text(info.get("error")),
        as_text(info.get("topic")),
        json_map(info), json_text(fields), d["diagnostics"], d["match"], d.get("tls"),
        *(projected(_compiled(p.name, p.columns), fields, info) if p.name == m.protocol else None
          for p in protocols.dissectors()),
        utc_date(ts),
    )


def message_row(m: Message, max_bytes: int = 256, d: dict[str, Any] | None = None) -> Row:
    """The `messages` row of m as a dict (its protocol's struct a dict too)."""
    row = dict(zip(_names(message_columns()), message_values(m, max_bytes, d), strict=True))
    for p in protocols.dissectors():
        v = row[p.name]
        if v is not None:
            row[p.name] = dict(zip((col[0] for col in p.columns), v, strict=True))
    return row


def _names(cols: tuple[tuple[str, Any], ...]) -> tuple[str, ...]:
    return tuple(name for name, _ in cols)


def transaction_values(m: Message) -> Values | None:
    """The `transactions` row m stands for: a response (`answered` when its request was
    captured, else `no-request`), or a request nothing answered (`unanswered`); None for a
    request whose response has the row, and for events."""
    if m.kind == "response":
        return _transaction(m.peer, m)
    if m.kind == "request" and m.match is None:
        return _transaction(m, None)
    return None


def transaction_row(m: Message) -> Row | None:
    """transaction_values as a dict."""
    v = transaction_values(m)
    return None if v is None else dict(zip(TRANSACTION_NAMES, v, strict=True))


TRANSACTION_NAMES = _names(TRANSACTION_COLUMNS)


def _transaction(req: Message | None, resp: Message | None) -> Values:
    first = req if req is not None else resp
    assert first is not None
    rinfo = resp.info if resp is not None else {}
    qinfo = req.info if req is not None else {}

    def fact(name: str) -> Any:  # the request's view of the operation, else the response's
        v = qinfo.get(name)
        return rinfo.get(name) if v is None else v

    match = resp.match if resp is not None and req is not None else None
    rtt = match.rtt if match is not None else None
    q, r = _side(req), _side(resp)
    return (
        first.capture, first.stream, first.protocol, STATUS[(req is not None, resp is not None)],
        as_text(fact("op")), as_int(fact("op_code")), as_int(fact("version")), as_text(fact("corr")),
        as_text(fact("topic")),
        req.src if req is not None else first.dst,  # client
        req.dst if req is not None else first.src,  # server
        req.expects_response if req is not None else None,
        q[0], r[0], q[1], r[1], q[2], r[2],  # request_ and response_ frame, ts, time
        micros(first.ts),
        None if rtt is None else round(rtt * 1000.0, 3),
        as_int(rinfo.get("error_code")), as_text(rinfo.get("error")),
        q[3], r[3], q[4], r[4],  # request_ and response_ summary, length
        utc_date(first.ts),
    )


STATUS = {(True, True): "answered", (True, False): "unanswered", (False, True): "no-request"}
NO_SIDE = (None, None, None, None, None)


def _side(m: Message | None) -> Values:
    """A transaction's frame, ts, time, summary and length of one side (None when missing)."""
    if m is None:
        return NO_SIDE
    return m.frame, round(m.ts, 9), micros(m.ts), m.summary, len(m.data)


def record_layer_values(m: Message, max_bytes: int = 256) -> list[Values]:
    """The `records` rows of m: each record's message columns, its own, and the date."""
    recs = records.record_values(m, max_bytes)
    if not recs:
        return []
    ts = round(m.ts, 9)
    common = (m.capture, m.frame, m.stream, ts, micros(ts), micros(ts), m.protocol, m.kind,
              as_text(m.info.get("op")), m.src, m.dst)
    date = (utc_date(ts),)
    return [common + r + date for r in recs]


def record_rows(m: Message, max_bytes: int = 256) -> list[Row]:
    """record_layer_values as dicts."""
    names = _names(RECORD_COLUMNS)
    return [dict(zip(names, r, strict=True)) for r in record_layer_values(m, max_bytes)]


def combined_values(m: Message, max_bytes: int = 256) -> Values:
    """One pass for all three tables (schema.combined_columns): the message row, its records
    (their own columns) and its transaction."""
    return (*message_values(m, max_bytes), records.record_values(m, max_bytes), transaction_values(m))


def combined_row(m: Message, max_bytes: int = 256) -> Row:
    """combined_values as a dict (records and transaction as dicts too)."""
    row = message_row(m, max_bytes)
    row["_records"] = records.extract(m, max_bytes)
    row["_transaction"] = transaction_row(m)
    return row


# The rows of the data source's layers (schema.layer_columns).
LAYER_ROWS = {
    "messages": lambda m, mb: [message_values(m, mb)],
    "transactions": lambda m, mb: [r for r in (transaction_values(m),) if r is not None],
    "records": record_layer_values,
}


accel.bind(globals(), "kdissect.spark._rows", ("projected", "message_values", "transaction_values", "combined_values"))
