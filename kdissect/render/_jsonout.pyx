"""Compiled twin of kdissect/render/jsonout.py (see kdissect/accel.py): the same dicts, lists and
strings for every Field/Row tree and the same exceptions, with C type tests, C loops over byte
strings and direct calls between the tree walkers.

max_bytes: an exact int is read once per call (above the largest Py_ssize_t it cuts nothing,
as in Python; zero or below never cuts); anything else (a bool, an int subclass, a float) runs
the pure function, so odd arguments behave exactly as there. Trees nested deeper than Python's
recursion limit raise RecursionError, as the pure walkers do (not at the same depth: they use
more frames per level)."""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport (
    Py_UNICODE_ISPRINTABLE,
    PyUnicode_1BYTE_DATA,
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_New,
    PyUnicode_READ,
)
from libc.string cimport memchr, memcmp, memcpy

from kdissect import accel
from kdissect._model cimport (
    F_CHILDREN,
    F_DISPLAY,
    F_HINT,
    F_NAME,
    F_VALUE,
    R_COLUMNS,
    R_KIDS,
    R_VALUES,
    read_slot,
    reads_field_slots,
    reads_row_slots,
)
from kdissect.render._time cimport round9, thousandths
from kdissect.wire._decimal cimport decimal

from binascii import b2a_base64 as _b2a_base64
from sys import intern as _intern

from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, RAW, STRUCT, Field, Row
from kdissect.text import plural


cdef extern from "Python.h":
    int Py_EnterRecursiveCall(const char* where) except -1
    void Py_LeaveRecursiveCall()
    const Py_ssize_t PY_SSIZE_T_MAX


cdef str _STRUCT = STRUCT
cdef str _ARRAY = ARRAY
cdef str _RAW = RAW
cdef str _BYTES = BYTES
cdef tuple _ANY_HINTS = (RAW, STRUCT, ARRAY)
cdef frozenset _NAMED = frozenset({ENUM, FLAGS})
cdef object _Field = Field
cdef object _Row = Row
cdef const char* _HEX = b"0123456789abcdef"
cdef str _JSONOUT = "kdissect.render.jsonout"

# How each column of a Row kind becomes JSON, per column list: (name, how) pairs.
cdef enum:
    _AS_IS = 0  # the value is already plain
    _BYTES_OR_FIELD = 1  # a BYTES column
    _ANY_VALUE = 2  # RAW, STRUCT and ARRAY columns
cdef dict _ROW_PLANS = {}


cdef inline Py_ssize_t _limit(object max_bytes) except -2:
    """max_bytes as a cut length (0: no cut), or -1 when it is not an exact int."""
    cdef Py_ssize_t mb
    if type(max_bytes) is not int:
        return -1
    try:
        mb = max_bytes
    except OverflowError:  # beyond Py_ssize_t: below zero never cuts, above cuts nothing
        return 0 if max_bytes < 0 else PY_SSIZE_T_MAX
    return mb if mb > 0 else 0


cdef object _pure(str name):
    return accel.pure(_JSONOUT, name)


cdef bint _is_bytes_like(object v):
    return type(v) is bytes or type(v) is bytearray or type(v) is memoryview


cdef inline bint _plain_type(object v):
    tv = type(v)
    return tv is int or tv is str or tv is bool or v is None


# ---------------------------------------------------------------------------------------------
# Byte strings


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Whether the 8 bytes at p are all printable ASCII (0x20-0x7E): no high bit, no byte below
       0x20, no 0x7F (the word tests of "Bit Twiddling Hacks", hasless and haszero). */
    static CYTHON_INLINE int kdissect_ascii_text8(const unsigned char *p) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t w, del;
        memcpy(&w, p, 8);
        del = w ^ (ones * 0x7F);
        return !(w & highs) && !((w - ones * 0x20) & ~w & highs) && !((del - ones) & ~del & highs);
    }
    """
    bint kdissect_ascii_text8(const unsigned char* p)


cdef object _printable(const unsigned char* data, Py_ssize_t n):
    """printable() of the n bytes at data: the text when it is UTF-8 made of printable characters,
    tab, CR and LF, else None."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c
    cdef bint ascii = True
    cdef Py_UCS4 ch
    cdef unsigned int kind
    cdef void* udata
    while i < n:
        if n - i >= 8 and kdissect_ascii_text8(data + i):
            i += 8
            continue
        c = data[i]
        if c >= 0x80:
            ascii = False
            break
        if (c < 0x20 or c == 0x7F) and c != 0x09 and c != 0x0A and c != 0x0D:
            return None
        i += 1
    if ascii:
        s = PyUnicode_New(n, 127)
        memcpy(PyUnicode_1BYTE_DATA(s), data, n)
        return s
    try:
        s = PyUnicode_DecodeUTF8(<char*>data, n, NULL)
    except UnicodeDecodeError:
        return None
    kind = PyUnicode_KIND(s)
    udata = PyUnicode_DATA(s)
    for i in range(PyUnicode_GET_LENGTH(s)):
        ch = PyUnicode_READ(kind, udata, i)
        if not Py_UNICODE_ISPRINTABLE(ch) and ch != 0x09 and ch != 0x0A and ch != 0x0D:
            return None
    return s


cdef str _hex(const unsigned char* data, Py_ssize_t n):
    """bytes.hex() of the n bytes at data."""
    cdef Py_ssize_t i
    s = PyUnicode_New(n * 2, 127)
    cdef unsigned char* out = <unsigned char*>PyUnicode_1BYTE_DATA(s)
    for i in range(n):
        out[0] = _HEX[data[i] >> 4]
        out[1] = _HEX[data[i] & 0x0F]
        out += 2
    return s


cdef str _cut_marker(Py_ssize_t size, Py_ssize_t mb):
    """What a value cut at mb ends with ("" when it is not cut)."""
    if mb > 0 and size > mb:
        return f"…(+{plural(size - mb, 'byte')})"
    return ""


cdef str _bytes_value(bytes b, Py_ssize_t mb):
    """bytes_value() of a bytes object, mb >= 0."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    part = b[:mb] if cut else b
    return (<bytes>_b2a_base64(part, newline=False)).decode("ascii") + cut


cdef object _bytes_text(bytes b, Py_ssize_t mb):
    """bytes_text() of a bytes object, mb >= 0."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    text = _printable(<const unsigned char*>PyBytes_AS_STRING(b), mb if cut else size)
    return None if text is None else <str>text + cut


cdef str _text_or_hex(bytes b, Py_ssize_t mb):
    """text_or_hex() of a bytes object, mb >= 0."""
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(b)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
    cdef str cut = _cut_marker(size, mb)
    cdef Py_ssize_t n = mb if cut else size
    text = _printable(data, n)
    return (<str>text if text is not None else _hex(data, n)) + cut


def printable(b):
    """The text of b when it is printable UTF-8, else None."""
    if type(b) is bytes:
        return _printable(<const unsigned char*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if s.isprintable() or s.translate({9: None, 13: None, 10: None}).isprintable():
        return s
    return None


def bytes_value(b, max_bytes):
    """Bytes for JSON: standard base64 (the exact bytes), cut at max_bytes (0: no cut)."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("bytes_value")(b, max_bytes)
    return _bytes_value(<bytes>b, mb)


def bytes_text(b, max_bytes):
    """The text form of bytes for JSON (`<name>_text`): when they are printable UTF-8."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("bytes_text")(b, max_bytes)
    return _bytes_text(<bytes>b, mb)


def text_or_hex(b, max_bytes):
    """Bytes as one readable string: printable text as is, else lowercase hex; cut at max_bytes."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0 or type(b) is not bytes:
        return _pure("text_or_hex")(b, max_bytes)
    return _text_or_hex(<bytes>b, mb)


# ---------------------------------------------------------------------------------------------
# Trees
#
# Field and Row keep their attributes in __slots__. For objects of exactly those classes the
# walkers read the slots at their offsets in the object, as the slots' member descriptors do,
# when kdissect/_model.pyx found the layout it expects at import (reads_field_slots,
# reads_row_slots); an empty slot goes to getattr, which raises the AttributeError. Anything
# else, a subclass included, goes through getattr. Row.children is a property: it is always
# called.


cdef object _scalar(object v, Py_ssize_t mb):
    """field_value() of a Field without hint and children holding v, not a plain type."""
    if _is_bytes_like(v):
        return _bytes_value(v if type(v) is bytes else bytes(v), mb)
    if type(v) is float and v != v:
        return None
    return v


cdef object _any_value(object v, Py_ssize_t mb):
    if isinstance(v, _Field):
        return _field_value(v, mb)
    if _plain_type(v):
        return v
    return _scalar(v, mb)


@cython.final
cdef class _Plan:
    """How the rows of one column list are written: each column's (name, how); its
    `<name>_text` key, for a bytes column of an exact str name (else None); and whether every
    key a row can have (the names, and those text keys) is an exact str different from the
    others, so that the writer need not look for repeats."""

    cdef tuple pairs
    cdef tuple texts
    cdef bint distinct


# The last two column lists seen (exact tuples), each as a (columns, plan) pair: rows of one
# batch share their column list, and records alternate with the rows of their headers.
cdef tuple _seen0 = (object(), None)
cdef tuple _seen1 = (object(), None)


cdef _Plan _row_plan(object columns):
    global _seen0, _seen1
    cdef tuple seen = _seen0
    if seen[0] is columns:
        return <_Plan>seen[1]
    seen = _seen1
    if seen[0] is columns:
        return <_Plan>seen[1]
    found = _ROW_PLANS.get(columns)
    if found is not None:
        plan = <_Plan>found
    else:
        plan = _new_row_plan(columns)
    if type(columns) is tuple:
        _seen1 = _seen0
        _seen0 = (columns, plan)
    return plan


cdef _Plan _new_row_plan(object columns):
    pairs = []
    try:
        for name, hint in columns:
            if hint == _BYTES:
                pairs.append((name, _BYTES_OR_FIELD))
            elif hint in _ANY_HINTS:
                pairs.append((name, _ANY_VALUE))
            else:
                pairs.append((name, _AS_IS))
    except Exception:  # a column that is no (name, hint) pair: Python's own exception
        _pure("_row_plan")(columns)
        raise
    # (interned: the writer keeps the texts of interned keys where it finds them first)
    texts = [_intern(name + "_text") if how == _BYTES_OR_FIELD and type(name) is str else None
             for name, how in pairs]
    keys = [name for name, _ in pairs] + [t for t in texts if t is not None]
    cdef _Plan out = _Plan.__new__(_Plan)
    out.pairs = tuple(pairs)
    out.texts = tuple(texts)
    out.distinct = all(type(k) is str for k in keys) and len(set(keys)) == len(keys)
    _ROW_PLANS[columns] = out
    return out


cdef dict _row_dict(object row, Py_ssize_t mb):
    cdef Py_ssize_t i, n
    cdef tuple plan
    cdef tuple pair
    cdef int how
    cdef bint fast = reads_row_slots(row)
    plan = _row_plan(read_slot(row, fast, R_COLUMNS, "columns")).pairs
    values = read_slot(row, fast, R_VALUES, "values")
    cdef dict out = {}
    if type(values) is not tuple:
        for (name, how), v in zip(plan, values, strict=True):
            out[name] = _column_value(v, how, mb)
            if how == _BYTES_OR_FIELD and type(v) is bytes:
                _add_text(out, name, <bytes>v, mb)
        return out
    n = min(len(plan), len(<tuple>values))
    for i in range(n):
        pair = <tuple>plan[i]
        v = (<tuple>values)[i]
        how = pair[1]
        out[pair[0]] = _column_value(v, how, mb)
        if how == _BYTES_OR_FIELD and type(v) is bytes:
            _add_text(out, pair[0], <bytes>v, mb)
    if len(plan) != len(<tuple>values):
        side = "shorter" if len(<tuple>values) < len(plan) else "longer"
        raise ValueError(f"zip() argument 2 is {side} than argument 1")
    return out


cdef inline void _add_text(dict out, object name, bytes b, Py_ssize_t mb) except *:
    text = _bytes_text(b, mb)
    if text is not None:
        out[name + "_text"] = text


cdef inline object _column_value(object v, int how, Py_ssize_t mb):
    if how == _AS_IS or v is None:
        return v
    if how == _BYTES_OR_FIELD and type(v) is bytes:
        return _bytes_value(<bytes>v, mb)
    return _any_value(v, mb)


cdef inline object _children(object f, bint fast):
    """f.children: the slot of a Field, the property of a Row."""
    return read_slot(f, fast and type(f) is _Field, F_CHILDREN, "children")


cdef object _field_value(object f, Py_ssize_t mb):
    cdef bint fast = reads_field_slots(f)
    hint = read_slot(f, fast, F_HINT, "hint")
    if hint == _STRUCT:
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            if type(f) is _Row and read_slot(f, reads_row_slots(f), R_KIDS, "_kids") is None:
                return _row_dict(f, mb)
            kids = _children(f, fast)
            return _fields_dict(kids if kids else (), mb)
        finally:
            Py_LeaveRecursiveCall()
    if hint == _ARRAY:
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            kids = _children(f, fast)
            return [_field_value(c, mb) for c in (kids if kids else ())]
        finally:
            Py_LeaveRecursiveCall()
    v = read_slot(f, fast, F_VALUE, "value")
    tv = type(v)
    if tv is int or tv is str or tv is bool or v is None:
        pass
    elif tv is bytes or tv is bytearray or tv is memoryview:
        if hint == _RAW:
            if tv is bytes:
                return _hex(<const unsigned char*>PyBytes_AS_STRING(v),
                            min(mb, PyBytes_GET_SIZE(v)) if mb > 0 else PyBytes_GET_SIZE(v))
            return bytes(v[:mb] if mb > 0 else v).hex()
        return _bytes_value(v if tv is bytes else bytes(v), mb)
    elif tv is float and v != v:
        return None
    if _children(f, fast):  # a scalar with sub-fields (flags broken out, parsed payloads)
        Py_EnterRecursiveCall(" while converting a field tree to JSON")
        try:
            d = _fields_dict(_children(f, fast), mb)
        finally:
            Py_LeaveRecursiveCall()
        d["value"] = v
        return d
    return v


cdef inline void _add(dict out, object f, Py_ssize_t mb, list grown) except *:
    """One field of fields_dict(); `grown`: the names whose list is out's own, in a list of one
    set (made on the first repeated name)."""
    cdef bint fast = reads_field_slots(f)
    name = read_slot(f, fast, F_NAME, "name")
    v = read_slot(f, fast, F_VALUE, "value")
    hint = read_slot(f, fast, F_HINT, "hint")
    cdef bint plain = (hint is None and _children(f, fast) is None
                       and (type(v) is int or type(v) is str or type(v) is bool or v is None))
    if plain:
        val = v
    else:
        val = _field_value(f, mb)
    if name in out:  # repeated names (e.g. unknown tags) become lists
        prev = out[name]
        if not (isinstance(prev, list) and hint != _ARRAY):
            prev = [prev]
            out[name] = prev
        elif not grown or name not in <set>grown[0]:
            prev = list(prev)  # a field's own list value is never changed
            out[name] = prev
        if not grown:
            grown.append(set())
        (<set>grown[0]).add(name)
        prev.append(val)
        return
    out[name] = val
    display = read_slot(f, fast, F_DISPLAY, "display")
    if display is not None and hint in _NAMED:
        out[name + "_name"] = display
    elif not plain and hint != _RAW and _is_bytes_like(v) and not _children(f, fast):
        _add_text(out, name, v if type(v) is bytes else bytes(v), mb)


cdef dict _fields_dict(object fields, Py_ssize_t mb):
    cdef dict out = {}
    cdef list grown = []
    if type(fields) is list:
        for f in <list>fields:
            _add(out, f, mb, grown)
    else:
        for f in fields:
            _add(out, f, mb, grown)
    return out


def row_dict(row, max_bytes):
    """A Row straight from its values, without building its child Fields."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("row_dict")(row, max_bytes)
    return _row_dict(row, mb)


def field_value(f, max_bytes):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("field_value")(f, max_bytes)
    return _field_value(f, mb)


def fields_dict(fields, max_bytes):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("fields_dict")(fields, max_bytes)
    return _fields_dict(fields, mb)


def message_dict(m, max_bytes=256):
    cdef Py_ssize_t mb = _limit(max_bytes)
    if mb < 0:
        return _pure("message_dict")(m, max_bytes)
    number = m.number
    frame = m.frame
    frames = m.frames
    ts = round9(m.ts)
    stream = m.stream
    src = m.src
    dst = m.dst
    protocol = m.protocol
    kind = m.kind
    summary = m.summary
    length = len(m.data)
    info = {k: v for k, v in m.info.items() if v is not None}
    fields = _fields_dict(m.fields, mb)
    diagnostics = [d.to_json() for d in m.diagnostics]
    match = m.match.to_json() if m.match else None
    out = {
        "number": number,
        "frame": frame,
        "frames": frames,
        "ts": ts,
        "stream": stream,
        "src": src,
        "dst": dst,
        "protocol": protocol,
        "kind": kind,
        "summary": summary,
        "length": length,
        "info": info,
        "fields": fields,
        "diagnostics": diagnostics,
        "match": match,
    }
    tls = m.tls
    if tls is not None:
        out["tls"] = tls.to_json()
    return out


# ---------------------------------------------------------------------------------------------
# A message's JSON text straight from its tree
#
# message_json writes the bytes that dumps_bytes(message_dict(m)) gives, without the dicts and
# lists in between: the walkers below follow message_dict's, and the values are written as the
# encoder writes them (the standard library's text: compact, non-ASCII as UTF-8, floats as repr,
# non-finite floats as null). The writer handles exact Fields and Rows, exact str keys and plain
# values (None, bool, int, float, str, list, tuple, dict); meeting anything else it gives up and
# the message takes the dict path, which decides (and raises what it raises). A struct whose
# keys repeat (repeated names become lists, a derived `_name`/`_text`/`value` key can replace an
# earlier one) is written from its dict. Nothing here changes a tree: a Row's child Fields are
# read only when they are already built, as message_dict reads them.


class _Unhandled(Exception):
    """Something the writer does not write itself: the dict path takes the message."""


cdef extern from "Python.h":
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    int Py_DTSF_ADD_DOT_0
    Py_hash_t PyObject_Hash(object o) except -1

from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.mem cimport PyMem_Free
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport isfinite
from libc.string cimport strlen


cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** text, Py_ssize_t size) except -1


cdef PyObject* _new_bytes(Py_ssize_t size) except NULL:
    """A new bytes object of `size` bytes, not yet written (a reference the caller owns)."""
    text = PyBytes_FromStringAndSize(NULL, size)
    Py_INCREF(text)
    return <PyObject*>text

cdef object _Message = None  # kdissect.model's Message, Match and Diagnostic, on first use
cdef object _Match = None
cdef object _Diagnostic = None


cdef enum:
    _MAX_KEYS = 32  # keys of one struct tracked for repeats; a bigger struct is written from its dict
    # Nesting the writer follows (decoded trees are a dozen levels deep); a deeper message takes
    # the dict path, which bounds the C stack here and leaves Python's recursion limit to decide.
    _MAX_DEPTH = 100
    # Keys whose JSON text is kept (the names of fields, columns and facts: a few hundred per
    # protocol; past this, keys are written each time).
    _MAX_KEY_TEXTS = 4096


cdef dict _KEY_TEXTS = {}  # a key -> its JSON text with the colon
# In front of it, by address, the interned keys written last (names in the code and the
# schemas are interned): a key and its text, each a reference the slot holds.
cdef enum:
    _KEY_SLOTS = 1024
cdef PyObject* _slot_keys[_KEY_SLOTS]
cdef PyObject* _slot_texts[_KEY_SLOTS]

cdef extern from "Python.h":
    unsigned int PyUnicode_CHECK_INTERNED(object o)


cdef struct _Keys:
    int n
    Py_hash_t hashes[_MAX_KEYS]
    PyObject* keys[_MAX_KEYS]


cdef inline bint _new_key(_Keys* ks, str key) except -1:
    """Adds `key` (alive while the struct is written); False when it is there already or the
    struct has too many keys to track."""
    cdef Py_hash_t h = PyObject_Hash(key)
    cdef int i
    if ks.n >= _MAX_KEYS:
        return False
    for i in range(ks.n):
        if ks.hashes[i] == h and (ks.keys[i] == <PyObject*>key or <str>ks.keys[i] == key):
            return False
    ks.hashes[ks.n] = h
    ks.keys[ks.n] = <PyObject*>key
    ks.n += 1
    return True


# The escape of each byte below 0x20, six bytes apiece: \\uXXXX, or a two-byte escape (\\b, \\t,
# \\n, \\f, \\r) and padding.
cdef dict _SHORT = {8: b"\\b", 9: b"\\t", 10: b"\\n", 12: b"\\f", 13: b"\\r"}
cdef bytes _ESCAPE_TABLE = b"".join(_SHORT[c] + b"    " if c in _SHORT else b"\\u%04x" % c for c in range(32))
cdef const char* _ESCAPES = _ESCAPE_TABLE


cdef extern from *:
    """
    /* Whether none of the 8 bytes at p needs an escape in a JSON string: no byte below 0x20,
       no '"' (0x22), no backslash (0x5C) (bytes from 0x80 up are UTF-8, written as they are). */
    static CYTHON_INLINE int kdissect_json_plain8(const unsigned char *p) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t w, q, s;
        memcpy(&w, p, 8);
        q = w ^ (ones * 0x22);
        s = w ^ (ones * 0x5C);
        return !((w - ones * 0x20) & ~w & highs) && !((q - ones) & ~q & highs) && !((s - ones) & ~s & highs);
    }
    """
    bint kdissect_json_plain8(const unsigned char* p)


cdef extern from *:
    """
    /* SSE2 (every x86-64 processor has it): 16 bytes a test. */
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define KDISSECT_SSE2 1
    #endif

    /* The number of bytes at the start of the n at p that need no escape in a JSON string. */
    static Py_ssize_t kdissect_json_plain(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t i = 0;
        unsigned char c;
    #ifdef KDISSECT_SSE2
        const __m128i ctl = _mm_set1_epi8(0x1F), quote = _mm_set1_epi8(0x22), backslash = _mm_set1_epi8(0x5C);
        __m128i w, bad;
        for (; n - i >= 16; i += 16) {
            w = _mm_loadu_si128((const __m128i *)(p + i));
            /* below 0x20 (unsigned: min(w, 0x1F) == w), '"' or backslash */
            bad = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(w, ctl), w),
                               _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, backslash)));
            if (_mm_movemask_epi8(bad))
                break;
        }
    #endif
        while (n - i >= 8 && kdissect_json_plain8(p + i))
            i += 8;
        for (; i < n; i++) {
            c = p[i];
            if (c < 0x20 || c == 0x22 || c == 0x5C)
                break;
        }
        return i;
    }

    /* The number of bytes at the start of the n at p that are printable ASCII (0x20-0x7E) and
       need no escape in a JSON string (neither '"' nor backslash), copied to o as they are
       tested (o has room for n): text written as it is. */
    static Py_ssize_t kdissect_json_text(const unsigned char *p, Py_ssize_t n, char *o) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        Py_ssize_t i = 0;
        uint64_t w, d, q, s;
        unsigned char c;
    #ifdef KDISSECT_SSE2
        /* 0x20-0x7E: above 0x1F and below 0x7F as signed bytes (from 0x80 up they are negative) */
        const __m128i ctl = _mm_set1_epi8(0x1F), del = _mm_set1_epi8(0x7F);
        const __m128i quote = _mm_set1_epi8(0x22), backslash = _mm_set1_epi8(0x5C);
        __m128i x, ok, bad;
        for (; n - i >= 16; i += 16) {
            x = _mm_loadu_si128((const __m128i *)(p + i));
            ok = _mm_and_si128(_mm_cmpgt_epi8(x, ctl), _mm_cmplt_epi8(x, del));
            bad = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash));
            if (_mm_movemask_epi8(_mm_andnot_si128(bad, ok)) != 0xFFFF)
                break;
            _mm_storeu_si128((__m128i *)(o + i), x);
        }
    #endif
        for (; n - i >= 8; i += 8) {
            memcpy(&w, p + i, 8);
            d = w ^ (ones * 0x7F);
            q = w ^ (ones * 0x22);
            s = w ^ (ones * 0x5C);
            if ((w | ((w - ones * 0x20) & ~w) | ((d - ones) & ~d) | ((q - ones) & ~q) | ((s - ones) & ~s)) & highs)
                break;
            memcpy(o + i, &w, 8);
        }
        for (; i < n; i++) {
            c = p[i];
            if (c < 0x20 || c >= 0x7F || c == 0x22 || c == 0x5C)
                break;
            o[i] = (char)c;
        }
        return i;
    }

    /* Whether the n bytes at p are printable ASCII, tab, CR and LF. */
    static int kdissect_ascii_text(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t i = 0;
        unsigned char c;
        while (i < n) {
            if (n - i >= 8 && kdissect_ascii_text8(p + i)) {
                i += 8;
                continue;
            }
            c = p[i];
            if ((c < 0x20 || c >= 0x7F) && c != 0x09 && c != 0x0A && c != 0x0D)
                return 0;
            i++;
        }
        return 1;
    }

    /* Base64 (RFC 4648, padded) of the n bytes at d, written at o: 4 * ((n + 2) / 3) bytes, whose
       room the caller has made. Each 12 bits give two characters from one table; where the
       processor has SSSE3 (tested once, kdissect_b64_init), 12 bytes at a time in a vector. */
    static char kdissect_b64_pairs[4096][2];
    static int kdissect_b64_vector = 0;

    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    #include <tmmintrin.h>
    #define KDISSECT_B64_SSSE3 1
    /* The whole groups of 12 bytes of the n at d (while 16 can be read: a load takes 16) as 16
       characters each at o; returns the number of bytes encoded. Mula and Lemire's method
       ("Faster Base64 Encoding and Decoding using AVX2 Instructions", 2018): each 3 bytes
       spread over a 32-bit lane, the four 6-bit indices moved to one byte each by two
       multiplications, and each index turned into its character by adding the offset of its
       range (A-Z, a-z, 0-9, +, /), looked up with a byte shuffle. */
    __attribute__((target("ssse3")))
    static Py_ssize_t kdissect_b64_ssse3(const unsigned char *d, Py_ssize_t n, char *o) {
        const __m128i spread = _mm_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1);
        const __m128i mask_ac = _mm_set1_epi32(0x0fc0fc00), mul_ac = _mm_set1_epi32(0x04000040);
        const __m128i mask_bd = _mm_set1_epi32(0x003f03f0), mul_bd = _mm_set1_epi32(0x01000010);
        const __m128i offsets = _mm_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                              '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62,
                                              '/' - 63, 'A', 0, 0);
        const __m128i n51 = _mm_set1_epi8(51), n26 = _mm_set1_epi8(26), n13 = _mm_set1_epi8(13);
        __m128i in, idx, r;
        Py_ssize_t i = 0;
        for (; n - i >= 16; i += 12, o += 16) {
            in = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(d + i)), spread);
            idx = _mm_or_si128(_mm_mulhi_epu16(_mm_and_si128(in, mask_ac), mul_ac),
                               _mm_mullo_epi16(_mm_and_si128(in, mask_bd), mul_bd));
            /* 0-25 -> 13, 26-51 -> 0, 52-61 -> 1-10, 62 -> 11, 63 -> 12: the range's offset */
            r = _mm_or_si128(_mm_subs_epu8(idx, n51), _mm_and_si128(_mm_cmpgt_epi8(n26, idx), n13));
            _mm_storeu_si128((__m128i *)o, _mm_add_epi8(idx, _mm_shuffle_epi8(offsets, r)));
        }
        return i;
    }
    #endif

    static void kdissect_b64_init(void) {
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        int i;
        for (i = 0; i < 4096; i++) {
            kdissect_b64_pairs[i][0] = a[i >> 6];
            kdissect_b64_pairs[i][1] = a[i & 63];
        }
    #ifdef KDISSECT_B64_SSSE3
        __builtin_cpu_init();
        kdissect_b64_vector = __builtin_cpu_supports("ssse3");
    #endif
    }
    static char *kdissect_b64(const unsigned char *d, Py_ssize_t n, char *o) {
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        Py_ssize_t i = 0;
        uint32_t w;
        uint64_t v;
    #ifdef KDISSECT_B64_SSSE3
        if (kdissect_b64_vector && n >= 16) {
            i = kdissect_b64_ssse3(d, n, o);
            o += i / 3 * 4;
        }
    #endif
        /* Six bytes at a time while eight can be read: 48 bits, four table entries. */
        for (; n - i >= 8; i += 6, o += 8) {
    #if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            memcpy(&v, d + i, 8);
            v = __builtin_bswap64(v);
    #else
            v = ((uint64_t)d[i] << 56) | ((uint64_t)d[i + 1] << 48) | ((uint64_t)d[i + 2] << 40)
                | ((uint64_t)d[i + 3] << 32) | ((uint64_t)d[i + 4] << 24) | ((uint64_t)d[i + 5] << 16);
    #endif
            memcpy(o, kdissect_b64_pairs[(v >> 52) & 4095], 2);
            memcpy(o + 2, kdissect_b64_pairs[(v >> 40) & 4095], 2);
            memcpy(o + 4, kdissect_b64_pairs[(v >> 28) & 4095], 2);
            memcpy(o + 6, kdissect_b64_pairs[(v >> 16) & 4095], 2);
        }
        for (; n - i >= 3; i += 3, o += 4) {
            w = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8) | d[i + 2];
            memcpy(o, kdissect_b64_pairs[w >> 12], 2);
            memcpy(o + 2, kdissect_b64_pairs[w & 4095], 2);
        }
        if (n - i == 1) {
            w = (uint32_t)d[i] << 16;
            o[0] = a[w >> 18]; o[1] = a[(w >> 12) & 63]; o[2] = '='; o[3] = '=';
            o += 4;
        } else if (n - i == 2) {
            w = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8);
            o[0] = a[w >> 18]; o[1] = a[(w >> 12) & 63]; o[2] = a[(w >> 6) & 63]; o[3] = '=';
            o += 4;
        }
        return o;
    }
    """
    Py_ssize_t kdissect_json_plain(const unsigned char* p, Py_ssize_t n) noexcept
    Py_ssize_t kdissect_json_text(const unsigned char* p, Py_ssize_t n, char* o) noexcept
    bint kdissect_ascii_text(const unsigned char* p, Py_ssize_t n) noexcept
    void kdissect_b64_init() noexcept
    char* kdissect_b64(const unsigned char* d, Py_ssize_t n, char* o) noexcept


kdissect_b64_init()


cdef inline bint _ascii_text(const unsigned char* data, Py_ssize_t n) noexcept:
    """Whether the n bytes at data are printable ASCII, tab, CR and LF (printable() gives them
    back as they are)."""
    return kdissect_ascii_text(data, n)


# The last float time written and its text (_Writer.time).
cdef double _last_ts = 0.0
cdef bytes _last_ts_text = None


# The room a writer starts with: the longest text written so far, up to _MAX_START (a message
# then grows its buffer rarely; a longer one grows from there).
cdef enum:
    _MIN_START = 4096
    _MAX_START = 1048576
cdef Py_ssize_t _start_room = _MIN_START


@cython.final  # its methods called directly, not through a table: the small ones inlined
cdef class _Writer:
    """A growing buffer of JSON text: a bytes object the writer owns alone, cut to its length at
    the end (output()), so that the text is not copied once written."""

    cdef PyObject* obj  # the bytes object (NULL once output() has handed it over)
    cdef char* buf  # its bytes
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef Py_ssize_t mb
    cdef list keep  # the derived keys of the message (_Keys points at them)
    cdef int depth  # of nested structs, arrays, lists and dicts

    def __cinit__(self, Py_ssize_t mb):
        self.cap = _start_room
        self.obj = _new_bytes(self.cap)
        self.buf = PyBytes_AS_STRING(<object>self.obj)
        self.n = 0
        self.mb = mb
        self.keep = []
        self.depth = 0

    def __dealloc__(self):
        Py_XDECREF(self.obj)

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self.cap
        if extra <= self.cap - self.n:
            return 0
        if extra > PY_SSIZE_T_MAX // 2 - self.n:
            raise MemoryError()
        while cap - self.n < extra:
            cap *= 2
        _PyBytes_Resize(&self.obj, cap)  # (on failure obj is NULL and MemoryError raised)
        self.buf = PyBytes_AS_STRING(<object>self.obj)
        self.cap = cap
        return 0

    cdef inline int put(self, const char* s, Py_ssize_t k) except -1:
        if k > self.cap - self.n:
            self.reserve(k)
        memcpy(self.buf + self.n, s, k)
        self.n += k
        return 0

    cdef inline int byte(self, char c) except -1:
        if self.n == self.cap:
            self.reserve(1)
        self.buf[self.n] = c
        self.n += 1
        return 0

    cdef bytes output(self):
        """The text written, as bytes; the writer is spent."""
        global _start_room
        if self.n > _start_room:
            _start_room = min(self.n, <Py_ssize_t>_MAX_START)
        _PyBytes_Resize(&self.obj, self.n)
        out = <bytes>self.obj
        Py_XDECREF(self.obj)  # (out holds it)
        self.obj = NULL
        self.buf = NULL
        self.cap = self.n = 0
        return out

    # -- values ------------------------------------------------------------------------------

    cdef int string(self, str s) except -1:
        cdef Py_ssize_t size
        cdef const char* p = PyUnicode_AsUTF8AndSize(s, &size)
        self.byte(34)  # "
        self.escaped(<const unsigned char*>p, size)
        return self.byte(34)

    cdef int escaped(self, const unsigned char* p, Py_ssize_t size) except -1:
        """The UTF-8 text at p as inside a JSON string."""
        cdef Py_ssize_t i, run
        cdef unsigned char c
        self.reserve(size)
        i = run = 0
        while True:
            i += kdissect_json_plain(p + i, size - i)
            if i == size:
                break
            c = p[i]
            self.put(<const char*>p + run, i - run)
            if c == 34:
                self.put(b'\\"', 2)
            elif c == 92:
                self.put(b"\\\\", 2)
            elif c == 8 or c == 9 or c == 10 or c == 12 or c == 13:
                self.put(_ESCAPES + 6 * c, 2)
            else:
                self.put(_ESCAPES + 6 * c, 6)
            i += 1
            run = i
        return self.put(<const char*>p + run, size - run)

    cdef int base64(self, bytes b) except -1:
        """_bytes_value(b) written: base64 of b, cut at mb, and the cut's marker."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
        cdef bint cut = self.mb > 0 and size > self.mb
        cdef Py_ssize_t n = self.mb if cut else size
        cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(b)
        cdef char* o
        self.reserve(2 + (n + 2) // 3 * 4)  # (n is at most the size of b)
        o = self.buf + self.n
        o[0] = 34
        o = kdissect_b64(d, n, o + 1)
        self.n = o - self.buf
        if cut:
            self.marker(size)
        return self.byte(34)

    cdef int marker(self, Py_ssize_t size) except -1:
        cdef str m = _cut_marker(size, self.mb)
        cdef Py_ssize_t k
        cdef const char* p = PyUnicode_AsUTF8AndSize(m, &k)
        return self.escaped(<const unsigned char*>p, k)

    cdef bint text(self, str key, bytes b, _Keys* ks) except -1:
        """The `<name>_text` member of b (_bytes_text(b)), after a comma, when b is printable
        text; False on a repeated key (ks: as derived() reads it)."""
        cdef Py_ssize_t size = PyBytes_GET_SIZE(b)
        cdef bint cut = self.mb > 0 and size > self.mb
        cdef Py_ssize_t n = self.mb if cut else size
        cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(b)
        cdef Py_ssize_t start = self.n
        cdef Py_ssize_t plain
        # The member written on the chance that b is text: its bytes copied while they are
        # tested, up to the first that is not printable ASCII or needs an escape.
        self.byte(44)
        self.key(key)
        self.byte(34)
        self.reserve(n)
        plain = kdissect_json_text(d, n, self.buf + self.n)  # the bytes written as they are
        if plain < n and not _ascii_text(d + plain, n - plain):
            self.n = start
            t = _bytes_text(b, self.mb)
            if t is None:
                return True
            return self.derived(key, t, ks)
        if ks != NULL:
            self.keep.append(key)
            if not _new_key(ks, key):
                self.n = start
                return False
        self.n += plain
        if plain < n:
            self.escaped(d + plain, n - plain)
        if cut:
            self.marker(size)
        self.byte(34)
        return True

    cdef int integer(self, object v) except -1:
        cdef int overflow = 0
        cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
        cdef char digits[24]
        cdef Py_ssize_t k
        if overflow:
            s = str(v)  # (ValueError beyond the digits Python converts: the dict path raises it)
            return self.string_ascii(s)
        k = decimal(x, digits + 24)
        return self.put(digits + 24 - k, k)

    cdef int string_ascii(self, str s) except -1:
        cdef Py_ssize_t size
        cdef const char* p = PyUnicode_AsUTF8AndSize(s, &size)
        return self.put(p, size)

    cdef int real(self, double d) except -1:
        cdef char* r
        if self.micros(d):
            return 0
        if not isfinite(d):
            return self.put(b"null", 4)
        r = PyOS_double_to_string(d, b"r", 0, Py_DTSF_ADD_DOT_0, NULL)
        try:
            self.put(r, strlen(r))
        finally:
            PyMem_Free(r)
        return 0

    cdef bint micros(self, double d) except -1:
        """repr(d) written, when d is the double nearest a decimal of 6 places between 1e-4 and
        2**33 (a capture's times, response times in ms); False, and nothing written, else. There
        doubles are less than 1e-6 apart, so that decimal is the only one of 6 places or fewer
        that reads back as d, and every other one that does has more digits: it is the shortest
        repr, its trailing zeros dropped (one kept after the point), written without dtoa."""
        cdef long long n, whole, frac
        cdef char digits[32]
        cdef Py_ssize_t k = 32
        cdef int i
        if not (1e-4 <= d < 8589934592.0):
            return False
        n = <long long>(d * 1e6 + 0.5)
        if <double>n / 1e6 != d:
            return False
        whole = n // 1000000
        frac = n % 1000000
        i = 6
        while i > 1 and frac % 10 == 0:  # trailing zeros dropped
            frac //= 10
            i -= 1
        while i > 0:
            k -= 1
            digits[k] = <char>(48 + frac % 10)
            frac //= 10
            i -= 1
        k -= 1
        digits[k] = 46  # .
        k -= decimal(whole, digits + k)
        self.put(digits + k, 32 - k)
        return True

    cdef bint milliseconds(self, double rtt) except -1:
        """round(rtt * 1000.0, 3) written, as micros() writes it, where render/_time.pxd's
        thousandths rounds it in C; False, and nothing written, else."""
        cdef double r
        return thousandths(rtt * 1000.0, &r) and self.micros(r)

    cdef int value(self, object v) except -1:
        if v is None:
            return self.put(b"null", 4)
        if v is True:
            return self.put(b"true", 4)
        if v is False:
            return self.put(b"false", 5)
        tv = type(v)
        if tv is str:
            return self.string(<str>v)
        if tv is int:
            return self.integer(v)
        if tv is float:
            return self.real(<double>v)
        if tv is list or tv is tuple or tv is dict:
            self.deeper()
            if tv is dict:
                self.mapping(<dict>v)
            else:
                self.sequence(v)
            self.depth -= 1
            return 0
        raise _Unhandled()

    cdef inline int deeper(self) except -1:
        """One level further down; past _MAX_DEPTH the dict path takes the message."""
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unhandled()
        return 0

    cdef int sequence(self, object items) except -1:
        cdef bint first = True
        self.byte(91)  # [
        for x in items:
            if not first:
                self.byte(44)
            first = False
            self.value(x)
        return self.byte(93)

    cdef int mapping(self, dict d, bint skip_none=False) except -1:
        """d written; `skip_none`: without its members whose value is None."""
        cdef bint first = True
        self.byte(123)  # {
        for k, x in d.items():
            if skip_none and x is None:
                continue
            if type(k) is not str:
                raise _Unhandled()
            if not first:
                self.byte(44)
            first = False
            self.key(<str>k)
            self.value(x)
        return self.byte(125)

    cdef int info(self, object info) except -1:
        """{k: v for k, v in info.items() if v is not None} written."""
        if type(info) is not dict:
            raise _Unhandled()
        return self.mapping(<dict>info, True)

    cdef int diagnostics(self, object diagnostics) except -1:
        """[d.to_json() for d in diagnostics] written."""
        cdef bint first = True
        if type(diagnostics) is not list:
            return self.value([d.to_json() for d in diagnostics])
        self.deeper()
        self.byte(91)  # [
        for d in <list>diagnostics:
            if not first:
                self.byte(44)
            first = False
            if type(d) is _Diagnostic:
                self.diagnostic(d)
            else:
                self.value(d.to_json())
        self.depth -= 1
        return self.byte(93)

    cdef int diagnostic(self, object d) except -1:
        """Diagnostic.to_json(d) written, its keys as constants."""
        severity = d.severity._value_
        group = d.group._value_
        key = d.key
        message = d.message
        offset = d.offset
        self.deeper()
        self.put(b'{"severity":', 12)
        self.value(severity)
        self.put(b',"group":', 9)
        self.value(group)
        self.put(b',"key":', 7)
        self.value(key)
        self.put(b',"message":', 11)
        self.value(message)
        if offset >= 0:
            self.put(b',"offset":', 10)
            self.value(offset)
        self.depth -= 1
        return self.byte(125)

    cdef int match(self, object match) except -1:
        """`match.to_json() if match else None` written."""
        if match is None:
            return self.put(b"null", 4)
        if type(match) is not _Match:
            return self.value(match.to_json() if match else None)
        rtt = match.rtt
        self.put(b'{"frame":', 9)
        self.value(match.frame)
        self.put(b',"kind":', 8)
        self.value(match.kind)
        self.put(b',"rtt_ms":', 10)
        if type(rtt) is float and self.milliseconds(<double>rtt):
            return self.byte(125)
        self.value(None if rtt is None else round(rtt * 1000.0, 3))
        return self.byte(125)

    cdef inline int key(self, str k) except -1:
        """k and a colon, their text kept for the next time (for the first _MAX_KEY_TEXTS keys)."""
        cdef Py_ssize_t start
        cdef size_t slot = (<size_t><PyObject*>k >> 4) % _KEY_SLOTS
        cdef PyObject* old
        if _slot_keys[slot] == <PyObject*>k:
            text = <object>_slot_texts[slot]
            return self.put(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
        text = _KEY_TEXTS.get(k)
        if text is None:
            start = self.n
            self.string(k)
            self.byte(58)  # :
            if len(_KEY_TEXTS) >= _MAX_KEY_TEXTS:
                return 0
            text = _KEY_TEXTS[k] = PyBytes_FromStringAndSize(self.buf + start, self.n - start)
        else:
            self.put(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
        if PyUnicode_CHECK_INTERNED(k):  # (a name made anew each time would only take the slot)
            old = _slot_keys[slot]
            Py_INCREF(k)
            _slot_keys[slot] = <PyObject*>k
            Py_XDECREF(old)
            old = _slot_texts[slot]
            Py_INCREF(text)
            _slot_texts[slot] = <PyObject*>text
            Py_XDECREF(old)
        return 0

    # -- trees (the walkers of message_dict) -------------------------------------------------

    cdef int fields(self, object fields) except -1:
        """_fields_dict(fields) written."""
        cdef Py_ssize_t start = self.n
        cdef _Keys ks
        cdef bint first = True
        ks.n = 0
        if type(fields) is not list and type(fields) is not tuple:
            raise _Unhandled()
        self.byte(123)
        for f in fields:
            if not self.add(f, &ks, first):
                self.n = start  # a repeated key: the struct as its dict
                return self.value(_fields_dict(fields, self.mb))
            first = False
        return self.byte(125)

    cdef bint add(self, object f, _Keys* ks, bint first) except -1:
        """One field of fields(): _add() written; False on a repeated key."""
        if type(f) is not _Field and type(f) is not _Row:
            raise _Unhandled()
        cdef bint fast = reads_field_slots(f)
        name = read_slot(f, fast, F_NAME, "name")
        v = read_slot(f, fast, F_VALUE, "value")
        hint = read_slot(f, fast, F_HINT, "hint")
        if type(name) is not str:
            raise _Unhandled()
        if not _new_key(ks, <str>name):
            return False
        if not first:
            self.byte(44)
        self.key(<str>name)
        cdef bint plain = (hint is None and _children(f, fast) is None
                           and (type(v) is int or type(v) is str or type(v) is bool or v is None))
        if plain:
            self.value(v)
        else:
            self.field_value(f)
        display = read_slot(f, fast, F_DISPLAY, "display")
        if display is not None and hint in _NAMED:
            return self.derived(<str>name + "_name", display, ks)
        elif not plain and hint != _RAW and _is_bytes_like(v) and not _children(f, fast):
            return self.text(<str>name + "_text", v if type(v) is bytes else bytes(v), ks)
        return True

    cdef bint derived(self, str k, object v, _Keys* ks) except -1:
        """A derived key and its value, after a comma; False on a repeated key (ks: the keys of
        the struct so far, NULL when they cannot repeat)."""
        if ks != NULL:
            self.keep.append(k)
            if not _new_key(ks, k):
                return False
        self.byte(44)
        self.key(k)
        self.value(v)
        return True

    cdef int field_value(self, object f) except -1:
        """_field_value(f) written (f an exact Field or Row)."""
        cdef bint fast = reads_field_slots(f)
        hint = read_slot(f, fast, F_HINT, "hint")
        if hint == _STRUCT:
            self.deeper()
            if type(f) is _Row:
                kids = read_slot(f, reads_row_slots(f), R_KIDS, "_kids")
                if kids is None:
                    self.row(f)
                else:
                    self.fields(kids)
            else:
                kids = _children(f, fast)
                self.fields(kids if kids else ())
            self.depth -= 1
            return 0
        if type(f) is _Row:
            raise _Unhandled()  # (its children would be built)
        if hint == _ARRAY:
            self.deeper()
            kids = _children(f, fast)
            self.array(kids if kids else ())
            self.depth -= 1
            return 0
        v = read_slot(f, fast, F_VALUE, "value")
        tv = type(v)
        if tv is int or tv is str or tv is bool or v is None or tv is float:
            pass
        elif tv is bytes or tv is bytearray or tv is memoryview:
            if hint == _RAW:
                if tv is bytes:
                    return self.string(_hex(<const unsigned char*>PyBytes_AS_STRING(v),
                                            min(self.mb, PyBytes_GET_SIZE(v)) if self.mb > 0 else PyBytes_GET_SIZE(v)))
                return self.string(bytes(v[:self.mb] if self.mb > 0 else v).hex())
            return self.base64(v if tv is bytes else bytes(v))
        if _children(f, fast):  # a scalar with sub-fields: its dict
            return self.value(_field_value(f, self.mb))
        return self.value(v)

    cdef int array(self, object kids) except -1:
        cdef bint first = True
        if type(kids) is not list and type(kids) is not tuple:
            raise _Unhandled()
        self.byte(91)
        for c in kids:
            if type(c) is not _Field and type(c) is not _Row:
                raise _Unhandled()
            if not first:
                self.byte(44)
            first = False
            self.field_value(c)
        return self.byte(93)

    cdef int row(self, object row) except -1:
        """_row_dict(row) written (row an exact Row whose child Fields are not built)."""
        cdef Py_ssize_t start = self.n
        cdef Py_ssize_t i, n
        cdef _Plan plan
        cdef tuple pairs
        cdef tuple pair
        cdef int how
        cdef _Keys ks
        cdef _Keys* tracked = &ks  # NULL when the plan's keys cannot repeat
        ks.n = 0
        cdef bint fast = reads_row_slots(row)
        plan = _row_plan(read_slot(row, fast, R_COLUMNS, "columns"))
        pairs = plan.pairs
        if plan.distinct:
            tracked = NULL
        values = read_slot(row, fast, R_VALUES, "values")
        if type(values) is not tuple or len(<tuple>values) != len(pairs):
            raise _Unhandled()
        n = len(pairs)
        self.byte(123)
        for i in range(n):
            pair = <tuple>pairs[i]
            name = pair[0]
            how = pair[1]
            v = (<tuple>values)[i]
            if type(name) is not str:
                raise _Unhandled()
            if tracked != NULL and not _new_key(tracked, <str>name):
                self.n = start
                return self.value(_row_dict(row, self.mb))
            if i:
                self.byte(44)
            self.key(<str>name)
            if how == _AS_IS or v is None:
                self.value(v)
            elif how == _BYTES_OR_FIELD and type(v) is bytes:
                self.base64(<bytes>v)
            elif type(v) is _Field or type(v) is _Row:
                self.field_value(v)
            elif isinstance(v, _Field):
                raise _Unhandled()
            elif _plain_type(v):
                self.value(v)
            else:
                self.value(_scalar(v, self.mb))
            if how == _BYTES_OR_FIELD and type(v) is bytes and not self.text(<str>plan.texts[i], <bytes>v, tracked):
                self.n = start
                return self.value(_row_dict(row, self.mb))
        return self.byte(125)

    cdef int time(self, object ts) except -1:
        """round(ts, 9) written. The messages of one segment share their time: the text of the
        last float written is kept and written again for the same double."""
        global _last_ts, _last_ts_text
        cdef double d
        cdef Py_ssize_t start
        if type(ts) is not float:
            return self.value(round9(ts))
        d = <double>ts
        if _last_ts_text is not None and memcmp(&d, &_last_ts, sizeof(double)) == 0:
            return self.put(PyBytes_AS_STRING(_last_ts_text), PyBytes_GET_SIZE(_last_ts_text))
        start = self.n
        self.value(round9(ts))
        _last_ts = d
        _last_ts_text = PyBytes_FromStringAndSize(self.buf + start, self.n - start)
        return 0

    cdef int message(self, object m) except -1:
        """message_dict(m) written (m an exact Message)."""
        self.put(b'{"number":', 10)
        self.value(m.number)
        self.put(b',"frame":', 9)
        self.value(m.frame)
        self.put(b',"frames":', 10)
        self.value(m.frames)
        self.put(b',"ts":', 6)
        self.time(m.ts)
        self.put(b',"stream":', 10)
        self.value(m.stream)
        self.put(b',"src":', 7)
        self.value(m.src)
        self.put(b',"dst":', 7)
        self.value(m.dst)
        self.put(b',"protocol":', 12)
        self.value(m.protocol)
        self.put(b',"kind":', 8)
        self.value(m.kind)
        self.put(b',"summary":', 11)
        self.value(m.summary)
        self.put(b',"length":', 10)
        self.value(len(m.data))
        self.put(b',"info":', 8)
        self.info(m.info)
        self.put(b',"fields":', 10)
        self.fields(m.fields)
        self.put(b',"diagnostics":', 15)
        self.diagnostics(m.diagnostics)
        self.put(b',"match":', 9)
        self.match(m.match)
        tls = m.tls
        if tls is not None:
            self.put(b',"tls":', 7)
            self.value(tls.to_json())
        return self.byte(125)


def message_json(m, max_bytes=256):
    """dumps_bytes(message_dict(m, max_bytes)), written straight from the tree when the writer
    handles everything in it."""
    return _message_text(m, max_bytes, False)


def message_line(m, max_bytes=256):
    """message_json(m, max_bytes) and a newline, written in the same buffer."""
    return _message_text(m, max_bytes, True)


cdef object _message_text(object m, object max_bytes, bint newline):
    global _Message, _Match, _Diagnostic
    cdef Py_ssize_t mb = _limit(max_bytes)
    if _Message is None:
        from kdissect.model import Diagnostic as _diagnostic, Match as _match, Message as _message
        _Message, _Match, _Diagnostic = _message, _match, _diagnostic
    out = _written(mb, m, True, newline) if mb >= 0 and type(m) is _Message else None
    if out is not None:
        return out
    out = _pure("dumps_bytes")(message_dict(m, max_bytes))
    return out + b"\n" if newline else out


def fields_json(fields, max_bytes=256):
    """dumps_bytes(fields_dict(fields, max_bytes)), the `fields` member of message_json, written
    straight from the tree when the writer handles everything in it."""
    cdef Py_ssize_t mb = _limit(max_bytes)
    out = _written(mb, fields, False, False) if mb >= 0 else None
    return out if out is not None else _pure("dumps_bytes")(fields_dict(fields, max_bytes))


cdef object _written(Py_ssize_t mb, object tree, bint message, bint newline):
    """The JSON text the writer makes of a message (or of a fields tree), and a newline if asked,
    or None when something in it is not the writer's to write: the dict path decides."""
    cdef _Writer w = _Writer(mb)
    try:
        if message:
            w.message(tree)
        else:
            w.fields(tree)
        if newline:
            w.byte(10)
    except Exception:
        return None
    return w.output()


# ---------------------------------------------------------------------------------------------
# The encoder's float check


def _odd_floats(out):
    """Whether orjson's text `out` may hold a float written unlike repr() would: it contains
    "0.0000", or "e-" and a digit 6-9 followed by `,`, `]`, `}` or the end."""
    if type(out) is not bytes:
        return _pure("_odd_floats")(out)
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(out)
    cdef Py_ssize_t i = _find(data, n, 0, 0x2E)  # "."
    while i >= 0:  # "0.0000"
        if i >= 1 and n - i >= 5 and data[i - 1] == 0x30 and data[i + 1] == 0x30 \
                and data[i + 2] == 0x30 and data[i + 3] == 0x30 and data[i + 4] == 0x30:
            return True
        i = _find(data, n, i + 1, 0x2E)
    i = _find(data, n, 0, 0x2D)  # "-"
    while i >= 0:  # "e-6," ... "e-9}", or at the end
        if i >= 1 and n - i >= 2 and data[i - 1] == 0x65 and 0x36 <= data[i + 1] <= 0x39:
            if n - i == 2 or data[i + 2] == 0x2C or data[i + 2] == 0x5D or data[i + 2] == 0x7D:
                return True
        i = _find(data, n, i + 1, 0x2D)
    return False


cdef inline Py_ssize_t _find(const unsigned char* data, Py_ssize_t n, Py_ssize_t start, int c):
    """The index of the first byte c in data[start:n], or -1."""
    if start >= n:
        return -1
    cdef const void* hit = memchr(data + start, c, <size_t>(n - start))
    if hit == NULL:
        return -1
    return <Py_ssize_t>(<size_t>hit - <size_t>data)
