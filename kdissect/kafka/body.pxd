cdef class Body:
    cdef public object fields, summary, info, diagnostics
