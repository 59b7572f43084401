cdef class ChunkIndex:
    cdef public object _ends, _frames, _ts, _first

cdef class LengthPrefixedFramer:
    cdef public object max_frame, min_frame, short_ok, empty, empty_ok, to_server, buf, base, index, synced
    cdef public object probe, skip_to
    cdef public object pending_diags, run, scan_to, waiting, pool, counted
