"""Compiled twin of decode_records in kdissect/kafka/records.py (see kdissect/accel.py): the same
field (built without running Field.__init__, its label written in C), diagnostics and counts,
and the same calls to walk and the batch decoders. A buffer that is not bytes, or bounds that
are not ints within C's range, go to the pure function.
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow

from kdissect._model cimport new_field


# Set from kdissect.kafka.records at the end of this module (records imports this module to bind
# it, after defining them; or this module imports records, which binds it).
cdef object _pure, Ctx, Budget, DECODERS, COUNTERS, walk, plural, ARRAY


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
    batches = walk(buf, s, e, ctx, True, partial_ok, decoders) if decode else []
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
plural, ARRAY = _py.plural, _py.ARRAY
