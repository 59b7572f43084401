cdef class Ctx:
    cdef public object opts, budget, diags, records, batches, nbytes
