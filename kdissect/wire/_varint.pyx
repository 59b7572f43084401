"""Compiled twin of kdissect/wire/varint.py (see kdissect/accel.py): the same values, next
positions and exceptions. Varints of up to nine bytes in a bytes buffer are read in C; anything
else (another buffer, a tenth byte, a varint cut short or too long) is handed to varint.py."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from kdissect import accel

cdef object _pure_uvarint = None


cdef object _pure(object buf, Py_ssize_t pos, Py_ssize_t end):
    global _pure_uvarint
    if _pure_uvarint is None:
        _pure_uvarint = accel.pure("kdissect.wire.varint", "uvarint_at")
    return _pure_uvarint(buf, pos, end)


cdef inline object _uvarint(object buf, Py_ssize_t pos, Py_ssize_t end):
    if type(buf) is not bytes or pos < 0:
        return _pure(buf, pos, end)
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
    cdef Py_ssize_t p = pos
    cdef unsigned long long result = 0
    cdef int shift = 0
    cdef unsigned char b
    while shift < 63 and p < end and p < size:  # nine bytes fit in 63 bits
        b = data[p]
        p += 1
        result |= (<unsigned long long>(b & 0x7F)) << shift
        if b < 0x80:
            return result, p
        shift += 7
    return _pure(buf, pos, end)


def uvarint_at(buf, Py_ssize_t pos, Py_ssize_t end):
    """The unsigned varint at pos (at most 10 bytes, before end)."""
    return _uvarint(buf, pos, end)


def varint_at(buf, Py_ssize_t pos, Py_ssize_t end):
    """The zig-zag signed varint at pos (Kafka records, protobuf sint)."""
    v, pos = _uvarint(buf, pos, end)
    return (v >> 1) ^ -(v & 1), pos
