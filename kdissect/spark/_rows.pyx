"""Compiled twin of `projected`, `message_values` and `transaction_values` in
kdissect/spark/rows.py (see kdissect/accel.py): the same rows, value for value and type for type.

The rules stay rows.py's and values.py's. A protocol column's value is the first of its paths
that holds one its type accepts; the common cases are read here (a str for a text column, an
int in range for an integer one, a path through plain dicts) and every other value goes through
the column's converter, a path with "*" through values.walk. The generic info map takes
values.json_map's fast path for strings, integers, booleans and nulls, and json_text for the rest.
"""

from cpython.long cimport PyLong_FromDouble
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_1BYTE_DATA
from libc.math cimport rint
from libc.string cimport memcpy

from kdissect.model cimport Message
from kdissect.render._time cimport round9
from kdissect.spark._coerce cimport int32, int64, round3, text

import kdissect.render.jsonout as J
from kdissect.render._jsonout import fields_json as fields_json_
import kdissect.spark.rows as R
import kdissect.spark.values as V
from kdissect import protocols
from kdissect.model import Match

cdef object _pure_projected = R.projected, _pure_message_values = R.message_values
cdef object records = R.records
cdef object _pure_transaction = R._transaction
cdef object _compiled = R._compiled
cdef dict _COMPILED = R._COMPILED
cdef dict STATUS = R.STATUS
cdef object message_dict = R.message_dict
cdef object fields_dict = J.fields_dict
cdef object fields_json = fields_json_
cdef object walk = V.walk
cdef object json_text = V.json_text
cdef object quote = V._quote
cdef object utc_date = V.utc_date, micros = V.micros, nanos = V.nanos
cdef double FIRST_TIME_S = V.FIRST_TIME_S, END_TIME_S = V.END_TIME_S

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


cdef tuple STRING_ARRAY = ("array", "string")


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
    elif tv is list and t == STRING_ARRAY and _all_str(<list>v):
        return list(<list>v)
    return conv(v)


cdef bint _all_str(list items):
    for x in items:
        if type(x) is not str:
            return False
    return True


def projected(c, fields, info):
    """A protocol struct's values: per column, the first path holding a value of the column's
    type."""
    return _project(c, fields, info)


cdef tuple _project(object c, object fields, object info):
    if type(c) is not tuple or type(fields) is not dict or type(info) is not dict:
        return _pure_projected(c, fields, info)
    plan = _plan(<tuple>c)
    if plan is None:
        return _projected(<tuple>c, <dict>fields, <dict>info)
    return _planned(<tuple>plan, <dict>fields, <dict>info)


cdef tuple _projected(tuple c, dict fields, dict info):
    cdef Py_ssize_t i, n = len(c)
    cdef tuple path, col
    cdef list out = [None] * n
    for i in range(n):
        col = <tuple?>c[i]
        for path in <tuple?>col[1]:
            v = info.get(path[1][0]) if path[0] else _walk(fields, <tuple?>path[1])
            if v is not None:
                value = _convert(col[2], col[3], v)
                if value is not None:
                    out[i] = value
                    break
    return tuple(out)


cdef class _Path:
    """A path of a compiled projection, read as _projected reads it: info's key, or the parts
    into the fields (star: one of them is "*", for _walk)."""
    cdef bint in_info, star
    cdef object key
    cdef tuple parts


cdef class _Column:
    """A column of a compiled projection: its paths, and how _convert treats its type."""
    cdef int kind
    cdef bint string_array
    cdef object conv
    cdef tuple paths


cdef dict _PLANS = {}  # id of a compiled projection -> (it, its plan or None)


cdef object _plan(tuple c):
    """The columns of a compiled projection as _Column objects, their types' kinds found once;
    None when it is not made of (name, paths, converter, type) with paths of (bool, parts), each
    part a str."""
    held = _PLANS.get(id(c))
    if held is not None and (<tuple>held)[0] is c:
        return (<tuple>held)[1]
    plan = _make_plan(c)
    if len(_PLANS) >= 64:
        _PLANS.clear()
    _PLANS[id(c)] = (c, plan)
    return plan


cdef object _make_plan(tuple c):
    cdef list cols = []
    cdef _Column col
    cdef _Path path
    for spec in c:
        if type(spec) is not tuple or len(<tuple>spec) != 4 or type((<tuple>spec)[1]) is not tuple:
            return None
        col = _Column.__new__(_Column)
        t = (<tuple>spec)[3]
        col.kind = KINDS.get(t, OTHER) if type(t) is str else OTHER
        col.string_array = col.kind == OTHER and t == STRING_ARRAY
        col.conv = (<tuple>spec)[2]
        paths = []
        for p in <tuple>(<tuple>spec)[1]:
            if type(p) is not tuple or len(<tuple>p) != 2 or type((<tuple>p)[0]) is not bool:
                return None
            parts = (<tuple>p)[1]
            if type(parts) is not tuple or not parts:
                return None
            for part in <tuple>parts:
                if type(part) is not str:
                    return None
            path = _Path.__new__(_Path)
            path.in_info = (<tuple>p)[0]
            path.key = (<tuple>parts)[0]
            path.parts = <tuple>parts
            path.star = "*" in <tuple>parts
            paths.append(path)
        col.paths = tuple(paths)
        cols.append(col)
    return tuple(cols)


cdef tuple _planned(tuple plan, dict fields, dict info):
    """_projected by a plan: the same reads, without the kinds and the "*" parts looked at
    again."""
    cdef Py_ssize_t i, n = len(plan)
    cdef _Column col
    cdef _Path path
    out = PyTuple_New(n)
    for i in range(n):
        col = <_Column>PyTuple_GET_ITEM(plan, i)
        value = None
        for p in col.paths:
            path = <_Path>p
            if path.in_info:
                v = info.get(path.key)
            elif path.star:
                v = _walk(fields, path.parts)
            else:
                v = _get(fields, path.parts)
            if v is not None:
                value = _converted(col, v)
                if value is not None:
                    break
        Py_INCREF(value)
        PyTuple_SET_ITEM(out, i, value)
    return out


cdef object _get(object node, tuple parts):
    """_walk of parts without a "*"."""
    cdef Py_ssize_t i
    for i in range(len(parts)):
        if type(node) is not dict:
            return walk(node, parts[i:]) if isinstance(node, dict) else None
        node = (<dict>node).get(<object>PyTuple_GET_ITEM(parts, i))
    return node


cdef object _converted(_Column col, object v):
    """_convert(col's converter, col's type, v)."""
    cdef object tv = type(v)
    if col.kind == STRING:
        if tv is str:
            return v
    elif tv is int:
        if col.kind == INT32:
            return int32(v)
        if col.kind == INT64:
            return int64(v)
    elif tv is list and col.string_array and _all_str(<list>v):
        return list(<list>v)
    return col.conv(v)


cdef extern from "Python.h":
    bint PyType_HasFeature(PyTypeObject* t, unsigned long feature)
    unsigned long Py_TPFLAGS_HEAPTYPE
    bint PyUnicode_IS_ASCII(object o)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)


cdef str _quote(str s):
    """values._quote(s) (json's encode_basestring): an ASCII string that holds no control
    character, quote or backslash is itself between quotes."""
    return _quoted(s) if _plain(s) else quote(s)


cdef str _quoted(str s):
    """An ASCII string between quotes, made as one new string."""
    cdef Py_ssize_t n = len(s)
    out = PyUnicode_New(n + 2, 127)
    cdef unsigned char* data = <unsigned char*>PyUnicode_1BYTE_DATA(out)
    data[0] = 0x22
    memcpy(data + 1, PyUnicode_1BYTE_DATA(s), n)
    data[n + 1] = 0x22
    return out


cdef str _string_list(list items):
    """json_text(items): a list of strings that _quote writes as they are joined here, else
    through json_text."""
    cdef list quoted = []
    for x in items:
        if type(x) is not str or not _plain(<str>x):
            return json_text(items)
        quoted.append(_quoted(<str>x))
    return "[" + ",".join(quoted) + "]"


cdef bint _plain(str s):
    """Whether s is ASCII without a control character, quote or backslash: its JSON text is
    itself between quotes."""
    cdef Py_ssize_t i, n = len(s)
    cdef const unsigned char* data
    if not PyUnicode_IS_ASCII(s):
        return False
    data = <const unsigned char*>PyUnicode_1BYTE_DATA(s)
    for i in range(n):
        if data[i] < 0x20 or data[i] == 0x22 or data[i] == 0x5C:
            return False
    return True


cdef list _json_map(dict d, bint skip_none):
    """json_map(d) (skip_none: of d without its None values)."""
    cdef list out = []
    for k, v in d.items():
        if v is None and skip_none:
            continue
        tv = type(v)
        if tv is str:
            s = _quote(<str>v)
        elif tv is int:
            s = str(v)  # (an exact int's str is its repr)
        elif tv is bool:
            s = "true" if v else "false"
        elif v is None:
            s = "null"
        elif tv is list:
            s = _string_list(<list>v)
        else:
            s = json_text(v)
        out.append((k, s))
    return out


def message_values(m, max_bytes=256, d=None):
    """The `messages` row of m (d: its message_dict, when already made; else the members of
    message_dict are read from m as message_dict reads them, without the dict, the fields
    object's text written from the tree)."""
    return tuple(_message_values(m, max_bytes, d))


def combined_values(m, max_bytes=256):
    """rows.combined_values: the message row, its records and its transaction, as one tuple."""
    cdef list row = _message_values(m, max_bytes, None)
    row.append(records.record_values(m, max_bytes))
    row.append(transaction_values(m))
    return tuple(row)


cdef list _message_values(m, max_bytes, d):
    cdef bint unread, skip_none = False
    cdef Message msg
    if d is None:
        if not _slots(m):
            return list(_pure_message_values(m, max_bytes, d))
        msg = <Message>m  # its attributes read from their slots
        capture = msg.capture
        mine = msg.protocol
        frame = msg.frame
        frames = msg.frames
        ts = round9(msg.ts)
        stream = msg.stream
        src = msg.src
        dst = msg.dst
        protocol = mine
        kind = msg.kind
        summary = msg.summary
        length = len(msg.data)
        info = msg.info
        if type(info) is dict:  # (read as message_dict's copy without its None values would be)
            skip_none = True
        else:
            info = {k: v for k, v in info.items() if v is not None}
        tree = msg.fields
        fields_text = (<bytes?>fields_json(tree, max_bytes)).decode("utf-8")
        fields = None  # made for the projection, of the fields it reads (unread: True)
        unread = True
        diagnostics = [x.to_json() for x in msg.diagnostics]
        match = _match(msg.match)
        tls = msg.tls
        tls = tls.to_json() if tls is not None else None
    else:
        info, fields = d["info"], d["fields"]
        if type(info) is not dict:
            return list(_pure_message_values(m, max_bytes, d))
        fields_text = json_text(fields)
        unread = False
        ts = d["ts"]
        frame, frames, stream, src, dst = d["frame"], d["frames"], d["stream"], d["src"], d["dst"]
        protocol, kind, summary, length = d["protocol"], d["kind"], d["summary"], d["length"]
        diagnostics, match, tls = d["diagnostics"], d["match"], d.get("tls")
    us = _micros(ts)
    if d is not None:  # (m read in the pure function's order)
        capture = m.capture
    cdef list row = [
        capture,
        frame,
        frames,
        ts,
        us,
        _nanos(ts),
        us,
        stream,
        src,
        dst,
        protocol,
        kind,
        summary,
        length,
        text((<dict>info).get("op")),
        int32((<dict>info).get("op_code")),
        int32((<dict>info).get("version")),
        text((<dict>info).get("corr")),
        int32((<dict>info).get("error_code")),
        text((<dict>info).get("error")),
        text((<dict>info).get("topic")),
        _json_map(<dict>info, skip_none),
        fields_text,
        diagnostics,
        match,
        tls,
    ]
    if d is not None:
        mine = m.protocol
    for proto in protocols.dissectors():
        name = proto.name
        if name == mine:
            c = _COMPILED.get(name)
            if c is None:
                c = _compiled(name, proto.columns)
            if unread:
                fields = _read_fields(tree, c, max_bytes)
            row.append(_project(c, fields, info))
        else:
            row.append(None)
    row.append(date_of(ts))
    return row


cdef dict _READS = {}  # id of a compiled projection -> (it, the top-level names it reads, or None)


cdef object _reads(tuple c):
    """The names of the fields object a compiled projection can read a value from: the first
    part of each of its paths into the fields, and the names whose derived keys those are (x of
    x_name or x_text, as fields_dict makes them); None when a path reads any member ("*")."""
    held = _READS.get(id(c))
    if held is not None and (<tuple>held)[0] is c:
        return (<tuple>held)[1]
    names = set()
    for col in c:
        for in_info, parts in col[1]:
            if in_info:
                continue
            name = parts[0]
            if name == "*":
                names = None
                break
            names.add(name)
            while name.endswith("_name") or name.endswith("_text"):
                name = name[:-5]
                names.add(name)
        if names is None:
            break
    reads = None if names is None else frozenset(names)
    if len(_READS) >= 64:
        _READS.clear()
    _READS[id(c)] = (c, reads)
    return reads


cdef dict _read_fields(object tree, tuple c, object max_bytes):
    """What projected() reads of fields_dict(tree, max_bytes): the dict of the top-level fields
    whose names the projection reads. A key of fields_dict is made by the fields of its name and
    of the names it derives from, so each key it reads holds what the whole dict holds; a tree
    that is no list of fields with str names gives the whole dict."""
    reads = _reads(c)
    if reads is None or type(tree) is not list:
        return fields_dict(tree, max_bytes)
    cdef list some = []
    for f in <list>tree:
        name = f.name
        if type(name) is not str:
            return fields_dict(tree, max_bytes)
        if name in <frozenset>reads:
            some.append(f)
    return fields_dict(some, max_bytes)


cdef object _Match = Match
# Whether Message is the compiled class whose slots model.pxd declares (not the class of
# model.py's source, which KDISSECT_PURE=1 loads).
cdef bint MESSAGE_SLOTS = not PyType_HasFeature(<PyTypeObject*>Message, Py_TPFLAGS_HEAPTYPE)


cdef inline bint _slots(object m):
    """Whether m's attributes may be read from the slots: exactly a compiled Message (a
    subclass may redefine any attribute)."""
    return type(m) is Message and MESSAGE_SLOTS


cdef object _match(object match):
    """message_dict's match: Match.to_json() of an exact Match, its rtt_ms rounded by round3."""
    if type(match) is not _Match:
        return match.to_json() if match else None
    rtt = match.rtt
    return {"frame": match.frame, "kind": match.kind, "rtt_ms": None if rtt is None else round3(rtt * 1000.0)}


cdef inline object _micros(object ts):
    """values.micros: of a float in range, round() of its product (rint, as round() rounds
    halves to even) as an int."""
    if type(ts) is float and FIRST_TIME_S <= <double>ts < END_TIME_S:
        return PyLong_FromDouble(rint(<double>ts * 1000000.0))
    return micros(ts)


cdef inline object _nanos(object ts):
    """values.nanos: of a float in range, round() of its product, None past what a BIGINT
    holds (its doubles from -2**63 up to 2**63 exclusive are those in range)."""
    cdef double ns
    if type(ts) is float and FIRST_TIME_S <= <double>ts < END_TIME_S:
        ns = rint(<double>ts * 1000000000.0)
        if -9223372036854775808.0 <= ns < 9223372036854775808.0:
            return PyLong_FromDouble(ns)
        return None
    return nanos(ts)


cdef double _day_lo = 1.0, _day_hi = 0.0  # the day of the last date_of, as [lo, hi) in seconds
cdef object _day_date = None


cdef object date_of(object ts):
    """values.utc_date(ts), the date of the last call kept for the times of the same day."""
    global _day_lo, _day_hi, _day_date
    cdef double t = 0.0
    if type(ts) is float:
        t = <double>ts
        if _day_lo <= t < _day_hi:
            return _day_date
    date = utc_date(ts)
    if type(ts) is float and 0.0 <= t < END_TIME_S:
        day = ts // 86400
        _day_lo = day * 86400.0
        _day_hi = (day + 1) * 86400.0
        _day_date = date
    return date


def transaction_values(m):
    """The `transactions` row m stands for (rows.transaction_values)."""
    cdef Message msg
    if not _slots(m):
        kind, peer, match = m.kind, m.peer, m.match
    else:
        msg = <Message>m
        kind, peer, match = msg.kind, msg.peer, msg.match
    if kind == "response":
        return _transaction(peer, m)
    if kind == "request" and match is None:
        return _transaction(m, None)
    return None


cdef object _fact(dict qinfo, dict rinfo, str name):
    v = qinfo.get(name)
    return rinfo.get(name) if v is None else v


cdef tuple _transaction(object req, object resp):
    """_transaction of messages that are each exactly a Message or None (their attributes read
    from their slots); anything else, or info that is no dict, through the pure function."""
    if (req is not None and not _slots(req)) or (resp is not None and not _slots(resp)) or (req is None and resp is None):
        return _pure_transaction(req, resp)
    cdef Message q_msg = <Message>req, r_msg = <Message>resp
    cdef Message first = q_msg if req is not None else r_msg
    rinfo = r_msg.info if resp is not None else {}
    qinfo = q_msg.info if req is not None else {}
    if type(rinfo) is not dict or type(qinfo) is not dict:
        return _pure_transaction(req, resp)
    match = r_msg.match if resp is not None and req is not None else None
    rtt = match.rtt if match is not None else None
    cdef tuple q = _side(q_msg), r = _side(r_msg)
    ts = first.ts
    return (
        first.capture,
        first.stream,
        first.protocol,
        STATUS[(req is not None, resp is not None)],
        text(_fact(qinfo, rinfo, "op")),
        int32(_fact(qinfo, rinfo, "op_code")),
        int32(_fact(qinfo, rinfo, "version")),
        text(_fact(qinfo, rinfo, "corr")),
        text(_fact(qinfo, rinfo, "topic")),
        q_msg.src if req is not None else first.dst,
        q_msg.dst if req is not None else first.src,
        q_msg.expects_response if req is not None else None,
        q[0], r[0], q[1], r[1], q[2], r[2],
        _micros(ts),
        None if rtt is None else round3(rtt * 1000.0),
        int32(rinfo.get("error_code")),
        text(rinfo.get("error")),
        q[3], r[3], q[4], r[4],
        date_of(ts),
    )


cdef tuple NO_SIDE = R.NO_SIDE


cdef tuple _side(Message m):
    if m is None:
        return NO_SIDE
    t = m.ts
    return (m.frame, round9(t), _micros(t), m.summary, len(m.data))
