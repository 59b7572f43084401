cdef class Decoder:
    cdef public object registry, opts, output, counters, flow_filter, capture, observers, skipped
    cdef public object given_up, keylog, shared, quiet_opts
