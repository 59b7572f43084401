"""Compiled twin of kdissect/render/jsonout.py (see kdissect/accel.py): the same dicts, lists and
strings for every Field/Row tree and the same exceptions, with C type tests, C loops over byte
strings and direct calls between the tree walkers.

max_bytes: an exact int is read once per call (above the largest Py_ssize_t it cuts nothing,
as in Python; zero or below never cuts); anything else (a bool, an int subclass, a float) runs
the pure function, so odd arguments behave exactly as there. Trees nested deeper than Python's
recursion limit raise RecursionError, as the pure walkers do (not at the same depth: they use
more frames per level)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport (
    Py_UNICODE_ISPRINTABLE,
    PyUnicode_1BYTE_DATA,
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_New,
    PyUnicode_READ,
)
from libc.string cimport memchr, memcpy

from kdissect import accel
from kdissect._model cimport (
    F_CHILDREN,
    F_DISPLAY,
    F_HINT,
    F_NAME,
    F_VALUE,
    R_COLUMNS,
    R_KIDS,
    R_VALUES,
    read_slot,
    reads_field_slots,
    reads_row_slots,
)
from binascii import b2a_base64 as _b2a_base64

from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, RAW, STRUCT, Field, Row
from kdissect.text import plural


cdef extern from "Python.h":
    int Py_EnterRecursiveCall(const char* where) except -1
    void Py_LeaveRecursiveCall()
    const Py_ssize_t PY_SSIZE_T_MAX


cdef str _STRUCT = STRUCT
cdef str _ARRAY = ARRAY
cdef str _RAW = RAW
cdef str _BYTES = BYTES
cdef tuple _ANY_HINTS = (RAW, STRUCT, ARRAY)
cdef frozenset _NAMED = frozenset({ENUM, FLAGS})
cdef object _Field = Field
cdef object _Row = Row
cdef const char* _HEX = b"0123456789abcdef"
cdef str _JSONOUT = "kdissect.render.jsonout"

# How each column of a Row kind becomes JSON, per column list: (name, how) pairs.
cdef enum:
    _AS_IS = 0  # the value is already plain
    _BYTES_OR_FIELD = 1  # a BYTES column
    _ANY_VALUE = 2  # RAW, STRUCT and ARRAY columns
cdef dict _ROW_PLANS = {}


cdef inline Py_ssize_t _limit(object max_bytes) except -2:
    """max_bytes as a cut length (0: no cut), or -1 when it is not an exact int."""
    cdef Py_ssize_t mb
    if type(max_bytes) is not int:
        return -1
    try:
        mb = max_bytes
    except OverflowError:  # beyond Py_ssize_t: below zero never cuts, above cuts nothing
        return 0 if max_bytes < 0 else PY_SSIZE_T_MAX
    return mb if mb > 0 else 0


cdef object _pure(str name):
    return accel.pure(_JSONOUT, name)


cdef bint _is_bytes_like(object v):
    return type(v) is bytes or type(v) is bytearray or type(v) is memoryview


cdef inline bint _plain_type(object v):
    tv = type(v)
    return tv is int or tv is str or tv is bool or v is None


# ---------------------------------------------------------------------------------------------
# Byte strings


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Whether the 8 bytes at p are all printable ASCII (0x20-0x7E): no high bit, no byte below
       0x20, no 0x7F (the word tests of "Bit Twiddling Hacks", hasless and haszero). */
    static CYTHON_INLINE int kdissect_ascii_text8(const unsigned char *p) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t w, del;
        memcpy(&w, p, 8);
        del = w ^ (ones * 0x7F);
        return !(w & highs) && !((w - ones * 0x20) & ~w & highs) && !((del - ones) & ~del & highs);
    }
    """
    bint kdissect_ascii_text8(const unsigned char* p)


cdef object _printable(const unsigned char* data, Py_ssize_t n):
    """printable() of the n bytes at data: the text when it is UTF-8 made of printable characters,
    tab, CR and LF, else None."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c
    cdef bint ascii = True
    cdef Py_UCS4 ch
    cdef unsigned int kind
    cdef void* udata
    while i < n:
        if n - i >= 8 and kdissect_ascii_text8(data + i):
            i += 8
            continue
        c = data[i]
        if c >= 0x80:
            ascii = False
            break
        if (c < 0x20 or c == 0x7F) and c != 0x09 and c != 0x0A and c != 0x0D:
            return None
        i += 1
    if ascii:
        s = PyUnicode_New(n, 127)
        memcpy(PyUnicode_1BYTE_DATA(s), data, n)
        return s
    try:
        s = PyUnicode_DecodeUTF8(<char*>data, n, NULL)
    except UnicodeDecodeError:
        return None
    kind = PyUnicode_KIND(s)
    udata = PyUnicode_DATA(s)
    for i in range(PyUnicode_GET_LENGTH(s)):
        ch = PyUnicode_READ(kind, udata, i)
        if not Py_UNICODE_ISPRINTABLE(ch) and ch != 0x09 and ch != 0x0A and ch != 0x0D:
            return None
    return s


cdef str _hex(const unsigned char* data, Py_ssize_t n):
    """bytes.hex() of the n bytes at data."""
    cdef Py_ssize_t i
    s = PyUnicode_New(n * 2, 127)
    cdef unsigned char* out = <unsigned char*>PyUnicode_1BYTE_DATA(s)
    for i in range(n):
        out[0] = _HEX[data[i] >> 4]
        out[1] = _HEX[data[i] & 0x0F]
        out += 2
    return s


cdef str _cut_marker(Py_ssize_t size, Py_ssize_t mb):
    """What a value cut at mb ends with ("" when it is not cut)."""
    if mb > 0 and size > mb:
        return f"…(+{plural(size - mb, 'byte')})"
    return ""


cdef str _bytes_value(bytes b, Py_ssize_t mb):
    """bytes_value() of a bytes object, mb >= 0."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    part = b[:mb] if cut else b
    return (<bytes>_b2a_base64(part, newline=False)).decode("ascii") + cut


cdef object _bytes_text(bytes b, Py_ssize_t mb):
    """bytes_text() of a bytes object, mb >= 0."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    text = _printable(<const unsigned char*>PyBytes_AS_STRING(b), mb if cut else size)
    return None if text is None else <str>text + cut


cdef str _text_or_hex(bytes b, Py_ssize_t mb):
    """text_or_hex() of a bytes object, mb >= 0."""
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(b)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    cdef Py_ssize_t n = mb if cut else size
    text = _printable(data, n)
    return (<str>text if text is not None else _hex(data, n)) + cut


def printable(b):
    """The text of b when it is printable UTF-8, else None."""
    if type(b) is bytes:
        return _printable(<const unsigned char*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if s.isprintable() or s.translate({9: None, 13: None, 10: None}).isprintable():
        return s
    return None


def bytes_value(b, max_bytes):
    """Bytes for JSON: standard base64 (the exact bytes), cut at max_bytes (0: no cut)."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("bytes_value")(b, max_bytes)
    return _bytes_value(<bytes>b, mb)


def bytes_text(b, max_bytes):
    """The text form of bytes for JSON (`<name>_text`): when they are printable UTF-8."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("bytes_text")(b, max_bytes)
    return _bytes_text(<bytes>b, mb)


def text_or_hex(b, max_bytes):
    """Bytes as one readable string: printable text as is, else lowercase hex; cut at max_bytes."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("text_or_hex")(b, max_bytes)
    return _text_or_hex(<bytes>b, mb)


# ---------------------------------------------------------------------------------------------
# Trees
#
# Field and Row keep their attributes in __slots__. For objects of exactly those classes the
# walkers read the slots at their offsets in the object, as the slots' member descriptors do,
# when kdissect/_model.pyx found the layout it expects at import (reads_field_slots,
# reads_row_slots); an empty slot goes to getattr, which raises the AttributeError. Anything
# else, a subclass included, goes through getattr. Row.children is a property: it is always
# called.


cdef object _scalar(object v, Py_ssize_t mb):
    """field_value() of a Field without hint and children holding v, not a plain type."""
    if _is_bytes_like(v):
        return _bytes_value(v if type(v) is bytes else bytes(v), mb)
    if type(v) is float and v != v:
        return None
    return v


cdef object _any_value(object v, Py_ssize_t mb):
    if isinstance(v, _Field):
        return _field_value(v, mb)
    if _plain_type(v):
        return v
    return _scalar(v, mb)


# The last two column lists seen (exact tuples), each as a (columns, plan) pair: rows of one
# batch share their column list, and records alternate with the rows of their headers.
cdef tuple _seen0 = (object(), None)
cdef tuple _seen1 = (object(), None)


cdef tuple _row_plan(object columns):
    global _seen0, _seen1
    cdef tuple seen = _seen0
    if seen[0] is columns:
        return <tuple>seen[1]
    seen = _seen1
    if seen[0] is columns:
        return <tuple>seen[1]
    found = _ROW_PLANS.get(columns)
    if found:
        plan = <tuple>found
    else:
        plan = _new_row_plan(columns)
    if type(columns) is tuple:
        _seen1 = _seen0
        _seen0 = (columns, plan)
    return plan


cdef tuple _new_row_plan(object columns):
    plan = []
    try:
        for name, hint in columns:
            if hint == _BYTES:
                plan.append((name, _BYTES_OR_FIELD))
            elif hint in _ANY_HINTS:
                plan.append((name, _ANY_VALUE))
            else:
                plan.append((name, _AS_IS))
    except Exception:  # a column that is no (name, hint) pair: Python's own exception
        _pure("_row_plan")(columns)
        raise
    out = tuple(plan)
    _ROW_PLANS[columns] = out
    return out


cdef dict _row_dict(object row, Py_ssize_t mb):
    cdef Py_ssize_t i, n
    cdef tuple plan
    cdef tuple pair
    cdef int how
    cdef bint fast = reads_row_slots(row)
    plan = _row_plan(read_slot(row, fast, R_COLUMNS, "columns"))
    values = read_slot(row, fast, R_VALUES, "values")
    cdef dict out = {}
    if type(values) is not tuple:
        for (name, how), v in zip(plan, values, strict=True):
            out[name] = _column_value(v, how, mb)
            if how == _BYTES_OR_FIELD and type(v) is bytes:
                _add_text(out, name, <bytes>v, mb)
        return out
    n = min(len(plan), len(<tuple>values))
    for i in range(n):
        pair = <tuple>plan[i]
        v = (<tuple>values)[i]
        how = pair[1]
        out[pair[0]] = _column_value(v, how, mb)
        if how == _BYTES_OR_FIELD and type(v) is bytes:
            _add_text(out, pair[0], <bytes>v, mb)
    if len(plan) != len(<tuple>values):
        side = "shorter" if len(<tuple>values) < len(plan) else "longer"
        raise ValueError(f"zip() argument 2 is {side} than argument 1")
    return out


cdef inline void _add_text(dict out, object name, bytes b, Py_ssize_t mb) except *:
    text = _bytes_text(b, mb)
    if text is not None:
        out[name + "_text"] = text


cdef inline object _column_value(object v, int how, Py_ssize_t mb):
    if how == _AS_IS or v is None:
        return v
    if how == _BYTES_OR_FIELD and type(v) is bytes:
        return _bytes_value(<bytes>v, mb)
    return _any_value(v, mb)


cdef inline object _children(object f, bint fast):
    """f.children: the slot of a Field, the property of a Row."""
    return read_slot(f, fast and type(f) is _Field, F_CHILDREN, "children")


cdef object _field_value(object f, Py_ssize_t mb):
    cdef bint fast = reads_field_slots(f)
    hint = read_slot(f, fast, F_HINT, "hint")
    if hint == _STRUCT:
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            if type(f) is _Row and read_slot(f, reads_row_slots(f), R_KIDS, "_kids") is None:
                return _row_dict(f, mb)
            kids = _children(f, fast)
            return _fields_dict(kids if kids else (), mb)
        finally:
            Py_LeaveRecursiveCall()
    if hint == _ARRAY:
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            kids = _children(f, fast)
            return [_field_value(c, mb) for c in (kids if kids else ())]
        finally:
            Py_LeaveRecursiveCall()
    v = read_slot(f, fast, F_VALUE, "value")
    tv = type(v)
    if tv is int or tv is str or tv is bool or v is None:
        pass
    elif tv is bytes or tv is bytearray or tv is memoryview:
        if hint == _RAW:
            if tv is bytes:
                return _hex(<const unsigned char*>PyBytes_AS_STRING(v),
                            min(mb, PyBytes_GET_SIZE(v)) if mb > 0 else PyBytes_GET_SIZE(v))
            return bytes(v[:mb] if mb > 0 else v).hex()
        return _bytes_value(v if tv is bytes else bytes(v), mb)
    elif tv is float and v != v:
        return None
    if _children(f, fast):  # a scalar with sub-fields (flags broken out, parsed payloads)
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            d = _fields_dict(_children(f, fast), mb)
        finally:
            Py_LeaveRecursiveCall()
        d["value"] = v
        return d
    return v


cdef inline void _add(dict out, object f, Py_ssize_t mb) except *:
    """One field of fields_dict()."""
    cdef bint fast = reads_field_slots(f)
    name = read_slot(f, fast, F_NAME, "name")
    v = read_slot(f, fast, F_VALUE, "value")
    hint = read_slot(f, fast, F_HINT, "hint")
    cdef bint plain = (hint is None and _children(f, fast) is None
                       and (type(v) is int or type(v) is str or type(v) is bool or v is None))
    if plain:
        val = v
    else:
        val = _field_value(f, mb)
    if name in out:  # repeated names (e.g. unknown tags) become lists
        prev = out[name]
        if not (isinstance(prev, list) and hint != _ARRAY):
            prev = [prev]
            out[name] = prev
        prev.append(val)
        return
    out[name] = val
    display = read_slot(f, fast, F_DISPLAY, "display")
    if display is not None and hint in _NAMED:
        out[name + "_name"] = display
    elif not plain and hint != _RAW and _is_bytes_like(v) and not _children(f, fast):
        _add_text(out, name, v if type(v) is bytes else bytes(v), mb)


cdef dict _fields_dict(object fields, Py_ssize_t mb):
    cdef dict out = {}
    if type(fields) is list:
        for f in <list>fields:
            _add(out, f, mb)
    else:
        for f in fields:
            _add(out, f, mb)
    return out


def row_dict(row, max_bytes):
    """A Row straight from its values, without building its child Fields."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("row_dict")(row, max_bytes)
    return _row_dict(row, mb)


def field_value(f, max_bytes):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("field_value")(f, max_bytes)
    return _field_value(f, mb)


def fields_dict(fields, max_bytes):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("fields_dict")(fields, max_bytes)
    return _fields_dict(fields, mb)


def message_dict(m, max_bytes=256):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("message_dict")(m, max_bytes)
    number = m.number
    frame = m.frame
    frames = m.frames
    ts = round(m.ts, 9)
    stream = m.stream
    src = m.src
    dst = m.dst
    protocol = m.protocol
    kind = m.kind
    summary = m.summary
    length = len(m.data)
    info = {k: v for k, v in m.info.items() if v is not None}
    fields = _fields_dict(m.fields, mb)
    diagnostics = [d.to_json() for d in m.diagnostics]
    match = m.match.to_json() if m.match else None
    out = {
        "number": number,
        "frame": frame,
        "frames": frames,
        "ts": ts,
        "stream": stream,
        "src": src,
        "dst": dst,
        "protocol": protocol,
        "kind": kind,
        "summary": summary,
        "length": length,
        "info": info,
        "fields": fields,
        "diagnostics": diagnostics,
        "match": match,
    }
    tls = m.tls
    if tls is not None:
        out["tls"] = tls.to_json()
    return out


# ---------------------------------------------------------------------------------------------
# The encoder's float check


def _odd_floats(out):
    """Whether orjson's text `out` may hold a float written unlike repr() would: it contains
    "0.0000", or "e-" and a digit 6-9 followed by `,`, `]`, `}` or the end."""
    if type(out) is not bytes:
        return _pure("_odd_floats")(out)
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(out)
    cdef Py_ssize_t i = _find(data, n, 0, 0x2E)  # "."
    while i >= 0:  # "0.0000"
        if i >= 1 and n - i >= 5 and data[i - 1] == 0x30 and data[i + 1] == 0x30 \
                and data[i + 2] == 0x30 and data[i + 3] == 0x30 and data[i + 4] == 0x30:
            return True
        i = _find(data, n, i + 1, 0x2E)
    i = _find(data, n, 0, 0x2D)  # "-"
    while i >= 0:  # "e-6," ... "e-9}", or at the end
        if i >= 1 and n - i >= 2 and data[i - 1] == 0x65 and 0x36 <= data[i + 1] <= 0x39:
            if n - i == 2 or data[i + 2] == 0x2C or data[i + 2] == 0x5D or data[i + 2] == 0x7D:
                return True
        i = _find(data, n, i + 1, 0x2D)
    return False


cdef inline Py_ssize_t _find(const unsigned char* data, Py_ssize_t n, Py_ssize_t start, int c):
    """The index of the first byte c in data[start:n], or -1."""
    if start >= n:
        return -1
    cdef const void* hit = memchr(data + start, c, <size_t>(n - start))
    if hit == NULL:
        return -1
    return <Py_ssize_t>(<size_t>hit - <size_t>data)
