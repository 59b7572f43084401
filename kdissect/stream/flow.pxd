cdef class Tally:
    cdef public object count, frames, first_ts, last_ts

cdef class Trouble:
    cdef public object retransmissions, zero_windows, resets, reset_after_fin

cdef class SeqState:
    cdef public object high, high_ts, ack, ack_ts, window, dupacks
