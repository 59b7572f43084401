cdef class WireReader:
    cdef public object buf, pos, end
