cdef class Message:
    cdef public object number, frame, frames, ts, ts_end, stream, src, dst, to_server
    cdef public object protocol, kind, summary, fields, diagnostics, info, match, peer
    cdef public object expects_response, data, capture, inflated, tls
    cdef object __weakref__

cdef class Pdu:
    cdef public object data, frames, ts, ts_end, to_server, diagnostics
