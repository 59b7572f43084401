# Byte-reading helpers shared by the compiled core (`from kdissect.wire._bytes cimport be,
# reads_bytes`).

from libc.stdint cimport uint64_t


cdef inline uint64_t be(const unsigned char* d, int size) noexcept:
    """The big-endian unsigned integer of `size` (at most 8) bytes at d, which the caller has
    checked lie within its buffer."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | d[i]
    return v


from cpython.object cimport PyTypeObject

from kdissect.wire.reader cimport WireReader


cdef extern from "Python.h":
    bint PyType_HasFeature(PyTypeObject* t, unsigned long feature)
    unsigned long Py_TPFLAGS_HEAPTYPE


cdef inline bint reads_bytes(object r) noexcept:
    """Whether the compiled core may read `r` through the slots wire/reader.pxd declares: a
    compiled WireReader over bytes (not an object of the class of reader.py's source, which
    KDISSECT_PURE=1 loads, nor of a subclass)."""
    return (type(r) is WireReader and not PyType_HasFeature(<PyTypeObject*>WireReader, Py_TPFLAGS_HEAPTYPE)
            and type((<WireReader>r).buf) is bytes)
