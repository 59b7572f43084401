"""Compiled twins of `batch` and `_batches` in kdissect/spark/worker.py (see kdissect/accel.py):
the same Arrow record batches, their arrays' buffers (validity bits, offsets, values) written by
C code from the rows' values, a column at a time, instead of by pyarrow's conversion of each
Python value; a combined row's records weighed in C.

A column whose values are all of the kinds read here (for its type: str, bytes, int, float,
bool, date, a list, a tuple or dict for a struct, a list of pairs for a map, or None) is built
here. Any other value (a subclass, an int out of range, a tuple of the wrong size, text past
2 GiB in one array, ...) makes pyarrow convert the whole column, as the pure function does, so
that the column or the exception is pyarrow's own. As in pyarrow's conversion, the children of
a null struct hold empty values (0, "", an empty list), and a dict gives a struct the members
named as its fields (None for a missing one).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.datetime cimport date_day, date_month, date_year, import_datetime
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy, memset

import datetime

import kdissect.spark.worker as W

import_datetime()

cdef object _pure_batch = W.batch
cdef object arrow_schema = W.arrow_schema, _weigher = W._weigher
cdef Py_ssize_t KEY_AT = W.KEY_AT, VALUE_AT = W.VALUE_AT
cdef object _date = datetime.date
cdef object pa = None  # pyarrow, imported by the first batch (the driver never needs it)
cdef object EMPTY = object()  # a child slot of a null struct: an empty value, not a null
cdef int64_t OFFSET_MAX = 2147483647


class _Other(Exception):
    """A value this module does not convert: pyarrow converts the column."""


cdef enum Kind:
    OTHER, STRING, BINARY, INT32, INT64, DOUBLE, BOOLEAN, DATE, LIST, MAP, STRUCT


cdef class _Spec:
    """How an Arrow type's arrays are built: its kind, the type, and the specs of its children
    (a list's values; a map's keys and items, and its entries' type; a struct's fields)."""
    cdef int kind
    cdef object type
    cdef list children
    cdef tuple names  # a struct's field names
    cdef object entries  # a map's entries type


cdef _Spec _spec(object t):
    types = pa.types
    cdef _Spec s = _Spec()
    s.type = t
    s.children = []
    s.kind = OTHER
    if types.is_string(t):
        s.kind = STRING
    elif types.is_binary(t):
        s.kind = BINARY
    elif types.is_int32(t):
        s.kind = INT32
    elif types.is_int64(t) or types.is_timestamp(t):
        s.kind = INT64
    elif types.is_float64(t):
        s.kind = DOUBLE
    elif types.is_boolean(t):
        s.kind = BOOLEAN
    elif types.is_date32(t):
        s.kind = DATE
    elif types.is_map(t):
        s.kind = MAP
        s.children = [_spec(t.key_type), _spec(t.item_type)]
        s.entries = pa.struct([t.key_field, t.item_field])
    elif types.is_list(t):
        s.kind = LIST
        s.children = [_spec(t.value_type)]
    elif types.is_struct(t):
        s.kind = STRUCT
        s.children = [_spec(t.field(i).type) for i in range(t.num_fields)]
        s.names = tuple(t.field(i).name for i in range(t.num_fields))
    return s


cdef dict _SPECS = {}  # id of a schema -> (it, the specs of its fields)


cdef list _specs(object schema):
    held = _SPECS.get(id(schema))
    if held is not None and (<tuple>held)[0] is schema:
        return (<tuple>held)[1]
    specs = [_spec(f.type) for f in schema]
    if len(_SPECS) >= 16:
        _SPECS.clear()
    _SPECS[id(schema)] = (schema, specs)
    return specs


def _batches(rows, cols):
    """worker._batches: the rows as batches of the table's schema, within its bounds."""
    schema = arrow_schema(cols)
    names = [name for name, _ in cols]
    weigh = _weigher(names)
    cdef Py_ssize_t at = names.index("_records") if "_records" in names else -1
    cdef long long b, r, held = 0, records = 0
    cdef Py_ssize_t rows_max = W.BATCH_ROWS
    cdef long long bytes_max = W.BATCH_BYTES, records_max = W.BATCH_RECORDS
    cdef list chunk = []
    for row in rows:
        chunk.append(row)
        if weigh is not None:
            if at < 0 or not _weighed(row, at, &b, &r):
                b, r = weigh(row)
            held += b
            records += r
        if len(chunk) >= rows_max or held >= bytes_max or records >= records_max:
            yield batch(chunk, schema)
            chunk, held, records = [], 0, 0
    if chunk:
        yield batch(chunk, schema)


cdef bint _weighed(object row, Py_ssize_t at, long long* held, long long* count) except -1:
    """The weigher's (key and value bytes, records) of a combined row whose records are a list
    of tuples with bytes or None as key and value; False for any other row (the weigher's)."""
    cdef long long total = 0
    if type(row) is not tuple or at >= PyTuple_GET_SIZE(row):
        return False
    recs = <object>PyTuple_GET_ITEM(row, at)
    if type(recs) is not list:
        return False
    for rec in <list>recs:
        if type(rec) is not tuple or PyTuple_GET_SIZE(rec) <= KEY_AT or PyTuple_GET_SIZE(rec) <= VALUE_AT:
            return False
        value = <object>PyTuple_GET_ITEM(rec, VALUE_AT)
        key = <object>PyTuple_GET_ITEM(rec, KEY_AT)
        if (value is not None and type(value) is not bytes) or (key is not None and type(key) is not bytes):
            return False
        if value is not None:
            total += PyBytes_GET_SIZE(value)
        if key is not None:
            total += PyBytes_GET_SIZE(key)
    held[0] = total
    count[0] = PyList_GET_SIZE(recs)
    return True


def batch(chunk, schema):
    """Rows (tuples of values in the order of schema's fields) as one Arrow record batch
    (worker.batch)."""
    global pa
    if pa is None:
        import pyarrow
        pa = pyarrow
    if type(chunk) is not list or not chunk:
        return _pure_batch(chunk, schema)
    cdef Py_ssize_t i, n = len(<list>chunk), width = len(schema)
    for row in <list>chunk:
        if type(row) is not tuple or PyTuple_GET_SIZE(row) != width:
            return _pure_batch(chunk, schema)
    cdef list specs = _specs(schema)
    cdef list values
    cdef Py_ssize_t r
    arrays = []
    for i in range(width):
        values = PyList_New(n)
        for r in range(n):
            _put(values, r, <object>PyTuple_GET_ITEM(<object>PyList_GET_ITEM(chunk, r), i))
        t = (<_Spec>specs[i]).type
        if values[0] is None and values.count(None) == n:
            arrays.append(pa.nulls(n, t))
            continue
        try:
            arrays.append(_array(values, <_Spec>specs[i]))
        except _Other:
            arrays.append(pa.array(values, type=t))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    const char* PyUnicode_DATA(object o)


cdef inline void _put(list items, Py_ssize_t i, object v):
    """Slot i of a list made by PyList_New (empty until set) is v."""
    Py_INCREF(v)
    PyList_SET_ITEM(items, i, v)


cdef object _array(list values, _Spec s):
    """The array of values (each None, EMPTY, or a value of the spec's kind; else _Other)."""
    if s.kind == STRING or s.kind == BINARY:
        return _varlen(values, s)
    if s.kind == INT32 or s.kind == INT64 or s.kind == DOUBLE or s.kind == DATE:
        return _fixed(values, s)
    if s.kind == BOOLEAN:
        return _booleans(values, s)
    if s.kind == LIST or s.kind == MAP:
        return _lists(values, s)
    if s.kind == STRUCT:
        return _structs(values, s)
    raise _Other


cdef bytes _bytes(Py_ssize_t size):
    """A new bytes object of size bytes, to be written before anything else sees it."""
    return PyBytes_FromStringAndSize(NULL, size)


cdef bytes _validity(Py_ssize_t n):
    """A validity bitmap of n slots, all valid (the bits past n clear)."""
    cdef Py_ssize_t size = (n + 7) // 8
    cdef bytes bits = _bytes(size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(bits)
    memset(p, 0xFF, size)
    if n % 8:
        p[size - 1] = <uint8_t>((1 << (n % 8)) - 1)
    return bits


cdef inline void _clear(uint8_t* bits, Py_ssize_t i):
    """Slot i is null."""
    bits[i >> 3] = bits[i >> 3] & <uint8_t>(0xFF ^ (1 << (i & 7)))


cdef inline object _buffer(bytes bits, Py_ssize_t nulls):
    """The validity buffer of an array with that many nulls (none without nulls)."""
    return pa.py_buffer(bits) if nulls else None


cdef inline const char* _utf8(object v, Py_ssize_t* size) except NULL:
    """A str's UTF-8 bytes and their number (an ASCII str's own; _Other for a lone surrogate)."""
    if PyUnicode_IS_COMPACT_ASCII(v):
        size[0] = PyUnicode_GET_LENGTH(v)
        return PyUnicode_DATA(v)
    try:
        return PyUnicode_AsUTF8AndSize(v, size)
    except UnicodeError:
        raise _Other


cdef object _varlen(list values, _Spec s):
    """A string or binary array: int32 offsets and the values' bytes (a str as UTF-8)."""
    cdef Py_ssize_t i, n = len(values), size = 0, total = 0, nulls = 0
    cdef const char* data
    cdef bint text = s.kind == STRING
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is None:
            nulls += 1
            continue
        if v is EMPTY:
            continue
        if text and type(v) is str:
            _utf8(v, &size)
        elif not text and type(v) is bytes:
            size = PyBytes_GET_SIZE(v)
        else:
            raise _Other
        total += size
        if total > OFFSET_MAX:
            raise _Other
    cdef bytes bits = _validity(n), offsets = _bytes(4 * (n + 1)), out = _bytes(total)
    cdef uint8_t* valid = <uint8_t*>PyBytes_AS_STRING(bits)
    cdef int32_t* off = <int32_t*>PyBytes_AS_STRING(offsets)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t at = 0
    off[0] = 0
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is None:
            _clear(valid, i)
        elif v is not EMPTY:
            if text:
                data = _utf8(v, &size)
            else:
                data = PyBytes_AS_STRING(v)
                size = PyBytes_GET_SIZE(v)
            memcpy(p + at, data, size)
            at += size
        off[i + 1] = <int32_t>at
    return pa.Array.from_buffers(s.type, n, [_buffer(bits, nulls), pa.py_buffer(offsets), pa.py_buffer(out)],
                                 nulls)


cdef inline int64_t _days(int y, int m, int d):
    """Days from 1970-01-01 to a proleptic Gregorian date."""
    cdef int64_t yy = y - (m <= 2)
    cdef int64_t era = yy // 400  # (floor division: cdivision is off)
    cdef int64_t yoe = yy - era * 400
    cdef int64_t doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    cdef int64_t doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef object _fixed(list values, _Spec s):
    """An int32, int64 (or timestamp), double or date32 array."""
    cdef Py_ssize_t i, n = len(values), nulls = 0
    cdef int kind = s.kind
    cdef int width = 4 if kind == INT32 or kind == DATE else 8
    cdef bytes bits = _validity(n), out = _bytes(width * n)
    cdef uint8_t* valid = <uint8_t*>PyBytes_AS_STRING(bits)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef int32_t* p32 = <int32_t*>p
    cdef int64_t* p64 = <int64_t*>p
    cdef long long x
    cdef int overflow
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is None or v is EMPTY:
            if v is None:
                _clear(valid, i)
                nulls += 1
            if width == 4:
                p32[i] = 0
            else:
                p64[i] = 0
        elif kind == DOUBLE:
            if type(v) is not float:
                raise _Other
            (<double*>p)[i] = PyFloat_AS_DOUBLE(v)
        elif kind == DATE:
            if type(v) is not _date:
                raise _Other
            p32[i] = <int32_t>_days(date_year(v), date_month(v), date_day(v))
        else:
            if type(v) is not int:
                raise _Other
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                raise _Other
            if kind == INT32:
                if x < -2147483648 or x > 2147483647:
                    raise _Other
                p32[i] = <int32_t>x
            else:
                p64[i] = <int64_t>x
    return pa.Array.from_buffers(s.type, n, [_buffer(bits, nulls), pa.py_buffer(out)], nulls)


cdef object _booleans(list values, _Spec s):
    cdef Py_ssize_t i, n = len(values), nulls = 0
    cdef bytes bits = _validity(n), out = _bytes((n + 7) // 8)
    cdef uint8_t* valid = <uint8_t*>PyBytes_AS_STRING(bits)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    memset(p, 0, (n + 7) // 8)
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is None:
            _clear(valid, i)
            nulls += 1
        elif v is True:
            p[i >> 3] = p[i >> 3] | <uint8_t>(1 << (i & 7))
        elif v is not False and v is not EMPTY:
            raise _Other
    return pa.Array.from_buffers(s.type, n, [_buffer(bits, nulls), pa.py_buffer(out)], nulls)


cdef object _lists(list values, _Spec s):
    """A list array, or a map array (a list of (key, item) pairs as its entries)."""
    cdef Py_ssize_t i, j, k, n = len(values), at = 0, nulls = 0
    cdef bytes bits = _validity(n), offsets = _bytes(4 * (n + 1))
    cdef uint8_t* valid = <uint8_t*>PyBytes_AS_STRING(bits)
    cdef int32_t* off = <int32_t*>PyBytes_AS_STRING(offsets)
    off[0] = 0
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is None:
            _clear(valid, i)
            nulls += 1
        elif v is not EMPTY:
            if type(v) is not list:
                raise _Other
            at += PyList_GET_SIZE(v)
            if at > OFFSET_MAX:
                raise _Other
        off[i + 1] = <int32_t>at
    cdef list items = PyList_New(at), keys
    k = 0
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if v is not None and v is not EMPTY:
            for j in range(PyList_GET_SIZE(v)):
                if k == at:  # (a list grown since it was counted)
                    raise _Other
                _put(items, k, <object>PyList_GET_ITEM(v, j))
                k += 1
    if k != at:
        raise _Other
    if s.kind == MAP:
        keys = PyList_New(at)
        for j in range(at):
            pair = <object>PyList_GET_ITEM(items, j)
            if type(pair) is not tuple or PyTuple_GET_SIZE(pair) != 2 or <object>PyTuple_GET_ITEM(pair, 0) is None:
                raise _Other
            _put(keys, j, <object>PyTuple_GET_ITEM(pair, 0))
            items[j] = <object>PyTuple_GET_ITEM(pair, 1)
        children = [pa.Array.from_buffers(s.entries, at, [None], 0, children=[
            _array(keys, <_Spec>s.children[0]), _array(items, <_Spec>s.children[1])])]
    else:
        children = [_array(items, <_Spec>s.children[0])]
    return pa.Array.from_buffers(s.type, n, [_buffer(bits, nulls), pa.py_buffer(offsets)], nulls,
                                 children=children)


cdef object _structs(list values, _Spec s):
    """A struct array from tuples (by position) and dicts (by field name)."""
    cdef Py_ssize_t i, j, n = len(values), width = len(s.names), nulls = 0
    cdef list columns = [PyList_New(n) for _ in range(width)]
    cdef bytes bits = _validity(n)
    cdef uint8_t* valid = <uint8_t*>PyBytes_AS_STRING(bits)
    for i in range(n):
        v = <object>PyList_GET_ITEM(values, i)
        if type(v) is tuple:
            if PyTuple_GET_SIZE(v) != width:
                raise _Other
            for j in range(width):
                _put(<list>PyList_GET_ITEM(columns, j), i, <object>PyTuple_GET_ITEM(v, j))
        elif type(v) is dict:
            for j in range(width):
                _put(<list>PyList_GET_ITEM(columns, j), i, (<dict>v).get(<object>PyTuple_GET_ITEM(s.names, j)))
        elif v is None or v is EMPTY:
            if v is None:
                _clear(valid, i)
                nulls += 1
            for j in range(width):
                _put(<list>PyList_GET_ITEM(columns, j), i, EMPTY)
        else:
            raise _Other
    children = [_array(<list>PyList_GET_ITEM(columns, j), <_Spec>s.children[j]) for j in range(width)]
    return pa.Array.from_buffers(s.type, n, [_buffer(bits, nulls)], nulls, children=children)
