cdef class TcpSegment:
    cdef public object frame, ts, src, sport, dst, dport, seq, ack, flags, window, payload, missing
