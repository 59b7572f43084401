"""values.py's column coercions, shared by the compiled Spark twins (_rows.pyx, _records.pyx):
as_int, as_bigint and as_text with their common cases (None, an int in range, a str, an int's
text) in C and every other value handed to the pure function, so the rules stay values.py's;
round3, round(v, 3) of a round trip's milliseconds."""

from kdissect.render._time cimport thousandths

import kdissect.spark.values as V

cdef object as_int = V.as_int, as_bigint = V.as_bigint, as_text = V.as_text
cdef object INT32_LO = V.INT32[0], INT32_HI = V.INT32[1], INT64_LO = V.INT64[0], INT64_HI = V.INT64[1]


cdef inline object _ranged(object v, object lo, object hi, object pure):
    if v is None:
        return None
    if type(v) is int:
        return v if lo <= v <= hi else None
    return pure(v)


cdef object int32(object v):
    """values.as_int."""
    return _ranged(v, INT32_LO, INT32_HI, as_int)


cdef object int64(object v):
    """values.as_bigint."""
    return _ranged(v, INT64_LO, INT64_HI, as_bigint)


cdef object text(object v):
    """values.as_text."""
    if v is None or type(v) is str:
        return v
    if type(v) is int:
        return str(v)
    return as_text(v)


cdef object round3(object v):
    """round(v, 3): in C where render/_time.pxd's thousandths can, else by round()."""
    cdef double r
    if type(v) is float and thousandths(<double>v, &r):
        return r
    return round(v, 3)
