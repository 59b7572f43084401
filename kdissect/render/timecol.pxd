cdef class TimeColumn:
    cdef public object fmt, first, width, needs_every_message, _origin, _shown, _seen, _last
