# An integer's decimal digits written in C, for compiled code
# (`from kdissect.wire._decimal cimport decimal`).

cdef extern from *:
    """
    #include <string.h>
    /* "00" to "99" */
    static const char kdissect_digit_pairs[201] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";

    /* Writes x in decimal (a minus sign first when negative) into the bytes just before `end`,
       at most 20 of them; returns their count. Two digits at a time. */
    static CYTHON_INLINE Py_ssize_t kdissect_decimal(long long x, char *end) {
        unsigned long long u = x < 0 ? (unsigned long long)(-(x + 1)) + 1 : (unsigned long long)x;
        unsigned int r;
        char *p = end;
        while (u >= 100) {
            r = (unsigned int)(u % 100);
            u /= 100;
            p -= 2;
            memcpy(p, kdissect_digit_pairs + 2 * r, 2);
        }
        if (u >= 10) {
            p -= 2;
            memcpy(p, kdissect_digit_pairs + 2 * u, 2);
        } else {
            *--p = (char)('0' + u);
        }
        if (x < 0)
            *--p = '-';
        return end - p;
    }
    """
    Py_ssize_t decimal "kdissect_decimal"(long long x, char* end) noexcept
