"""Compiled twin of `record_values` in kdissect/spark/records.py (see kdissect/accel.py): the same
records, column for column and type for type, for every message.

The rules are records.py's, read from its tables. The difference is how a tree is read: Field
slots at their offsets (kdissect/_model.pxd), and a Row whose child Fields were never built is
read from its columns and values without building them (records.py's walk builds them): a
column holding a scalar is seen as a leaf with the column's name and hint, one holding a Field
as that Field, which is what Row.children would give.
"""

from kdissect._model cimport (F_CHILDREN, F_DISPLAY, F_HINT, F_NAME, F_VALUE, R_COLUMNS, R_KIDS,
                              R_VALUES, read_slot, reads_field_slots, reads_row_slots)

from kdissect.spark._coerce cimport int32 as _int32, int64 as _int64

import kdissect.spark.records as R
from kdissect.model import ARRAY, BYTES, STRUCT, Field, Row

cdef object _ARRAY = ARRAY, _BYTES = BYTES, _STRUCT = STRUCT
cdef object _Field = Field, _Row = Row
cdef frozenset RECORD_ARRAYS = R.RECORD_ARRAYS
cdef tuple VALUE_NAMES = R.VALUE_NAMES, KEY_NAMES = R.KEY_NAMES, HEADER_NAMES = R.HEADER_NAMES
cdef tuple TOPIC_NAMES = R.TOPIC_NAMES, TOPIC_ID_NAMES = R.TOPIC_ID_NAMES, PARTITION_NAMES = R.PARTITION_NAMES
cdef tuple RECORD_TOPIC = R.RECORD_TOPIC, RECORD_PARTITION = R.RECORD_PARTITION, OFFSET_NAMES = R.OFFSET_NAMES
cdef tuple TIME_NAMES = tuple((n,) for n in R.TIME_NAMES)
cdef tuple PRODUCER_ID = R.PRODUCER_ID, PRODUCER_EPOCH = R.PRODUCER_EPOCH, BASE_SEQUENCE = R.BASE_SEQUENCE
cdef tuple SEQUENCE = R.SEQUENCE, OFFSET_DELTA = R.OFFSET_DELTA, CODEC_NAME = R.CODEC_NAME
cdef tuple CODEC_BITS = R.CODEC_BITS, LEDGER_ID = R.LEDGER_ID, ENTRY_ID = R.ENTRY_ID
cdef tuple BATCH_INDEX = R.BATCH_INDEX, INFO_TOPIC = R.INFO_TOPIC, INFO_PARTITION = R.INFO_PARTITION
cdef tuple INFO_PRODUCER = R.INFO_PRODUCER
# The names looked up in the structs around a record array (_around).
cdef frozenset AROUND_NAMES = frozenset(PRODUCER_ID + PRODUCER_EPOCH + BASE_SEQUENCE + CODEC_NAME + CODEC_BITS
                                        + LEDGER_ID + ENTRY_ID)
cdef frozenset VALUE_SET = frozenset(VALUE_NAMES)  # what the record of a message without record arrays is found by
cdef frozenset CONTEXT_NAMES = frozenset(R.TOPIC_NAMES + R.TOPIC_ID_NAMES + R.PARTITION_NAMES)
cdef int SEARCH_DEPTH = R.SEARCH_DEPTH
cdef object MAX_TIMESTAMP_MS = R.MAX_TIMESTAMP_MS
cdef object KAFKA_CODECS = R.KAFKA_CODECS
cdef object _pure_headers = None, _pure_text = None


cdef void _load():
    global _pure_headers, _pure_text
    if _pure_headers is None:
        _pure_headers = R._headers
        _pure_text = R._text


cdef inline bint _is_field(object v) except -1:
    """isinstance(v, Field), without its general check for the values a column most holds."""
    t = type(v)
    if t is _Field or t is _Row:
        return True
    if v is None or t is int or t is bytes or t is str or t is bool:
        return False
    return isinstance(v, _Field)


cdef class _Leaf:
    """A scalar column of a Row whose child Fields were not built: what its Field would hold."""
    cdef object name, value, hint


# -- reading a node: a Field (or Row), or a _Leaf ---------------------------------------------

cdef inline object _name(object f):
    if type(f) is _Leaf:
        return (<_Leaf>f).name
    return read_slot(f, reads_field_slots(f), F_NAME, "name")


cdef inline object _value(object f):
    if type(f) is _Leaf:
        return (<_Leaf>f).value
    return read_slot(f, reads_field_slots(f), F_VALUE, "value")


cdef inline object _hint(object f):
    if type(f) is _Leaf:
        return (<_Leaf>f).hint
    return read_slot(f, reads_field_slots(f), F_HINT, "hint")


cdef inline bint _is(object hint, str name) except -1:
    """hint == name, without a rich comparison for the common cases (the same string, None)."""
    if hint is name:
        return True
    if hint is None:
        return False
    return hint == name


cdef inline object _display(object f):
    if type(f) is _Leaf:
        return None
    return read_slot(f, reads_field_slots(f), F_DISPLAY, "display")


cdef _Leaf _leaf(object column, object value):
    """The child a Row's scalar column stands for: its name and hint, and the value."""
    cdef _Leaf leaf = _Leaf.__new__(_Leaf)
    leaf.name, leaf.hint = column
    leaf.value = value
    return leaf


cdef tuple _unbuilt(object f):
    """(columns, values) of a Row whose child Fields were not built, when they can be read
    without building them; None for anything else (a Field, built children, columns and
    values that do not pair up)."""
    if not reads_row_slots(f) or read_slot(f, True, R_KIDS, "_kids") is not None:
        return None
    columns = read_slot(f, True, R_COLUMNS, "columns")
    values = read_slot(f, True, R_VALUES, "values")
    if type(columns) is not tuple or type(values) is not tuple or len(columns) != len(values):
        return None
    return columns, values


cdef object _children(object f):
    """f.children, without building the child Fields of a Row: a list of nodes, or None."""
    cdef Py_ssize_t i
    if type(f) is _Leaf:
        return None
    if not reads_row_slots(f):
        return read_slot(f, reads_field_slots(f), F_CHILDREN, "children")
    cv = _unbuilt(f)
    if cv is None:  # built children, or what Row.children makes of it (it raises as the pure walk would)
        kids = read_slot(f, True, R_KIDS, "_kids")
        return kids if kids is not None else f.children
    columns, values = cv
    out = []
    for i in range(len(<tuple>values)):
        v = (<tuple>values)[i]
        out.append(v if _is_field(v) else _leaf((<tuple>columns)[i], v))
    return out


# -- records.py's rules ---------------------------------------------------------------------

cdef class _Where:
    cdef object topic, partition, producer
    cdef tuple around
    cdef bint in_array
    cdef dict found  # names -> the fact found in the structs around (None: none), once per array


cdef object _NOT_YET = object()


cdef object _first(dict d, tuple names):
    for n in names:
        v = d.get(n)
        if v is not None:
            return v
    return None


cdef _Where _where_of(tuple chain, _Where where):
    topic, part, topic_id = where.topic, where.partition, None
    for f in chain:
        found = {}
        for c in _children(f) or ():
            name = _name(c)
            if name in CONTEXT_NAMES and _children(c) is None:
                v = _value(c)
                if v is not None:
                    found[name] = v
        if found:
            t, p, i = _first(found, TOPIC_NAMES), _first(found, PARTITION_NAMES), _first(found, TOPIC_ID_NAMES)
            topic = topic if t is None else t
            part = part if p is None else p
            topic_id = topic_id if i is None else i
    cdef _Where w = _Where.__new__(_Where)
    w.topic = topic if topic is not None else topic_id
    w.partition = part
    w.around = tuple([_levels(f, AROUND_NAMES) for f in reversed(chain)])
    w.producer = where.producer
    w.in_array = True
    return w


cdef void _walk(object f, tuple chain, _Where where, list out) except *:
    if _is(_hint(f), _STRUCT):
        chain = chain + (f,)
    for c in _children(f) or ():
        if _children(c):
            if _is(_hint(c), _ARRAY) and _name(c) in RECORD_ARRAYS:
                _records(c, chain, where, out)
            else:
                _walk(c, chain, where, out)


cdef void _records(object arr, tuple chain, _Where where, list out) except *:
    here = None
    for e in _children(arr) or ():
        if not _is(_hint(e), _STRUCT):
            continue
        if _holds_records(e):
            _walk(e, chain, where, out)
        else:
            if here is None:
                here = _where_of(chain, where)
            out.append((e, here))


cdef bint _holds_records(object e) except -1:
    """Whether a record array is among e's children: of a Row whose children were not built,
    read from its columns (a scalar column is a leaf with the column's name and hint) without
    making its leaves."""
    cdef Py_ssize_t i
    cv = _unbuilt(e)
    if cv is not None:
        columns, values = cv
        for i in range(len(<tuple>values)):
            v = (<tuple>values)[i]
            if _is_field(v):
                if _is(_hint(v), _ARRAY) and _name(v) in RECORD_ARRAYS:
                    return True
            else:
                name, hint = (<tuple>columns)[i]
                if _is(hint, _ARRAY) and name in RECORD_ARRAYS:
                    return True
        return False
    for c in _children(e) or ():
        if _is(_hint(c), _ARRAY) and _name(c) in RECORD_ARRAYS:
            return True
    return False


cdef class _RowLevel:
    """The first level below a Row whose child Fields were not built, read from its columns: a
    name looked up is found by the columns' index, and a leaf made only for a scalar found (a
    column's Field value bears the column's name, or the Row is not read this way)."""
    cdef dict index
    cdef tuple columns, values

    cdef object find(self, tuple names):
        for n in names:
            i = self.index.get(n)
            if i is not None:
                v = self.values[i]
                return v if _is_field(v) else _leaf(self.columns[i], v)
        return None

    cdef object scalar(self, tuple names):
        """What _scalar gives of find(names): a Field's value (None when it has children) or a
        scalar column's value, without a leaf; _NOT_YET when no column has one of the names."""
        for n in names:
            i = self.index.get(n)
            if i is not None:
                v = self.values[i]
                if _is_field(v):
                    return None if _children(v) is not None else _value(v)
                return v
        return _NOT_YET


cdef dict _INDEXES = {}  # id of a columns tuple -> (the tuple, its names' first indexes)


cdef object _index(tuple columns):
    """A Row's column names -> the index of the first with each; None when a column is not a
    (name, hint) pair."""
    held = _INDEXES.get(id(columns))
    if held is not None and (<tuple>held)[0] is columns:
        return (<tuple>held)[1]
    index = {}
    for i in range(len(columns)):
        col = columns[i]
        if type(col) is not tuple or len(<tuple>col) != 2:
            return None
        try:
            index.setdefault((<tuple>col)[0], i)
        except TypeError:  # a name that is no dict key: the children's walk says so
            return None
    if len(_INDEXES) >= 256:
        _INDEXES.clear()
    _INDEXES[id(columns)] = (columns, index)
    return index


cdef _RowLevel _row_level(object f):
    """The first level below f read from its columns, or None when f is not a Row whose
    children were not built, or its columns cannot be read this way."""
    cdef Py_ssize_t i
    cv = _unbuilt(f)
    if cv is None:
        return None
    columns, values = cv
    index = _index(<tuple>columns)
    if index is None:
        return None
    for i in range(len(values)):
        v = (<tuple>values)[i]
        if _is_field(v) and _name(v) != (<tuple>(<tuple>columns)[i])[0]:
            return None
    cdef _RowLevel level = _RowLevel.__new__(_RowLevel)
    level.index, level.columns, level.values = index, columns, values
    return level


cdef list _levels(object f, frozenset only=None):
    """records._levels(f); only: the names looked up in them (the others are left out of the
    levels' dicts, which are walked all the same)."""
    out = []
    level = [f]
    cdef int depth, first = 0
    cdef dict byname
    cdef list nxt
    cdef _RowLevel row = _row_level(f)
    if row is not None:
        out.append(row)
        level = [v for v in row.values if _is_field(v) and _is(_hint(v), _STRUCT)]
        if not level:
            return out
        first = 1
    for depth in range(first, SEARCH_DEPTH):
        byname = {}
        nxt = []
        for s in level:
            for c in _children(s) or ():
                name = _name(c)
                if (only is None or name in only) and name not in byname:
                    byname[name] = c
                if _is(_hint(c), _STRUCT):
                    nxt.append(c)
        out.append(byname)
        if not nxt:
            break
        level = nxt
    return out


cdef object _nearest(list levels, tuple names, Py_ssize_t start=0):
    """records._nearest over levels[start:]."""
    cdef Py_ssize_t k
    for k in range(start, len(levels)):
        level = levels[k]
        if type(level) is _RowLevel:
            hit = (<_RowLevel>level).find(names)
            if hit is not None:
                return hit
            continue
        for n in names:
            hit = (<dict?>level).get(n)
            if hit is not None:
                return hit
    return None


cdef object _scalar(list levels, tuple names):
    """The value of the nearest field named one of `names`, None when it has children; a scalar
    column of a Row's level is its value, without a leaf made for it."""
    if levels and type(levels[0]) is _RowLevel:
        v = (<_RowLevel>levels[0]).scalar(names)
        if v is not _NOT_YET:
            return v
        hit = _nearest(levels, names, 1)
    else:
        hit = _nearest(levels, names)
    return None if hit is None or _children(hit) is not None else _value(hit)


cdef inline object _usable(object hit):
    return hit if hit is not None and _children(hit) is None and _value(hit) is not None else None


cdef object _around(_Where where, tuple names):
    """The scalar field named one of `names` in the nearest struct around the record array that
    has one: the same for every record of the array, so looked up once."""
    if where.found is None:
        where.found = {}
    hit = where.found.get(names, _NOT_YET)
    if hit is _NOT_YET:
        hit = None
        for lv in where.around:
            hit = _usable(_nearest(<list?>lv, names))
            if hit is not None:
                break
        where.found[names] = hit
    return hit


cdef object _fact_field(list own, _Where where, tuple names, bint around_first):
    if around_first:
        hit = _around(where, names)
        return hit if hit is not None else _usable(_nearest(own, names))
    hit = _usable(_nearest(own, names))
    return hit if hit is not None else _around(where, names)


cdef object _fact(list own, _Where where, tuple names, bint around_first=False):
    hit = _fact_field(own, where, names, around_first)
    return None if hit is None else _value(hit)


cdef object _binary(object v):
    if type(v) is bytes:
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    return None


cdef object _utf8(object b):
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


cdef object _text(object v, object max_bytes):
    if v is None or type(v) is str:
        return v
    return _pure_text(v, max_bytes)


cdef object _timestamp(list lv):
    for n in TIME_NAMES:
        v = _int64(_scalar(lv, n))
        if v is not None and v > 0:
            return v
    return None


cdef object _sequence(object v):
    n = _int32(v)
    return n if n is not None and n >= 0 else None


cdef object _record_sequence(list lv, object base):
    own = _int64(_scalar(lv, SEQUENCE))
    if own is not None and own >= 0:
        return own
    delta = _int32(_scalar(lv, OFFSET_DELTA))
    return None if base is None or delta is None or delta < 0 else base + delta


cdef object _codec(list lv, _Where where):
    named = _fact_field(lv, where, CODEC_NAME, True)
    if named is not None:
        display = _display(named)
        if isinstance(display, str):
            return display.lower()
    bits = _int32(_fact(lv, where, CODEC_BITS, True))
    return None if bits is None else KAFKA_CODECS.get(bits & 0x07, f"codec{bits & 0x07}")


cdef list _headers(object f, object max_bytes):
    """records._headers(f, max_bytes) as a list of items: an array's elements read as the rest of
    this module reads a tree (a struct of named values, or an array holding an array, through
    records.py)."""
    if f is None or type(f) is _Leaf:
        return []
    if not _is(_hint(f), _ARRAY):
        return list(_pure_headers(f, max_bytes).items())
    elements = _children(f) or ()
    for e in elements:
        if _is(_hint(e), _ARRAY):  # (Field.get looks into its first element)
            return list(_pure_headers(f, max_bytes).items())
    out = {}
    for e in elements:
        k = _text(_child_value(e, "key"), max_bytes)
        if k is not None:
            out[k] = _binary(_child_value(e, "value"))
    return list(out.items())


cdef object _child_value(object e, str name):
    """e.get(name) of a node that is no array: the value of its first child of that name (of a
    Row whose child Fields were not built, read from its columns and values when each column
    is a (name, hint) pair)."""
    cv = _unbuilt(e)
    if cv is not None:
        v = _row_child_value(<tuple>(<tuple>cv)[0], <tuple>(<tuple>cv)[1], name)
        if v is not _NOT_YET:
            return v
    for c in _children(e) or ():
        if _name(c) == name:
            return _value(c)
    return None


cdef object _row_child_value(tuple columns, tuple values, str name):
    """_child_value of a Row whose child Fields were not built (columns and values of one
    length); _NOT_YET when the column of a scalar is no (name, hint) pair (its leaf raises)."""
    cdef Py_ssize_t i
    found = _NOT_YET
    for i in range(len(values)):
        v = values[i]
        if _is_field(v):
            if found is _NOT_YET and _name(v) == name:
                found = _value(v)
            continue
        col = columns[i]
        if type(col) is not tuple or len(<tuple>col) != 2:
            return _NOT_YET
        if found is _NOT_YET and (<tuple>col)[0] == name:
            found = v
    return None if found is _NOT_YET else found


cdef tuple _record(object index, object f, _Where where, object max_bytes):
    lv = _levels(f)
    topic = _scalar(lv, RECORD_TOPIC)
    part = _scalar(lv, RECORD_PARTITION)
    value = _nearest(lv, VALUE_NAMES)
    raw = _binary(_value(value) if value is not None else None)
    key = _binary(_scalar(lv, KEY_NAMES))
    ms = _timestamp(lv)
    producer = _fact(lv, where, PRODUCER_ID)
    base = _sequence(_fact(lv, where, BASE_SEQUENCE))
    headers = _nearest(lv, HEADER_NAMES)
    return (  # in COLUMNS' order
        index,
        _text(where.topic if topic is None else topic, max_bytes),
        _int32(where.partition if part is None else part),
        _int64(_scalar(lv, OFFSET_NAMES)),
        ms,
        None if ms is None or ms > MAX_TIMESTAMP_MS else ms * 1000,
        key,
        _utf8(key),
        raw,
        _utf8(raw),
        None if raw is None else len(raw),
        _headers(headers, max_bytes),
        _int64(where.producer if producer is None else producer),
        _int32(_fact(lv, where, PRODUCER_EPOCH)),
        base,
        _record_sequence(lv, base),
        _codec(lv, where),
        _int64(_fact(lv, where, LEDGER_ID)),
        _int64(_fact(lv, where, ENTRY_ID)),
        _int32(_scalar(lv[:1], BATCH_INDEX)) if where.in_array else None,
    )


def record_values(m, max_bytes=256):
    """records.record_values."""
    _load()
    info = m.info
    if type(info) is not dict:
        info = dict(info)
    cdef _Where where = _Where.__new__(_Where)
    where.topic = _first(info, INFO_TOPIC)
    where.partition = _first(info, INFO_PARTITION)
    where.producer = _first(info, INFO_PRODUCER)
    where.around = ()
    where.in_array = False
    root = _Field("", None, 0, len(m.data), m.fields, _STRUCT)
    found = []
    _walk(root, (), where, found)
    if not found and where.topic is not None:
        v = _nearest(_levels(root, VALUE_SET), VALUE_NAMES)
        if v is not None and _is(_hint(v), _BYTES):
            found.append((root, where))
    return [_record(i, f, w, max_bytes) for i, (f, w) in enumerate(found)]
