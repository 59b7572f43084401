"""Compiled twin of kdissect/render/timecol.py's `seconds` and `column_text` (see
kdissect/accel.py): the same text. `seconds` of a float whose microseconds fit in 62 bits is
rounded as round() rounds (half to even) and its digits written in C; `column_text` of the
default format (`r`) reads an exact TimeColumn's and an exact Message's slots once the column's
origin is known. Anything else (an int, a huge or non-finite float, another format, objects
that are not exactly those classes) runs the pure function."""

from cpython.object cimport PyTypeObject
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.math cimport fabs, isfinite, round as c_round

from kdissect.model cimport Message
from kdissect.render.timecol cimport TimeColumn

cdef extern from "Python.h":
    bint PyType_HasFeature(PyTypeObject* t, unsigned long feature)
    unsigned long Py_TPFLAGS_HEAPTYPE

# Whether the classes are the compiled ones whose slots the .pxd files declare (not the classes
# of the sources, which KDISSECT_PURE=1 loads).
cdef bint SLOTS = (not PyType_HasFeature(<PyTypeObject*>Message, Py_TPFLAGS_HEAPTYPE)
                   and not PyType_HasFeature(<PyTypeObject*>TimeColumn, Py_TPFLAGS_HEAPTYPE))
DEF MAX_WIDTH = 64

cdef object _pure_seconds = None
cdef object _pure_column_text = None


cdef void _load() except *:
    global _pure_seconds, _pure_column_text
    if _pure_seconds is None:
        from kdissect import accel
        _pure_seconds = accel.pure("kdissect.render.timecol", "seconds")
        _pure_column_text = accel.pure("kdissect.render.timecol", "column_text")


cdef str _seconds(double s, Py_ssize_t width):
    """seconds(s) right-aligned to `width` (at most MAX_WIDTH), or None when the pure function
    must say."""
    cdef double x = s * 1000000.0  # s * 1_000_000: the int is converted to a double first
    cdef double r
    cdef long long us
    cdef unsigned long long mag, whole
    cdef char buf[MAX_WIDTH + 32]
    cdef int end = MAX_WIDTH + 32
    cdef int i = end, k
    if not (isfinite(x) and fabs(x) < 4.0e18):
        return None
    r = c_round(x)  # round(x): half away from zero, then to even on a tie (float.__round__)
    if fabs(x - r) == 0.5:
        r = 2.0 * c_round(x / 2.0)
    us = <long long>r
    mag = <unsigned long long>(-us if us < 0 else us)
    whole = mag // 1000000
    mag = mag % 1000000
    for k in range(6):  # the six decimals, then the point, the seconds and the sign
        i -= 1
        buf[i] = c'0' + <char>(mag % 10)
        mag //= 10
    i -= 1
    buf[i] = c'.'
    while True:
        i -= 1
        buf[i] = c'0' + <char>(whole % 10)
        whole //= 10
        if whole == 0:
            break
    if us < 0:
        i -= 1
        buf[i] = c'-'
    while end - i < width:
        i -= 1
        buf[i] = c' '
    return buf[i:end].decode("ascii")


def seconds(s):
    """timecol.seconds."""
    if type(s) is float:
        t = _seconds(<double>s, 0)
        if t is not None:
            return t
    _load()
    return _pure_seconds(s)


def column_text(clock, m):
    """timecol.column_text."""
    cdef TimeColumn c
    cdef Py_ssize_t width
    if type(clock) is TimeColumn and type(m) is Message and SLOTS:
        c = <TimeColumn>clock
        origin, ts, w = c._origin, (<Message>m).ts, c.width
        if (type(origin) is float and type(ts) is float and type(w) is int and 0 <= w <= MAX_WIDTH
                and c.fmt == "r"):
            width = w
            t = _seconds(<double>ts - <double>origin, width)
            if t is not None:
                return t
    _load()
    return _pure_column_text(clock, m)
