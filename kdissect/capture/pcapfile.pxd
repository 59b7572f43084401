cdef class Interfaces:
    cdef public object _links, _ticks, _offsets, _per_second, _last

cdef class RawFrame:
    cdef readonly object number, ts, linktype, data, wirelen
