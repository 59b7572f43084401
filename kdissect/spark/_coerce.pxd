# values.py's column coercions for the compiled Spark twins (kdissect/spark/_coerce.pyx): the
# common cases (None, an int in range, a str) in C, every other value through values.py; and
# round(v, 3) of the milliseconds of a round trip.

cdef object int32(object v)
cdef object int64(object v)
cdef object text(object v)
cdef object round3(object v)
