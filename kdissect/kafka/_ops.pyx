"""Compiled twin of the field decoders of kdissect/kafka/ops.py (see kdissect/accel.py).

Each builder returns a decoder object instead of a closure: `dec(r, ctx) -> Field` from Python,
a C-level virtual call from the compiled arrays and structs around it. Elements that are not
compiled decoders (plan.py's records, content hooks) are called as ordinary callables. The
Fields, the effects on `ctx`, the reader's position and the exceptions (messages, offsets,
partial trees) are those of ops.py for every input. Bytes buffers are read in C, with explicit
bounds checks; any other buffer or reader, or a position outside the buffer, takes the pure
decoder. The reader's slots are read as the compiled WireReader's (kdissect/wire/reader.pxd).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

from kdissect._model cimport new_field
from kdissect.wire._bytes cimport be as _be
from kdissect.wire._bytes cimport reads_bytes as _reads
from kdissect.wire.reader cimport WireReader

from kdissect.dissect.partial import keep_partial
from kdissect.errors import BadLength, DecodeError, Truncated
from kdissect.kafka.error_codes import error_name
from kdissect.model import ARRAY, BYTES, ENUM, RAW, STRUCT, TIME_MS

# ops.py's own objects, looked up on first use (ops.py imports this module as it finishes).
cdef object _py = None
cdef object ArrayCap = None


cdef object _ops():
    global _py, ArrayCap
    if _py is None:
        import kdissect.accel as accel
        import kdissect.kafka.ops as ops
        _py = {name: accel.pure("kdissect.kafka.ops", name) for name in (
            "fixed", "_error_code", "_timestamp", "boolean", "uuid_field", "uvarint_field",
            "string", "raw_bytes", "array", "struct_dec", "records", "nullable_struct")}
        _py["_FIXED"] = ops._FIXED
        _py["length"] = ops.length
        _py["_array_cap"] = ops._array_cap
        _py["tagged_section"] = ops.tagged_section
        _py["display_of"] = ops.display_of
        _py["decode_records"] = ops.decode_records
        _py["DIAGNOSTICS"] = ops.DIAGNOSTICS
        ArrayCap = ops.ArrayCap
    return _py


cdef class Dec:
    """A compiled field decoder: `dec(r, ctx) -> Field`."""

    cdef object dec(self, object r, object ctx):
        raise NotImplementedError

    def __call__(self, r, ctx):
        return self.dec(r, ctx)


cdef inline object _run(object d, object r, object ctx):
    if isinstance(d, Dec):
        return (<Dec>d).dec(r, ctx)
    return d(r, ctx)


# -- bytes in C ---------------------------------------------------------------------------

cdef enum Kind:
    K_INT8, K_INT16, K_UINT16, K_INT32, K_UINT32, K_INT64, K_OTHER

cdef dict _KINDS = {"int8": K_INT8, "int16": K_INT16, "uint16": K_UINT16, "int32": K_INT32,
                    "uint32": K_UINT32, "int64": K_INT64}


cdef inline object _int_at(const unsigned char* d, int kind):
    if kind == K_INT8:
        return <int8_t>d[0]
    if kind == K_INT16:
        return <int16_t>(<uint16_t>_be(d, 2))
    if kind == K_UINT16:
        return <uint16_t>_be(d, 2)
    if kind == K_INT32:
        return <int32_t>(<uint32_t>_be(d, 4))
    if kind == K_UINT32:
        return <uint32_t>_be(d, 4)
    return <int64_t>_be(d, 8)


cdef inline bint _in_buf(bytes buf, Py_ssize_t p, Py_ssize_t n) noexcept:
    """Whether n >= 0 bytes at p lie inside buf."""
    return p >= 0 and n >= 0 and n <= PyBytes_GET_SIZE(buf) - p


cdef inline bint _uvarint_fast(bytes buf, Py_ssize_t p, Py_ssize_t end, int most,
                               uint64_t* out, Py_ssize_t* next_pos) noexcept:
    """An unsigned varint of at most `most` (<= 9) bytes wholly before end and inside buf.
    False for anything else (cut short, longer, outside the buffer): the reader's own method
    then decides, with its exceptions."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef int i
    cdef unsigned char b
    if p < 0:
        return False
    if end > size:
        end = size
    for i in range(most):
        if p >= end:
            return False
        b = d[p]
        p += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = v
            next_pos[0] = p
            return True
        shift += 7
    return False


cdef int64_t _length(WireReader r, bint flexible, bint wide) except? -2:
    """ops.length: a compact (uvarint32 - 1) or int16/int32 length; -1 is null. `r` reads a
    bytes buffer (_reads)."""
    cdef uint64_t v
    cdef Py_ssize_t nxt
    cdef bytes buf = r.buf
    cdef Py_ssize_t p = r.pos
    if flexible:
        if _uvarint_fast(buf, p, r.end, 5, &v, &nxt) and v <= 0xFFFFFFFF:
            r.pos = nxt
            return <int64_t>v - 1
        return r.uvarint32() - 1
    cdef Py_ssize_t end = r.end
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    if wide:
        if p + 4 > end:
            raise Truncated("length past the end", p)
        if not _in_buf(buf, p, 4):
            return _ops()["length"](r, flexible, wide)
        r.pos = p + 4
        return <int32_t>(<uint32_t>_be(d + p, 4))
    if p + 2 > end:
        raise Truncated("length past the end", p)
    if not _in_buf(buf, p, 2):
        return _ops()["length"](r, flexible, wide)
    r.pos = p + 2
    return <int16_t>(<uint16_t>_be(d + p, 2))


cdef Py_ssize_t _take(WireReader r, Py_ssize_t n, object name) except? -1:
    """ops._take: checks that n bytes remain; their start; moves past them."""
    cdef Py_ssize_t p = r.pos
    cdef Py_ssize_t end = r.end
    if n < -1:
        raise BadLength(f"{name}: length {n}", p)
    if p + n > end:
        raise Truncated(f"{name}: {n} bytes needed, {end - p} remain", p)
    r.pos = p + n
    return p


cdef inline Py_ssize_t _claim(WireReader r, Py_ssize_t size, object message) except -2:
    """The start of the `size` (>= 1) bytes at r.pos, which then moves past them; -1 when the
    pure decoder is to read them (they lie outside the buffer). Raises Truncated (message) when
    they run past r.end. `r` reads a bytes buffer (_reads)."""
    cdef Py_ssize_t p = r.pos
    cdef Py_ssize_t end = r.end
    if p >= end or p + size > end:
        raise Truncated(message, p)
    if not _in_buf(<bytes>r.buf, p, size):
        return -1
    r.pos = p + size
    return p


# -- scalars ------------------------------------------------------------------------------

cdef class _Fixed(Dec):
    cdef object name, pure, message
    cdef Py_ssize_t size
    cdef int kind
    cdef object unpack
    cdef object hint, names  # ops.display_of(name): the Field's hint, its value names or None

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, self.size, self.message)
        if p < 0:
            return self.pure(r, ctx)
        buf = (<WireReader>r).buf
        if self.kind == K_OTHER:
            v = self.unpack(buf, p)[0]
        else:
            v = _int_at(<const unsigned char*>PyBytes_AS_STRING(buf) + p, self.kind)
        display = None if self.names is None else self.names.get(v)
        return new_field(self.name, v, p, self.size, None, self.hint, display, None)


cdef class _ErrorCode(Dec):
    cdef object name, pure, message

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, 2, self.message)
        if p < 0:
            return self.pure(r, ctx)
        v = _int_at(<const unsigned char*>PyBytes_AS_STRING((<WireReader>r).buf) + p, K_INT16)
        if v:
            ctx.errors.append(v)
        return new_field(self.name, v, p, 2, None, ENUM, error_name(v), None)


cdef class _Timestamp(Dec):
    cdef object name, pure, message, unpack
    cdef bint int64

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, 8, self.message)
        if p < 0:
            return self.pure(r, ctx)
        buf = (<WireReader>r).buf
        if self.int64:
            v = _int_at(<const unsigned char*>PyBytes_AS_STRING(buf) + p, K_INT64)
        else:
            v = self.unpack(buf, p)[0]
        return new_field(self.name, v, p, 8, None, TIME_MS, None, None)


def fixed(name, typ, flags):
    py = _ops()
    size, unpack = py["_FIXED"][typ]
    if "E" in flags:
        return _error_code(name)
    if "M" in flags:
        return _timestamp(name, unpack)
    cdef _Fixed d = _Fixed.__new__(_Fixed)
    d.name, d.pure, d.message = name, py["fixed"](name, typ, flags), f"{name}: {typ} past the end"
    d.size, d.kind, d.unpack = size, _KINDS.get(typ, K_OTHER), unpack
    d.hint, d.names = py["display_of"](name)
    return d


def _error_code(name):
    cdef _ErrorCode d = _ErrorCode.__new__(_ErrorCode)
    d.name, d.pure, d.message = name, _ops()["_error_code"](name), f"{name}: int16 past the end"
    return d


def _timestamp(name, unpack):
    py = _ops()
    cdef _Timestamp d = _Timestamp.__new__(_Timestamp)
    d.name, d.pure, d.message = name, py["_timestamp"](name, unpack), f"{name}: int64 past the end"
    d.unpack, d.int64 = unpack, unpack is py["_FIXED"]["int64"][1]
    return d


cdef class _Bool(Dec):
    cdef object name, pure, message

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, 1, self.message)
        if p < 0:
            return self.pure(r, ctx)
        return new_field(self.name, (<const unsigned char*>PyBytes_AS_STRING((<WireReader>r).buf))[p] != 0, p, 1, None, None, None,
                         None)


def boolean(name, typ, flags):
    cdef _Bool d = _Bool.__new__(_Bool)
    d.name, d.pure, d.message = name, _ops()["boolean"](name, typ, flags), f"{name}: bool past the end"
    return d


cdef const char* _HEX = b"0123456789abcdef"


cdef class _Uuid(Dec):
    cdef object name, pure, message

    cdef object dec(self, object r, object ctx):
        cdef char out[36]
        cdef int i, j = 0
        cdef unsigned char b
        cdef const unsigned char* d
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, 16, self.message)
        if p < 0:
            return self.pure(r, ctx)
        d = <const unsigned char*>PyBytes_AS_STRING((<WireReader>r).buf) + p
        for i in range(16):
            if i == 4 or i == 6 or i == 8 or i == 10:
                out[j] = 45  # '-'
                j += 1
            b = d[i]
            out[j] = _HEX[b >> 4]
            out[j + 1] = _HEX[b & 15]
            j += 2
        return new_field(self.name, PyUnicode_DecodeASCII(out, 36, NULL), p, 16, None, None, None, None)


def uuid_field(name, typ, flags):
    cdef _Uuid d = _Uuid.__new__(_Uuid)
    d.name, d.pure, d.message = name, _ops()["uuid_field"](name, typ, flags), f"{name}: uuid past the end"
    return d


cdef class _Uvarint(Dec):
    cdef object name, pure

    cdef object dec(self, object r, object ctx):
        cdef uint64_t v
        cdef Py_ssize_t nxt
        if not _reads(r):
            return self.pure(r, ctx)
        cdef WireReader rd = <WireReader>r
        p = rd.pos
        if _uvarint_fast(<bytes>rd.buf, p, rd.end, 9, &v, &nxt):
            rd.pos = nxt
            return new_field(self.name, v, p, nxt - <Py_ssize_t>p, None, None, None, None)
        value = rd.uvarint()
        return new_field(self.name, value, p, rd.pos - p, None, None, None, None)


def uvarint_field(name, typ, flags):
    cdef _Uvarint d = _Uvarint.__new__(_Uvarint)
    d.name, d.pure = name, _ops()["uvarint_field"](name, typ, flags)
    return d


# -- strings and bytes ----------------------------------------------------------------------

cdef class _Blob(Dec):
    """A string (text: UTF-8 with an int16 or compact length, recorded in ctx.topics or
    ctx.groups as flagged) or a bytes field (an int32 or compact length, hint BYTES)."""
    cdef object name, pure
    cdef bint flexible, text, topic, group

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef WireReader rd = <WireReader>r
        cdef bytes buf = rd.buf
        start = rd.pos
        cdef int64_t n = _length(rd, self.flexible, not self.text)
        if n == -1:
            return new_field(self.name, None, start, rd.pos - start, None, None, None, None)
        cdef Py_ssize_t p = _take(rd, n, self.name)
        cdef Py_ssize_t size = n
        cdef bint inside = _in_buf(buf, p, size)
        if not self.text:
            if inside:
                v = PyBytes_FromStringAndSize(PyBytes_AS_STRING(buf) + p, size)
            else:
                v = bytes(buf[p:p + size])
            return new_field(self.name, v, start, rd.pos - start, None, BYTES, None, None)
        if inside:
            v = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(buf) + p, size, "replace")
        else:
            v = bytes(buf[p:p + size]).decode("utf-8", "replace")
        if self.topic:
            ctx.topics.append(v)
        elif self.group:
            ctx.groups.append(v)
        return new_field(self.name, v, start, rd.pos - start, None, None, None, None)


def string(name, flexible, flags):
    cdef _Blob d = _Blob.__new__(_Blob)
    d.name, d.pure = name, _ops()["string"](name, flexible, flags)
    d.flexible, d.text, d.topic, d.group = flexible, True, "T" in flags, "G" in flags
    return d


def raw_bytes(name, flexible):
    cdef _Blob d = _Blob.__new__(_Blob)
    d.name, d.pure, d.flexible = name, _ops()["raw_bytes"](name, flexible), flexible
    return d


# -- containers -----------------------------------------------------------------------------

cdef class _Array(Dec):
    cdef object name, pure, elem
    cdef bint flexible
    cdef Py_ssize_t min_size

    cdef object dec(self, object r, object ctx):
        cdef Py_ssize_t i, k
        if not _reads(r):
            return self.pure(r, ctx)
        cdef WireReader rd = <WireReader>r
        name = self.name
        start = rd.pos
        cdef int64_t n = _length(rd, self.flexible, True)
        if n < 0:
            if n < -1:
                raise BadLength(f"{name}: array length {n}", start)
            return new_field(name, None, start, rd.pos - start, None, ARRAY, None, None)
        remain = rd.end - rd.pos
        if n * self.min_size > remain:
            raise BadLength(f"{name}: {n} elements exceed the {remain} bytes that remain", start)
        keep = ctx.budget.elements(n)
        cdef list kids = []
        elem = self.elem
        k = keep
        try:
            if isinstance(elem, Dec):
                for i in range(k):
                    kids.append((<Dec>elem).dec(r, ctx))
            else:
                for i in range(k):
                    kids.append(elem(r, ctx))
        except DecodeError as e:
            raise keep_partial(e, name, start, kids, ARRAY) from None
        if keep < n:
            cap = _ops()["_array_cap"](ctx, name, n, keep, start, rd.pos)
            cap.partial = new_field(name, None, start, rd.pos - start, kids, ARRAY, None,
                                    f"{name} (first {keep} of {n})")
            raise cap
        return new_field(name, None, start, rd.pos - start, kids, ARRAY, None, None)


def array(name, elem, flexible, min_size):
    cdef _Array d = _Array.__new__(_Array)
    d.name, d.pure, d.elem = name, _ops()["array"](name, elem, flexible, min_size), elem
    d.flexible, d.min_size = flexible, min_size
    return d


cdef class _Struct(Dec):
    cdef object name, pure, tagged
    cdef tuple regular

    cdef object dec(self, object r, object ctx):
        cdef Py_ssize_t p
        if not _reads(r):
            return self.pure(r, ctx)
        cdef WireReader rd = <WireReader>r
        cdef bytes buf = rd.buf
        name = self.name
        start = rd.pos
        cdef list kids = []
        try:
            for f in self.regular:
                kids.append(_run(f, r, ctx))
        except DecodeError as e:
            raise keep_partial(e, name, start, kids, STRUCT) from None
        if self.tagged is not None:
            p = rd.pos
            if p < <Py_ssize_t>rd.end and (
                    (<const unsigned char*>PyBytes_AS_STRING(buf))[p] == 0 if _in_buf(buf, p, 1)
                    else buf[p] == 0):
                rd.pos = p + 1  # the usual empty tagged-field section
            else:
                try:
                    _ops()["tagged_section"](r, ctx, self.tagged, kids)
                except ArrayCap as e:
                    raise keep_partial(e, name, start, kids, STRUCT) from None
        return new_field(name, None, start, rd.pos - start, kids, STRUCT, None, None)


def struct_dec(name, regular, tagged):
    """A struct: its regular fields, then (flexible versions) its tagged-field section."""
    cdef _Struct d = _Struct.__new__(_Struct)
    d.name, d.pure = name, _ops()["struct_dec"](name, regular, tagged)
    d.regular, d.tagged = tuple(regular), tagged
    return d


cdef class _Records(Dec):
    """A records field: length-prefixed bytes handed to the record-batch decoder
    (records.decode_records)."""
    cdef object name, pure
    cdef bint flexible

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef WireReader rd = <WireReader>r
        cdef bytes buf = rd.buf
        name = self.name
        start = rd.pos
        cdef int64_t n = _length(rd, self.flexible, True)
        if n == -1:
            return new_field(name, None, start, rd.pos - start, None, None, None, None)
        cdef Py_ssize_t p = _take(rd, n, name)
        opts = ctx.opts
        if not opts.decode_records or n == 0:
            return new_field(name, buf[p:p + n], start, rd.pos - start, None, BYTES, None, None)
        py = _ops()
        try:
            f, diags, stats = py["decode_records"](buf, p, p + n, opts, name, True, ctx.budget)
        except DecodeError as e:
            ctx.diags.append(py["DIAGNOSTICS"]("records", f"{name}: {e}", e.offset))
            return new_field(name, buf[p:p + n], start, rd.pos - start, None, RAW, None, None)
        ctx.diags.extend(diags)
        ctx.records[id(f)] = stats
        return f


def records(name, flexible):
    """A records field: length-prefixed bytes handed to the record-batch decoder."""
    cdef _Records d = _Records.__new__(_Records)
    d.name, d.pure, d.flexible = name, _ops()["records"](name, flexible), flexible
    return d


cdef class _Nullable(Dec):
    cdef object name, pure, inner, message

    cdef object dec(self, object r, object ctx):
        if not _reads(r):
            return self.pure(r, ctx)
        cdef Py_ssize_t p = _claim(<WireReader>r, 1, self.message)
        if p < 0:
            return self.pure(r, ctx)
        if (<const unsigned char*>PyBytes_AS_STRING((<WireReader>r).buf))[p] >= 0x80:
            return new_field(self.name, None, p, 1, None, STRUCT, None, None)
        f = _run(self.inner, r, ctx)
        f.offset, f.length = p, (<WireReader>r).pos - p
        return f


def nullable_struct(name, inner):
    """A nullable struct field carries an int8 marker: -1 null, 1 present."""
    cdef _Nullable d = _Nullable.__new__(_Nullable)
    d.name, d.pure, d.inner = name, _ops()["nullable_struct"](name, inner), inner
    d.message = f"{name}: presence byte past the end"
    return d

