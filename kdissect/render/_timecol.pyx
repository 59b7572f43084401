"""Compiled twin of kdissect/render/timecol.py's `seconds` (see kdissect/accel.py): the same
text for every float whose microseconds fit in 62 bits, rounded as round() rounds (half to
even) and its digits written in C; anything else (an int, a huge or non-finite float) runs the pure
function."""

from libc.math cimport fabs, isfinite, round as c_round

cdef object _pure_seconds = None


def seconds(s):
    """timecol.seconds."""
    global _pure_seconds
    cdef double x, r
    cdef long long us
    cdef unsigned long long mag, whole
    cdef char buf[32]
    cdef int i = 32, k
    if type(s) is float:
        x = <double>s * 1000000.0  # s * 1_000_000: the int is converted to a double first
        if isfinite(x) and fabs(x) < 4.0e18:
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
            return buf[i:32].decode("ascii")
    if _pure_seconds is None:
        from kdissect import accel
        _pure_seconds = accel.pure("kdissect.render.timecol", "seconds")
    return _pure_seconds(s)
