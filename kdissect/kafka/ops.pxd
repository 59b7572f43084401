cdef class Ctx:
    cdef public object opts, errors, topics, groups, diags, records, state, version, budget
