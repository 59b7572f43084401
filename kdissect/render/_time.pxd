# A message's time as the JSON export gives it, `round(ts, 9)`, for compiled code
# (`from kdissect.render._time cimport round9`).

from libc.math cimport fabs


cdef inline object round9(object t):
    """round(t, 9): t itself for a float of 2**24 or more (its neighbours are over 2e-9 apart, so
    the nearest double to t rounded to 9 decimals is t: every capture's times), which saves the
    thousands of instructions round() costs."""
    if type(t) is float and fabs(<double>t) >= 16777216.0:
        return t
    return round(t, 9)
