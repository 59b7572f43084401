# An integer's decimal digits written in C, for compiled code
# (`from kdissect.wire._decimal cimport decimal`).


cdef inline Py_ssize_t decimal(long long x, char* end) noexcept:
    """Writes x in decimal (a minus sign first when negative) into the bytes just before `end`,
    at most 20 of them; returns their count."""
    cdef unsigned long long u = <unsigned long long>(-(x + 1)) + 1 if x < 0 else <unsigned long long>x
    cdef char* p = end
    while True:
        p -= 1
        p[0] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if x < 0:
        p -= 1
        p[0] = 45  # -
    return end - p
