"""Compiled twin of the packet-list line of kdissect/render/text.py (see kdissect/accel.py): the
same text for every message. A message that is exactly a compiled Message (model.pxd) with the
usual types (a frame number below 2**62, str addresses, protocol, summary and time column,
a float round trip) is written here, its attributes read from their slots and the columns
padded in C; anything else runs the pure function, so odd values format,
and raise, exactly as there."""

from cpython.mem cimport PyMem_Free
from cpython.object cimport PyTypeObject
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.math cimport isfinite

from kdissect.model cimport Message

cdef extern from "Python.h":
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    bint PyType_HasFeature(PyTypeObject* t, unsigned long feature)
    unsigned long Py_TPFLAGS_HEAPTYPE
    bint PyUnicode_IS_ASCII(object o)
    const unsigned char* PyUnicode_1BYTE_DATA(object o)

# Whether Message is the compiled class whose slots model.pxd declares (not the class of
# model.py's source, which KDISSECT_PURE=1 loads).
cdef bint MESSAGE_SLOTS = not PyType_HasFeature(<PyTypeObject*>Message, Py_TPFLAGS_HEAPTYPE)

DEF MAX_PAD = 64
# " " * n for n up to MAX_PAD: a column's padding without a new string
cdef tuple PADS = tuple([" " * n for n in range(MAX_PAD + 1)])
cdef dict UPPER = {}  # protocol -> protocol.upper(), for the few protocols there are
DEF MAX_UPPER = 64

# text.py's own functions, looked up on first use (text.py imports this module as it loads).
cdef object _pure_summary_plain = None
cdef object _pure_rtt_text = None
cdef object _shown = None
cdef str LOCK = ""


cdef void _load() except *:
    global _pure_summary_plain, _pure_rtt_text, _shown, LOCK
    if _shown is None:
        from kdissect import accel, text
        from kdissect.render import text as render_text
        _pure_summary_plain = accel.pure(render_text.__name__, "summary_plain")
        _pure_rtt_text = accel.pure(render_text.__name__, "rtt_text")
        LOCK = render_text.LOCK
        _shown = text.shown


cdef inline str _pad(Py_ssize_t n):
    """n spaces (none when n <= 0)."""
    if n <= 0:
        return ""
    if n <= MAX_PAD:
        return <str>PADS[n]
    return " " * n


cdef str _shown_text(str s):
    """text.shown: ASCII without control characters as it is, anything else as text.shown
    makes it."""
    cdef const unsigned char* p
    cdef Py_ssize_t i, n
    cdef unsigned char c
    if PyUnicode_IS_ASCII(s):
        p = PyUnicode_1BYTE_DATA(s)
        n = PyUnicode_GET_LENGTH(s)
        for i in range(n):
            c = p[i]
            if c < 0x20 or c == 0x7F:
                return _shown(s)
        return s
    return _shown(s)


cdef str _fixed(double v, int precision):
    """format(v, f".{precision}f") of a finite v."""
    cdef char* r = PyOS_double_to_string(v, b"f", precision, 0, NULL)
    try:
        return r.decode("ascii")
    finally:
        PyMem_Free(r)


cdef object _rtt(Message m):
    """rtt_text of an exact Message: its text, or None when the pure function must say."""
    match = m.match
    if match is None:
        return ""
    rtt = match.rtt
    if rtt is None:
        return ""
    if m.kind != "response":
        return ""
    if type(rtt) is not float:
        return None
    cdef double ms = <double>rtt * 1000.0
    if not isfinite(ms):
        return None
    if ms >= 0.1:
        return " (" + _fixed(ms, 1) + " ms)"
    return " (" + _fixed(ms * 1000.0, 0) + " µs)"


def rtt_text(m):
    """text.rtt_text."""
    if type(m) is Message and MESSAGE_SLOTS:
        t = _rtt(<Message>m)
        if t is not None:
            return t
    _load()
    return _pure_rtt_text(m)


def summary_plain(m, when, width_addr=21):
    """text.summary_plain."""
    cdef Message msg
    cdef unsigned long long frame
    cdef Py_ssize_t width
    cdef char buf[32]
    cdef int i = 32
    _load()
    if (type(m) is not Message or not MESSAGE_SLOTS or type(when) is not str or type(width_addr) is not int
            or not 0 <= width_addr <= 4096):
        return _pure_summary_plain(m, when, width_addr)
    msg = <Message>m
    src, dst, protocol, summary = msg.src, msg.dst, msg.protocol, msg.summary
    if (type(msg.frame) is not int or type(src) is not str or type(dst) is not str or type(protocol) is not str
            or type(summary) is not str or not 0 <= msg.frame < (1 << 62)):
        return _pure_summary_plain(m, when, width_addr)
    rtt = _rtt(msg)
    if rtt is None:
        return _pure_summary_plain(m, when, width_addr)
    width = width_addr
    frame = msg.frame
    while True:  # f"{frame:>6}"
        i -= 1
        buf[i] = c'0' + <char>(frame % 10)
        frame //= 10
        if frame == 0:
            break
    while i > 32 - 6:
        i -= 1
        buf[i] = c' '
    upper = UPPER.get(protocol)
    if upper is None:
        upper = protocol.upper()
        if len(UPPER) < MAX_UPPER:
            UPPER[protocol] = upper
    cdef str number = buf[i:32].decode("ascii"), column = <str>when, text = <str>rtt
    cdef str left = _pad(width - PyUnicode_GET_LENGTH(src)), right = _pad(width - PyUnicode_GET_LENGTH(dst))
    cdef str proto = <str>upper, gap = _pad(9 - PyUnicode_GET_LENGTH(upper))
    cdef str lock = LOCK if msg.tls is not None else ""
    cdef str s = <str>src, d = <str>dst, shown = _shown_text(summary)
    return f"{number} {column} {left}{s} → {d}{right} {proto}{gap} {lock}{shown}{text}"
