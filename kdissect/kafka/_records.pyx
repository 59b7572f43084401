"""Compiled twin of decode_records in kdissect/kafka/records.py (see kdissect/accel.py): the same
field (built without running Field.__init__, its label written in C), diagnostics and counts,
and the same calls to the batch decoders (the walk over the batches in C while they are well
formed, records_common.walk from the first that is not). A buffer that is not bytes, or bounds that
are not ints within C's range, go to the pure function.
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow

from kdissect._model cimport new_field


# Set from kdissect.kafka.records at the end of this module (records imports this module to bind
# it, after defining them; or this module imports records, which binds it).
cdef object _pure, Ctx, Budget, DECODERS, COUNTERS, walk, count_rest, plural, ARRAY
cdef Py_ssize_t MIN_ENTRY = 14  # records_common.MIN_ENTRY (checked as this module loads)


cdef list _walk(bytes buf, Py_ssize_t s, Py_ssize_t e, object ctx, object partial_ok, object decoders):
    """records_common.walk(buf, s, e, ctx, True, partial_ok, decoders) over a bytes buffer:
    each entry whose length fits and whose magic has a decoder is handed to it here, after
    ctx.over_limit as walk does; at the first other entry (too short, cut, an unknown magic)
    walk itself takes over from that entry, so that it alone says what it says about them."""
    cdef list out = []
    cdef Py_ssize_t pos = s, size
    cdef const unsigned char* d
    while pos < e:
        if e - pos < 17:
            break
        d = <const unsigned char*>(<char*>buf) + pos
        size = <int>((<unsigned int>d[8] << 24) | (<unsigned int>d[9] << 16) | (<unsigned int>d[10] << 8)
                     | <unsigned int>d[11])
        if size < MIN_ENTRY or size > e - pos - 12:
            break
        dec = decoders.get(d[16])
        if dec is None:
            break
        if ctx.over_limit(pos):
            count_rest(buf, pos, e, ctx)
            return out
        out.append(dec(buf, pos, pos + 12 + size, ctx, True))
        pos += 12 + size
    if pos < e:
        out.extend(walk(buf, pos, e, ctx, True, partial_ok, decoders))
    return out


cdef inline bint _small(object n) except -1:
    """Whether n is an int within C's range (a long long: a Py_ssize_t)."""
    cdef int overflow = 0
    if type(n) is not int:
        return False
    PyLong_AsLongLongAndOverflow(n, &overflow)
    return overflow == 0


cdef str _label(object name, object records, object batches):
    """f"{name} ({plural(records, 'record')} in {plural(batches, 'batch')})"."""
    cdef Py_ssize_t r, b
    if type(name) is str and _small(records) and _small(batches):
        r, b = records, batches
        return f"{<str>name} ({r} record{'' if r == 1 else 's'} in {b} batch{'' if b == 1 else 'es'})"
    return f"{name} ({plural(records, 'record')} in {plural(batches, 'batch')})"


def decode_records(buf, start, end, opts, name="records", partial_ok=True, budget=None):
    """The batches in buf[start:end] (see decode_records in kdissect/kafka/records.py)."""
    cdef Py_ssize_t s, e
    if not (type(buf) is bytes and _small(start) and _small(end)):
        return _pure(buf, start, end, opts, name, partial_ok, budget)
    e = min(<Py_ssize_t>end, len(<bytes>buf))
    s = max(0, min(<Py_ssize_t>start, e))
    ctx = Ctx(opts, budget if budget is not None else Budget(opts))
    decoders = DECODERS if opts.record_detail else COUNTERS
    decode = opts.decode_records
    batches = (_walk(<bytes>buf, s, e, ctx, partial_ok, decoders) if type(decoders) is dict
               else walk(buf, s, e, ctx, True, partial_ok, decoders)) if decode else []
    records, count = ctx.records, ctx.batches
    label = _label(name, records, count)
    if not decode and e > s:
        field = new_field(name, buf[s:e], s, e - s, None, "raw", None, label)
    else:
        field = new_field(name, None, s, e - s, batches, ARRAY, None, label)
    return field, ctx.diags, {"records": records, "batches": count, "bytes": ctx.nbytes}


import importlib

from kdissect import accel

_py = importlib.import_module("kdissect.kafka.records")
_pure = accel.pure("kdissect.kafka.records", "decode_records")
Ctx, Budget, DECODERS, COUNTERS, walk = _py.Ctx, _py.Budget, _py.DECODERS, _py.COUNTERS, _py.walk
count_rest = importlib.import_module("kdissect.kafka.records_common").count_rest
if importlib.import_module("kdissect.kafka.records_common").MIN_ENTRY != MIN_ENTRY:
    raise ImportError("kdissect.kafka._records: MIN_ENTRY differs from records_common's")
plural, ARRAY = _py.plural, _py.ARRAY
