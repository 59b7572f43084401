# A message's time and a round trip's milliseconds as the JSON export and the Spark rows give
# them, `round(ts, 9)` and `round(ms, 3)`, for compiled code
# (`from kdissect.render._time cimport round9, thousandths`).

from libc.math cimport fabs, rint


cdef inline object round9(object t):
    """round(t, 9): t itself for a float of 2**24 or more (its neighbours are over 2e-9 apart, so
    the nearest double to t rounded to 9 decimals is t: every capture's times), which saves the
    thousands of instructions round() costs."""
    if type(t) is float and fabs(<double>t) >= 16777216.0:
        return t
    return round(t, 9)


cdef inline bint thousandths(double y, double* out) noexcept:
    """round(y, 3) in out[0], without round()'s dtoa, when y's thousandths are below 2**30 and
    not within 2**-20 of a half: then y * 1000 is within 2**-23 of the exact product, the rounded
    thousandths are rint(y * 1000), and round() gives the double nearest them over 1000, which is
    what the division gives. False, and out[0] untouched, else (round() decides)."""
    cdef double p = y * 1000.0
    cdef double r
    if not fabs(p) < 1073741824.0:
        return False
    r = rint(p)
    if not fabs(p - r) < 0.5 - 1.0 / 1048576.0:
        return False
    out[0] = r / 1000.0
    return True
