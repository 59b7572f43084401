cdef class Pipeline:
    cdef public object counters, shared, held, output, observers, tcp
