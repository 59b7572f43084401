cdef class Reassembler:
    cdef public object next_seq, next_abs, backlog, order, backlog_bytes, history, last_frame
    cdef public object fin_seq, pool, counted

cdef class Buffered:
    cdef public object used, limit

cdef class Data:
    cdef public object data, frame, ts
