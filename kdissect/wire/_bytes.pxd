# Byte-reading helpers shared by the compiled core (`from kdissect.wire._bytes cimport be`).
# The caller has checked that the bytes lie within its buffer.

from libc.stdint cimport uint64_t


cdef inline uint64_t be(const unsigned char* d, int size) noexcept:
    """The big-endian unsigned integer of `size` (at most 8) bytes at d."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | d[i]
    return v
