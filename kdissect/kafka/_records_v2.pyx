"""Compiled twin of decode_batch, count_batch and record_elements in
kdissect/kafka/records_v2.py (see kdissect/accel.py): the same batches and records (the same
Row and Field objects), the same ctx counters, budget and diagnostics, C for bytes
buffers.

decode_batch and count_batch read the 61-byte header of a batch that lies within a bytes
buffer and call crc32c as the pure _check_crc does; decode_batch decodes the records of an
uncompressed batch with record_elements below. A compressed batch (its codec bits set), a
batch shorter than its header, a buffer that is not bytes and positions outside it go to the
pure functions.

A record is read with a raw pointer, every read checked against the end of the record, which
lies within the buffer. Varints of up to nine bytes fit a C int64 once zig-zag decoded; a record
with a longer one (its value may exceed 63 bits) or one that does not decode is read again by
the pure _record, which gives its Python integers or the exception its diagnostic reports: the
fast path has no effect until a record has decoded in full. Other arguments than a bytes
buffer, a bool `real`, and ints within C's range, with positions not negative, go to the pure
record_elements.
"""

from cpython.array cimport array, clone
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t
from libc.string cimport memcpy

from kdissect._model cimport new_field, new_row
from kdissect.dissect.base cimport Budget, Inflation
from kdissect.kafka.records_common cimport Ctx
from kdissect.wire._decimal cimport decimal


cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX


# Set from kdissect.kafka.records_v2 at the end of this module, after record_elements exists:
# records_v2 imports this module to bind it, or this module imports records_v2, which binds it.
cdef object WireReader, DecodeError
cdef object _pure_elements, _pure_record
cdef object RECORD_COLUMNS, CONTROL_COLUMNS, HEADER_COLUMNS, CONTROL_TYPES
cdef object ARRAY, ENUM, STRUCT
cdef int64_t LOG_APPEND_TIME, CONTROL
cdef object _pure_decode, _pure_count, _crc32c, _flags_display, ATTRIBUTE_FLAGS, _NAMES
cdef object FLAGS, HEX, RAW, TIME_MS
cdef int64_t DELETE_HORIZON, MIN_RECORD
cdef Py_ssize_t HEADER_SIZE, CRC_FROM
cdef dict _displays = {}  # attributes -> flags_display(attributes, ATTRIBUTE_FLAGS)
cdef array _SPANS  # an empty array("q"), cloned for each record's and header's spans


cdef struct Batch:
    bint log_append  # timestamps are the batch's max_timestamp
    bint control  # control records: the key and value are decoded
    bint real  # offsets are the message's
    bint small_offset  # base_offset fits an int64: offsets are added in C when they do not overflow
    bint small_timestamp  # base_timestamp likewise
    int64_t base_offset
    int64_t base_timestamp


cdef inline bint _varint(const unsigned char* data, Py_ssize_t* pos, Py_ssize_t end,
                         int64_t* out) noexcept:
    """The zig-zag varint at pos[0], before end, into out; pos[0] moves past it. False when it
    runs past end or is longer than nine bytes (it may not fit 63 bits): the pure path reads it."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char b
    while shift < 63:
        if p >= end:
            return False
        b = data[p]
        p += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = (<int64_t>(result >> 1)) ^ (-<int64_t>(result & 1))
            pos[0] = p
            return True
        shift += 7
    return False


cdef object _UNREAD = object()  # what _blob gives for a blob that does not decode


cdef inline object _blob(const unsigned char* data, Py_ssize_t* pos, Py_ssize_t end,
                         Py_ssize_t* at, int64_t* n):
    """The blob at pos[0], before end: a zig-zag varint length, -1 for null, then its bytes.
    Gives them (None when null), with at[0] their start and n[0] their length (0 when null);
    pos[0] moves past them. _UNREAD when the length does not decode, is below -1 or runs past
    end: the pure path reads it."""
    if not _varint(data, pos, end, n) or n[0] < -1 or n[0] > end - pos[0]:
        return _UNREAD
    at[0] = pos[0]
    if n[0] == -1:
        n[0] = 0
        return None
    value = PyBytes_FromStringAndSize(<char*>data + pos[0], n[0])
    pos[0] += n[0]
    return value


cdef inline object _add(object base, bint small, int64_t cbase, int64_t delta):
    """base + delta, in C when base fits an int64 and the sum does not overflow."""
    if small and (delta >= 0 and cbase <= INT64_MAX - delta or delta < 0 and cbase >= INT64_MIN - delta):
        return cbase + delta
    return base + delta


cdef str _offset_label(object offset):
    """f"offset {offset}" (a record's label), its digits written in C when offset fits a long long."""
    cdef int overflow = 0
    cdef long long x
    cdef char text[32]
    cdef Py_ssize_t k
    if type(offset) is not int:
        return f"offset {offset}"
    x = PyLong_AsLongLongAndOverflow(offset, &overflow)
    if overflow:
        return f"offset {offset}"
    k = 32 - decimal(x, text + 32) - 7
    memcpy(text + k, b"offset ", 7)
    return PyUnicode_DecodeASCII(text + k, 32 - k, NULL)


cdef inline bint _count(object v, long long* out):
    """An int budget count between 0 and 2**62 into out; False for anything else."""
    cdef int overflow = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return not overflow and 0 <= out[0] <= (1LL << 62)


cdef Py_ssize_t _allowance(object ctx) except -1:
    """How many entries in a row ctx.over_limit would let the message show from now on, each
    spending one of its budget, with nothing else spending them between (Budget.entry); 0 when
    ctx, its budget and the capture's counts are not exactly the types (and ints) the decoders
    make (then over_limit decides each time)."""
    cdef long long left, cap, shown
    if type(ctx) is not Ctx or type((<Ctx>ctx).budget) is not Budget:
        return 0
    cdef Budget b = (<Ctx>ctx).budget
    if not _count(b.entries_left, &left) or left == 0:
        return 0
    c = b._capture
    if c is None:
        return left
    if type(c) is not Inflation or not _count(b._entries_cap, &cap) \
            or not _count((<Inflation>c).entries, &shown):
        return 0
    # After the first, each needs the capture's count below its cap.
    return min(left, max(1, cap - shown))


cdef int _spend(object ctx, Py_ssize_t n) except -1:
    """n entries spent as n calls of Budget.entry that each let one be shown (what _allowance
    promised)."""
    if n == 0:
        return 0
    cdef Budget b = (<Ctx>ctx).budget
    b.entries_left = b.entries_left - n
    c = b._capture
    if c is not None:
        (<Inflation>c).entries = (<Inflation>c).entries + n
        if (<Inflation>c).entries >= b._entries_cap:
            b.entries_left = 0
    return 0


cdef object _headers(const unsigned char* data, Py_ssize_t p, Py_ssize_t end, bint real,
                     object ctx, object offset, Py_ssize_t* next, int64_t* count):
    """The headers field at p (as _headers in records_v2; `offset`: its offset, p or -1), or
    None when they do not decode or pass the elements the message may still decode (the pure
    path says so); count[0] is how many there are, which the caller spends from the budget
    once the record decoded."""
    cdef Py_ssize_t start = p, hstart, kat, vat
    cdef int64_t n, j, kn, vn
    cdef list items = []
    cdef array spans
    cdef long long* sp
    if not _varint(data, &p, end, &n) or n < 0 or 2 * n > end - p:
        return None
    if n and n > _elements_left(ctx):
        return None
    count[0] = n
    for j in range(n):
        hstart = p
        if not _varint(data, &p, end, &kn) or kn < 0 or kn > end - p:  # a null key is an error
            return None
        kat = p
        p += kn
        value = _blob(data, &p, end, &vat, &vn)
        if value is _UNREAD:
            return None
        key = PyUnicode_DecodeUTF8(<char*>data + kat, kn, "replace")
        spans = None
        if real:
            spans = clone(_SPANS, 4, False)
            sp = spans.data.as_longlongs
            sp[0], sp[1], sp[2], sp[3] = kat, kn, vat, vn
        items.append(new_row("header", HEADER_COLUMNS, (key, value), spans, hstart if real else -1, p - hstart, None))
    next[0] = p
    return new_field("headers", None, offset, p - start, items, ARRAY, None, None)


cdef object _elements_left(object ctx):
    """ctx.budget.elements_left (read from the struct when ctx and its budget are exactly Ctx
    and Budget)."""
    if type(ctx) is Ctx and type((<Ctx>ctx).budget) is Budget:
        return (<Budget>(<Ctx>ctx).budget).elements_left
    return ctx.budget.elements_left


cdef int _spend_elements(object ctx, int64_t n) except -1:
    """ctx.budget.elements(n), n being at most what is left (_headers checked it)."""
    cdef Budget b
    if type(ctx) is Ctx and type((<Ctx>ctx).budget) is Budget:
        b = (<Ctx>ctx).budget
        b.elements_left = b.elements_left - n
    else:
        ctx.budget.elements(n)
    return 0


cdef inline int64_t _int(const unsigned char* s, int size) noexcept:
    """The big-endian signed integer of `size` (2 or 4) bytes at s."""
    cdef int64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | s[i]
    if v >= (<int64_t>1) << (8 * size - 1):
        v -= (<int64_t>1) << (8 * size)
    return v


cdef object _control(object key, object value, Py_ssize_t kat, Py_ssize_t klen, Py_ssize_t vat,
                     Py_ssize_t vlen, bint real):
    """A control record's key (version, type) and a marker's value (version, coordinator_epoch),
    as _control in records_v2."""
    cdef Py_ssize_t koff = kat if real else -1
    cdef Py_ssize_t voff = vat if real else -1
    cdef const unsigned char* k
    cdef int64_t ctype
    cdef list children = []
    if key is not None and klen >= 4:
        k = <const unsigned char*>PyBytes_AS_STRING(key)
        ctype = _int(k + 2, 2)
        children.append(new_field("version", _int(k, 2), koff, 2, None, None, None, None))
        children.append(new_field("type", ctype, koff + 2 if real else -1, 2, None, ENUM,
                                  CONTROL_TYPES.get(ctype, f"unknown_{ctype}"), None))
        if (ctype == 0 or ctype == 1) and value is not None and vlen >= 6:
            children.append(new_field("coordinator_epoch", _int(<const unsigned char*>PyBytes_AS_STRING(value) + 2, 4),
                                      voff + 2 if real else -1, 4, None, None, None, None))
    # The struct spans the key, the value's length varint and the value.
    cdef Py_ssize_t length = vat + vlen - kat if real and value is not None else klen + vlen
    return new_field("control", None, koff, length, children, STRUCT, None, None)


cdef object _record(const unsigned char* data, Py_ssize_t start, Py_ssize_t limit, Batch* b,
                    object base_offset, object base_timestamp, object max_timestamp, object ctx,
                    Py_ssize_t* next, Py_ssize_t* nbytes):
    """The record at start, before limit (as _record in records_v2), or None when the pure path
    is to read it; next[0] is then past it and nbytes[0] its key and value sizes."""
    cdef Py_ssize_t p = start, end, at, p2, p3, kat, vat
    cdef int64_t length, ts_delta, off_delta, kn, vn, hn = 0
    cdef bint real = b.real
    if not _varint(data, &p, limit, &length) or length < 0 or length > limit - p:
        return None
    end = p + length
    at = p
    if p >= end:
        return None
    p += 1
    if not _varint(data, &p, end, &ts_delta):
        return None
    p2 = p
    if not _varint(data, &p, end, &off_delta):
        return None
    p3 = p
    key = _blob(data, &p, end, &kat, &kn)
    if key is _UNREAD:
        return None
    value = _blob(data, &p, end, &vat, &vn)
    if value is _UNREAD:
        return None
    hat = p
    headers = _headers(data, p, end, real, ctx, hat if real else -1, &p, &hn)
    if headers is None or p != end:
        return None
    if hn:
        _spend_elements(ctx, hn)
        if not real:
            ctx.budget.decompressed_elements(hn)
    ts = max_timestamp if b.log_append else _add(base_timestamp, b.small_timestamp, b.base_timestamp, ts_delta)
    offset = _add(base_offset, b.small_offset, b.base_offset, off_delta)
    values = (length, data[at], ts_delta, off_delta, offset, ts, key, value, headers)
    where = start if real else -1
    cdef array spans = None
    cdef long long* sp
    if real:  # (offset, length) per column, and a control record's (-1, 0)
        spans = clone(_SPANS, 20 if b.control else 18, False)
        sp = spans.data.as_longlongs
        sp[0], sp[1], sp[2], sp[3] = start, at - start, at, 1
        sp[4], sp[5], sp[6], sp[7] = at + 1, p2 - at - 1, p2, p3 - p2
        sp[8], sp[9], sp[10], sp[11] = p2, p3 - p2, at + 1, p2 - at - 1
        sp[12], sp[13], sp[14], sp[15] = kat, kn, vat, vn
        sp[16], sp[17] = hat, end - hat
        if b.control:
            sp[18], sp[19] = -1, 0
    label = _offset_label(offset)
    next[0] = end
    nbytes[0] = kn + vn
    if b.control:
        values += (_control(key, value, kat, kn, vat, vn, real),)
        return new_row("record", CONTROL_COLUMNS, values, spans, where, end - start, label)
    return new_row("record", RECORD_COLUMNS, values, spans, where, end - start, label)


def record_elements(buf, pos, end, count, declared, attributes, base_offset, base_timestamp,
                    max_timestamp, ctx, real, where):
    """The records of one batch: up to `count` of them from buf[pos:end] (see record_elements
    in kdissect/kafka/records_v2.py)."""
    cdef Py_ssize_t c_pos, c_end, c_count, limit, i, p, nb = 0
    cdef int64_t attrs
    cdef Batch b
    # Anything else, the pure function: Python's integers and indexing (a negative position
    # counts from the end, positions and counts may exceed any C integer).
    if not (type(buf) is bytes and type(pos) is int and type(end) is int and type(count) is int
            and type(attributes) is int and type(base_offset) is int and type(base_timestamp) is int
            and type(max_timestamp) is int and type(real) is bool
            and 0 <= pos <= PY_SSIZE_T_MAX and 0 <= end <= PY_SSIZE_T_MAX
            and -PY_SSIZE_T_MAX <= count <= PY_SSIZE_T_MAX and INT64_MIN <= attributes <= INT64_MAX):
        return _pure_elements(buf, pos, end, count, declared, attributes, base_offset, base_timestamp,
                              max_timestamp, ctx, real, where)
    c_pos, c_end, c_count, attrs = pos, end, count, attributes
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(buf)
    limit = min(c_end, PyBytes_GET_SIZE(buf))  # a WireReader's end
    b.log_append = (attrs & LOG_APPEND_TIME) != 0
    b.control = (attrs & CONTROL) != 0
    b.real = real
    b.small_offset = INT64_MIN <= base_offset <= INT64_MAX
    b.base_offset = base_offset if b.small_offset else 0
    b.small_timestamp = INT64_MIN <= base_timestamp <= INT64_MAX
    b.base_timestamp = base_timestamp if b.small_timestamp else 0
    cdef list elements = []
    # The records and key and value bytes counted here, added to ctx's counts as the loop ends
    # however it ends (nothing in it reads them).
    cdef Py_ssize_t records = 0, nbytes = 0
    # The records of the message's own bytes spend their entries in C while the budget allows
    # (allowed: how many in a row it lets be shown, spent: how many of them are not yet taken
    # from it), which it is told at once (_spend) before anything else reads it; over_limit
    # decides where the allowance ends and for decompressed records, whose headers spend
    # entries too (decompressed_elements).
    cdef Py_ssize_t allowed = _allowance(ctx) if real else 0, spent = 0
    p = c_pos
    try:
        for i in range(c_count):
            if spent < allowed:
                spent += 1
            else:
                _spend(ctx, spent)
                spent = 0
                if ctx.over_limit(where):
                    records += c_count - i  # counted from the header, not shown
                    break
                allowed = _allowance(ctx) if real else 0
            rec = _record(data, p, limit, &b, base_offset, base_timestamp, max_timestamp, ctx, &p, &nb)
            if rec is None:
                _spend(ctx, spent)
                spent = 0
                r = WireReader(buf, p, end)
                try:
                    rec = _pure_record(r, attributes, base_offset, base_timestamp, max_timestamp, ctx, real)
                except DecodeError as e:
                    ctx.add("records.truncated", f"record {len(elements)} of {declared}: {e}",
                            e.offset if real else where)
                    break
                p = r.pos
                allowed = _allowance(ctx) if real else 0
            else:
                nbytes += nb
            elements.append(rec)
            records += 1
        else:
            if limit != p:
                ctx.add("records.trailing", f"{plural(limit - p, 'byte')} after the last of {count} records",
                        p if real else where)
    finally:
        _spend(ctx, spent)
        ctx.records += records
        ctx.nbytes += nbytes
    return elements


cdef inline int64_t _be(const unsigned char* s, int size) noexcept:
    """The big-endian signed integer of `size` (1, 2, 4 or 8) bytes at s."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | s[i]
    if size < 8 and v >= (<uint64_t>1) << (8 * size - 1):
        return <int64_t>v - ((<int64_t>1) << (8 * size))
    return <int64_t>v


cdef inline bint _fits(object buf, object start, object end, object real):
    """Whether the batch [start, end) is one the compiled functions read: a bytes buffer that
    holds it, a bool `real`, and at least a header's bytes."""
    return (type(buf) is bytes and type(start) is int and type(end) is int and type(real) is bool
            and 0 <= start <= end <= PyBytes_GET_SIZE(buf) and end - start >= HEADER_SIZE)


cdef object _display(int64_t attributes):
    """flags_display(attributes, ATTRIBUTE_FLAGS), kept per value."""
    d = _displays.get(attributes)
    if d is None:
        d = _flags_display(attributes, ATTRIBUTE_FLAGS)
        _displays[attributes] = d
    return d


cdef _check_crc(object buf, Py_ssize_t start, Py_ssize_t end, object crc, object ctx, bint real):
    """As _check_crc in records_v2."""
    got = _crc32c(memoryview(buf)[start + CRC_FROM : end])
    if got != crc:
        ctx.add("records.crc", f"record batch CRC32C 0x{crc:08x} does not match the computed 0x{got:08x}",
                start + 17 if real else -1)


# The header's fields: (offset, size) in the batch, as _OFFSETS and _SIZES in records_v2.
cdef Py_ssize_t[13] _OFF = [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57]
cdef int[13] _SIZE = [8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4]


def decode_batch(buf, start, end, ctx, real):
    """One RecordBatch in [start, end) (see decode_batch in kdissect/kafka/records_v2.py)."""
    cdef Py_ssize_t s, e, rstart, i, off
    cdef int64_t attrs, count
    cdef const unsigned char* data
    cdef bint r
    if not _fits(buf, start, end, real):
        return _pure_decode(buf, start, end, ctx, real)
    s, e, r = start, end, real
    data = <const unsigned char*>PyBytes_AS_STRING(buf) + s
    attrs = _be(data + 21, 2)
    if attrs & 0x07:  # compressed: ctx.inflate, the pure path
        return _pure_decode(buf, start, end, ctx, real)
    ctx.batches += 1
    display = _display(attrs)
    children = []
    for i in range(13):
        off = s + _OFF[i] if r else -1
        if i == 4:  # the CRC: unsigned
            value = _be(data + 17, 4) & 0xFFFFFFFF
        else:
            value = _be(data + _OFF[i], _SIZE[i])
        if i == 4:
            children.append(new_field(_NAMES[i], value, off, _SIZE[i], None, HEX, None, None))
        elif i == 5:
            children.append(new_field(_NAMES[i], value, off, _SIZE[i], None, FLAGS, display, None))
        elif i == 7 or i == 8:
            children.append(new_field(_NAMES[i], value, off, _SIZE[i], None, TIME_MS, None,
                                      "base_timestamp (delete horizon)" if i == 7 and attrs & DELETE_HORIZON
                                      else None))
        else:
            children.append(new_field(_NAMES[i], value, off, _SIZE[i], None, None, None, None))
    base_offset = (<object>children[0]).value
    declared = (<object>children[12]).value
    _check_crc(buf, s, e, (<object>children[4]).value, ctx, r)
    # The records (as _records in records_v2, uncompressed).
    rstart = s + HEADER_SIZE
    where = rstart if r else -1
    count = _be(data + 57, 4)
    if count < 0 or count * MIN_RECORD > e - rstart:
        ctx.add("records.count", f"records_count {declared} does not fit in {e - rstart} bytes", where)
        count = max(0, min(count, (e - rstart) // MIN_RECORD))
    elements = record_elements(buf, rstart, end, count, declared, attrs, base_offset,
                               (<object>children[7]).value, (<object>children[8]).value, ctx, real, where)
    children.append(new_field("records", None, where, e - rstart, elements, ARRAY, None, None))
    label = f"batch base_offset={base_offset} records={declared} {display}"
    return new_field("batch", None, s if r else -1, e - s, children, STRUCT, None, label)


def count_batch(buf, start, end, ctx, real):
    """A RecordBatch's header and CRC only (see count_batch in kdissect/kafka/records_v2.py)."""
    cdef Py_ssize_t s, e
    cdef int64_t count
    cdef const unsigned char* data
    if not _fits(buf, start, end, real):
        return _pure_count(buf, start, end, ctx, real)
    s, e = start, end
    data = <const unsigned char*>PyBytes_AS_STRING(buf) + s
    ctx.batches += 1
    _check_crc(buf, s, e, _be(data + 17, 4) & 0xFFFFFFFF, ctx, real)
    count = _be(data + 57, 4)
    ctx.records += max(count, 0)
    label = f"batch base_offset={_be(data, 8)} records={count} (records not decoded)"
    return new_field("batch", None, s if real else -1, e - s, None, RAW, None, label)



import importlib
from array import array as _array

from kdissect import accel
from kdissect.errors import DecodeError
from kdissect.model import ARRAY, ENUM, FLAGS, HEX, RAW, STRUCT, TIME_MS
from kdissect.text import plural
from kdissect.wire.reader import WireReader

_py = importlib.import_module("kdissect.kafka.records_v2")
_SPANS = _array("q")  # (records_v2's spans: C long long, as_longlongs)
_pure_elements = accel.pure("kdissect.kafka.records_v2", "record_elements")
_pure_record = _py._record
RECORD_COLUMNS, CONTROL_COLUMNS, HEADER_COLUMNS = _py.RECORD_COLUMNS, _py.CONTROL_COLUMNS, _py.HEADER_COLUMNS
CONTROL_TYPES = _py.CONTROL_TYPES
LOG_APPEND_TIME, CONTROL = _py.LOG_APPEND_TIME, _py.CONTROL
_pure_decode = accel.pure("kdissect.kafka.records_v2", "decode_batch")
_pure_count = accel.pure("kdissect.kafka.records_v2", "count_batch")
_crc32c = _py.crc32c
_flags_display, ATTRIBUTE_FLAGS, _NAMES = _py.flags_display, _py.ATTRIBUTE_FLAGS, _py._NAMES
DELETE_HORIZON, MIN_RECORD, HEADER_SIZE, CRC_FROM = _py.DELETE_HORIZON, _py.MIN_RECORD, _py.HEADER_SIZE, _py.CRC_FROM
