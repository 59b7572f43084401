cdef class Output:
    cdef public object hold, held, counters, queue, queued, added, recent, recent_total, counted
    cdef public object left, releases, closed_streams, now
