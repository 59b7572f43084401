"""Compiled twin of kdissect/framing/length_prefixed.py's `next_length` (see kdissect/accel.py):
the same offset for every buffer, read through a pointer (each read's offset is compared with
the buffer's length first). Anything but a bytearray goes to the pure function."""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport uint32_t

cdef object _pure = None  # length_prefixed's own next_length


def next_length(buf, i, last, min_frame, max_frame):
    """length_prefixed.next_length(buf, i, last, min_frame, max_frame)."""
    global _pure
    if (type(buf) is not bytearray or type(i) is not int or type(last) is not int
            or type(min_frame) is not int or type(max_frame) is not int
            or not 0 <= min_frame <= max_frame < 1 << 32 or not 0 <= i < 1 << 62 or not -1 <= last < 1 << 62):
        if _pure is None:
            from kdissect import accel
            _pure = accel.pure("kdissect.framing.length_prefixed", "next_length")
        return _pure(buf, i, last, min_frame, max_frame)
    cdef Py_ssize_t at = i, end = min(<Py_ssize_t>last, PyByteArray_GET_SIZE(buf) - 4)
    cdef uint32_t low = min_frame, high = max_frame, n
    cdef unsigned int top = min(high >> 24, 255)
    cdef const unsigned char* p = <const unsigned char*>PyByteArray_AS_STRING(buf)
    while at <= end:
        if p[at] <= top:
            n = (<uint32_t>p[at] << 24) | (<uint32_t>p[at + 1] << 16) | (<uint32_t>p[at + 2] << 8) | p[at + 3]
            if low <= n <= high:
                return at
        at += 1
    return -1
