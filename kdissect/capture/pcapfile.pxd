cdef class Interfaces:
    cdef public object _links, _ticks, _offsets, _per_second, _last
