"""Compiled twin of the header readers of kdissect/kafka/headers.py (see kdissect/accel.py).

`read_length`, `read_request_header` and `read_response_header` give the length, header tuple
and Field tree of the pure readers, and leave the reader where they do. A length or header that
reads cleanly out of a bytes buffer is read here, in C, with explicit bounds checks; anything
else (another buffer, a length or count out of bounds, a tagged field that is not a small
varint, ControlledShutdown v0's header quirk) leaves the reader untouched and is handed to the
pure reader, so that the exceptions and the rare paths have one implementation.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, uint16_t, uint32_t, uint64_t

from kdissect._model cimport new_field
from kdissect.wire._bytes cimport be as _be
from kdissect.wire._bytes cimport reads_bytes
from kdissect.wire.reader cimport WireReader

from kdissect.kafka.apis import APIS
from kdissect.model import ENUM, RAW, STRUCT

# The API keys the tables know, by key: their names and first flexible versions (-1: never).
DEF KEYS = 1024
cdef list _NAMES = [None] * KEYS
cdef int _FIRST_FLEXIBLE[KEYS]
for _k in range(KEYS):
    _FIRST_FLEXIBLE[_k] = -1
for _k, _api in APIS.items():
    if 0 <= _k < KEYS:
        _NAMES[_k] = _api.name
        _FIRST_FLEXIBLE[_k] = -1 if _api.first_flexible is None else _api.first_flexible

DEF CONTROLLED_SHUTDOWN = 7
DEF MAX_TAGS = 16  # tagged fields read here; a header with more is handed to the pure reader

cdef object _pure_length = None
cdef object _pure_request = None
cdef object _pure_response = None
cdef object RequestHeader = None


cdef void _load():
    global _pure_length, _pure_request, _pure_response, RequestHeader
    if _pure_request is None:
        import kdissect.accel as accel
        import kdissect.kafka.headers as headers
        _pure_length = accel.pure("kdissect.kafka.headers", "read_length")
        _pure_request = accel.pure("kdissect.kafka.headers", "read_request_header")
        _pure_response = accel.pure("kdissect.kafka.headers", "read_response_header")
        RequestHeader = headers.RequestHeader


cdef inline Py_ssize_t _uvarint32(const unsigned char* d, Py_ssize_t p, Py_ssize_t end,
                                  uint64_t* out) noexcept:
    """An unsigned varint of at most 5 bytes wholly before end whose value fits in 32 bits: the
    position after it; -1 for anything else (the pure reader then decides)."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef int i
    cdef unsigned char b
    for i in range(5):
        if p >= end:
            return -1
        b = d[p]
        p += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            if v > 0xFFFFFFFF:
                return -1
            out[0] = v
            return p
        shift += 7
    return -1


cdef Py_ssize_t _tagged(const unsigned char* d, Py_ssize_t p, Py_ssize_t end, dict tagged) except -2:
    """A header's tagged-field section at p into `tagged` ({tag: bytes}: a repeated tag keeps
    its first place and its last bytes, as the pure reader's dict does); the position after it,
    or -1 when it is not a clean section of at most MAX_TAGS fields."""
    cdef uint64_t n, tag, size
    cdef Py_ssize_t i
    p = _uvarint32(d, p, end, &n)
    if p < 0 or n > MAX_TAGS or <Py_ssize_t>n * 2 > end - p:
        return -1
    for i in range(<Py_ssize_t>n):
        p = _uvarint32(d, p, end, &tag)
        if p < 0:
            return -1
        p = _uvarint32(d, p, end, &size)
        if p < 0 or <Py_ssize_t>size > end - p:
            return -1
        tagged[<object>tag] = PyBytes_FromStringAndSize(<const char*>d + p, <Py_ssize_t>size)
        p += <Py_ssize_t>size
    return p


cdef list _tag_fields(dict tagged):
    """The header's tag_<n> fields, one per tag."""
    return [new_field(f"tag_{tag}", raw, -1, 0, None, RAW, None, None) for tag, raw in tagged.items()]


def read_length(r):
    """headers.read_length."""
    _load()
    if not reads_bytes(r):
        return _pure_length(r)
    cdef WireReader rd = <WireReader>r
    buf = rd.buf
    cdef Py_ssize_t start = rd.pos
    cdef Py_ssize_t end = rd.end
    if start < 0 or end > PyBytes_GET_SIZE(buf) or end - start < 4:
        return _pure_length(r)
    cdef int32_t size = <int32_t>(<uint32_t>_be(<const unsigned char*>PyBytes_AS_STRING(buf) + start, 4))
    rd.pos = start + 4
    return size, new_field("length", size, start, 4, None, None, None, None)


def read_request_header(r):
    """headers.read_request_header."""
    _load()
    if not reads_bytes(r):
        return _pure_request(r)
    cdef WireReader rd = <WireReader>r
    buf = rd.buf
    cdef Py_ssize_t start = rd.pos
    cdef Py_ssize_t end = rd.end
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
    if start < 0 or end > size or end - start < 8:
        return _pure_request(r)
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef int api_key = <int16_t>(<uint16_t>_be(d + start, 2))
    cdef int version = <int16_t>(<uint16_t>_be(d + start + 2, 2))
    cdef int32_t corr = <int32_t>(<uint32_t>_be(d + start + 4, 4))
    if api_key < 0 or api_key >= KEYS or (api_key == CONTROLLED_SHUTDOWN and version == 0):
        return _pure_request(r)
    cdef int first = _FIRST_FLEXIBLE[api_key]
    cdef int hv = 2 if 0 <= first <= version else 1
    cdef Py_ssize_t p = start + 8
    if end - p < 2:
        return _pure_request(r)
    cdef Py_ssize_t n = <int16_t>(<uint16_t>_be(d + p, 2))
    p += 2
    if n < -1 or n > end - p:
        return _pure_request(r)
    if n == -1:
        client_id = None
    else:
        client_id = PyUnicode_DecodeUTF8(<const char*>d + p, n, "replace")
        p += n
    cdef Py_ssize_t client_end = p
    cdef dict tagged = {}
    if hv >= 2:
        p = _tagged(d, p, end, tagged)
        if p < 0:
            return _pure_request(r)
    name = _NAMES[api_key]
    if name is None:
        name = f"Unknown({api_key})"
    children = [
        new_field("api_key", api_key, start, 2, None, ENUM, name, None),
        new_field("api_version", version, start + 2, 2, None, None, None, None),
        new_field("correlation_id", corr, start + 4, 4, None, None, None, None),
        new_field("client_id", client_id, start + 8, client_end - start - 8, None, None, None, None),
    ]
    if tagged:
        children.extend(_tag_fields(tagged))
    rd.pos = p
    # The tuple itself: the NamedTuple's __new__ runs as Python code.
    hdr = tuple.__new__(RequestHeader, (api_key, version, corr, client_id, hv, tagged))
    return hdr, new_field("header", None, start, p - start, children, STRUCT, None, None)


def read_response_header(r, header_version):
    """headers.read_response_header."""
    _load()
    if not reads_bytes(r):
        return _pure_response(r, header_version)
    cdef WireReader rd = <WireReader>r
    buf = rd.buf
    cdef Py_ssize_t start = rd.pos
    cdef Py_ssize_t end = rd.end
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
    if start < 0 or end > size or end - start < 4:
        return _pure_response(r, header_version)
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef int32_t corr = <int32_t>(<uint32_t>_be(d + start, 4))
    cdef Py_ssize_t p = start + 4
    children = [new_field("correlation_id", corr, start, 4, None, None, None, None)]
    cdef dict tagged = {}
    if header_version >= 1:
        p = _tagged(d, p, end, tagged)
        if p < 0:
            return _pure_response(r, header_version)
        if tagged:
            children.extend(_tag_fields(tagged))
    rd.pos = p
    return corr, new_field("header", None, start, p - start, children, STRUCT, None, None)
