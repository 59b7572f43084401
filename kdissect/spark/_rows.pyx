"""Compiled twin of `project`, `message_row`, `transaction_row` and `columns` in kdissect/spark/rows.py
(see kdissect/accel.py): the same rows, key for key, in the same order, value for value and
type for type.

The rules stay rows.py's and values.py's. A protocol column's value is the first of its paths
that holds one its type accepts; the common cases are read here (a str for a text column, an
int in range for an integer one, a path through plain dicts) and every other value goes through
the column's converter, a path with "*" through values.walk. The generic info map takes
values.json_map's fast path for strings, integers, booleans and nulls, and json_text for the rest.
"""

from kdissect.spark._coerce cimport int32, int64, text

import kdissect.spark.rows as R
import kdissect.spark.values as V
from kdissect import protocols

cdef object _pure_project = R.project, _pure_message_row = R.message_row, _pure_transaction = R._transaction
cdef object _pure_columns = R.columns
cdef object _compiled = R._compiled
cdef dict _COMPILED = R._COMPILED
cdef dict STATUS = R.STATUS
cdef object message_dict = R.message_dict
cdef object extract = R.extract
cdef object walk = V.walk
cdef object json_text = V.json_text
cdef object quote = V._quote
cdef object utc_date = V.utc_date

# Column types whose common values are converted here (others: the column's converter).
cdef enum Kind:
    OTHER, STRING, INT32, INT64
cdef dict KINDS = {"string": STRING, "int": INT32, "bigint": INT64}


cdef object _walk(object node, tuple parts):
    """values.walk over plain dicts; a "*" part, or another kind of mapping, goes to it."""
    cdef Py_ssize_t i
    for i in range(len(parts)):
        if type(node) is not dict:
            return walk(node, parts[i:]) if isinstance(node, dict) else None
        part = parts[i]
        if part == "*":
            return walk(node, parts[i:])
        node = (<dict>node).get(part)
    return node


cdef object _convert(object conv, object t, object v):
    cdef int kind = KINDS.get(t, OTHER) if type(t) is str else OTHER
    cdef object tv = type(v)
    if kind == STRING:
        if tv is str:
            return v
    elif tv is int:
        if kind == INT32:
            return int32(v)
        if kind == INT64:
            return int64(v)
    return conv(v)


def project(c, fields, info):
    """A protocol struct: per column, the first path holding a value of the column's type."""
    if type(c) is not tuple or type(fields) is not dict or type(info) is not dict or len(_empty(c)) != len(c):
        return _pure_project(c, fields, info)  # (the last: two columns of one name)
    return _project(<tuple>c, <dict>fields, <dict>info)


cdef dict _EMPTY = {}  # id of a projection -> (the projection, its struct with every column None)


cdef dict _empty(tuple c):
    """The struct of projection c with every column None, copied to make each of its rows:
    most columns of a message are None, and a copy of a dict of the right size costs less
    than growing one."""
    held = _EMPTY.get(id(c))
    if held is not None and (<tuple?>held)[0] is c:
        return (<tuple?>held)[1]
    if len(_EMPTY) > 64:
        _EMPTY.clear()
    empty = {col[0]: None for col in c}
    _EMPTY[id(c)] = (c, empty)
    return empty


cdef dict _project(tuple c, dict fields, dict info):
    cdef dict out = _empty(c).copy()
    cdef tuple path, col
    for col in c:
        for path in <tuple?>col[1]:
            v = info.get(path[1][0]) if path[0] else _walk(fields, <tuple?>path[1])
            if v is not None:
                value = _convert(col[2], col[3], v)
                if value is not None:
                    out[col[0]] = value
                    break
    return out


cdef list _json_map(dict d):
    cdef list out = []
    for k, v in d.items():
        tv = type(v)
        if tv is str:
            s = quote(v)
        elif tv is int:
            s = int.__repr__(v)
        elif tv is bool:
            s = "true" if v else "false"
        elif v is None:
            s = "null"
        else:
            s = json_text(v)
        out.append((k, s))
    return out


def message_row(m, max_bytes=256, d=None):
    """The `messages` row of m (d: its message_dict, when already made)."""
    d = d if d is not None else message_dict(m, max_bytes)
    info, fields = d["info"], d["fields"]
    if type(info) is not dict:
        return _pure_message_row(m, max_bytes, d)
    ts = d["ts"]
    us = round(ts * 1_000_000)
    row = {
        "capture": m.capture,
        "frame": d["frame"],
        "frames": d["frames"],
        "ts": ts,
        "ts_us": us,
        "ts_ns": round(ts * 1_000_000_000),
        "time": us,
        "stream": d["stream"],
        "src": d["src"],
        "dst": d["dst"],
        "protocol": d["protocol"],
        "kind": d["kind"],
        "summary": d["summary"],
        "length": d["length"],
        "op": text((<dict>info).get("op")),
        "op_code": int32((<dict>info).get("op_code")),
        "version": int32((<dict>info).get("version")),
        "corr": text((<dict>info).get("corr")),
        "error_code": int32((<dict>info).get("error_code")),
        "error": text((<dict>info).get("error")),
        "topic": text((<dict>info).get("topic")),
        "info": _json_map(<dict>info),
        "fields": json_text(fields),
        "diagnostics": d["diagnostics"],
        "match": d["match"],
        "tls": d.get("tls"),
        "date": utc_date(ts),
    }
    protocol = m.protocol
    for proto in protocols.dissectors():
        name = proto.name
        if name == protocol:
            c = _COMPILED.get(name)
            if c is None:
                c = _compiled(name, proto.columns)
            row[name] = project(c, fields, info)
        else:
            row[name] = None
    return row


def transaction_row(m):
    """The `transactions` row m stands for (rows.transaction_row)."""
    kind = m.kind
    if kind == "response":
        return _transaction(m.peer, m)
    if kind == "request" and m.match is None:
        return _transaction(m, None)
    return None


cdef object _fact(dict qinfo, dict rinfo, str name):
    v = qinfo.get(name)
    return rinfo.get(name) if v is None else v


cdef dict _transaction(object req, object resp):
    first = req if req is not None else resp
    rinfo = resp.info if resp is not None else {}
    qinfo = req.info if req is not None else {}
    if type(rinfo) is not dict or type(qinfo) is not dict:
        return _pure_transaction(req, resp)
    match = resp.match if resp is not None and req is not None else None
    rtt = match.rtt if match is not None else None
    row = {
        "capture": first.capture,
        "stream": first.stream,
        "protocol": first.protocol,
        "status": STATUS[(req is not None, resp is not None)],
        "op": text(_fact(qinfo, rinfo, "op")),
        "op_code": int32(_fact(qinfo, rinfo, "op_code")),
        "version": int32(_fact(qinfo, rinfo, "version")),
        "corr": text(_fact(qinfo, rinfo, "corr")),
        "topic": text(_fact(qinfo, rinfo, "topic")),
        "client": req.src if req is not None else first.dst,
        "server": req.dst if req is not None else first.src,
        "expects_response": req.expects_response if req is not None else None,
    }
    _side(row, "request_frame", "request_ts", "request_time", "request_summary", "request_length", req)
    _side(row, "response_frame", "response_ts", "response_time", "response_summary", "response_length", resp)
    ts = first.ts
    row["time"] = round(ts * 1_000_000)
    row["rtt_ms"] = None if rtt is None else round(rtt * 1000.0, 3)
    row["error_code"] = int32(rinfo.get("error_code"))
    row["error"] = text(rinfo.get("error"))
    row["date"] = utc_date(ts)
    return row


cdef void _side(dict row, str frame, str ts, str time, str summary, str length, object m):
    if m is None:
        row[frame] = None
        row[ts] = None
        row[time] = None
        row[summary] = None
        row[length] = None
        return
    t = m.ts
    row[frame] = m.frame
    row[ts] = round(t, 9)
    row[time] = round(t * 1_000_000)
    row[summary] = m.summary
    row[length] = len(m.data)


def columns(list rows, list names):
    """The rows' values column by column: one dict lookup in C a value, a row at a time (rows
    that are not dicts take rows.py's own loop)."""
    cdef list out = [[] for _ in names]
    cdef Py_ssize_t j, k = len(names)
    cdef object row
    for row in rows:
        if type(row) is not dict:
            return _pure_columns(rows, names)
    for row in rows:
        for j in range(k):
            (<list>out[j]).append((<dict>row).get(names[j]))
    return out
