cdef class Inflation:
    cdef public object carried, spent, entries

cdef class Budget:
    cdef public object inflate_left, inflate_limit, inflated, elements_left, elements_limit
    cdef public object entries_left, entries_limit, _said, _own_left, _capture, _capture_limit
    cdef public object _entries_cap

cdef class ConversationState:
    cdef public object pending, capture
