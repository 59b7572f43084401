"""Compiled twin of body.decode_produce (see kdissect/accel.py): a Produce request of a version
that names its topics (v3-v12), with one topic, read straight from its bytes into the tree, facts,
diagnostics and summary that its plan and the summariser give (no plan interpreted, no Ctx, no
tree walked again for the summary). Anything else (another version, a response, several or null
topics, a null partition array, a tagged field, bytes past the body, a length that does not fit,
a buffer the compiled reader does not read, a budget that could not take every element) goes to
the pure function, untouched: the shortcut reads the whole body before it spends or records
anything. tests/unit/kafka/test_produce_compiled.py keeps the two identical.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

from kdissect._model cimport new_field
from kdissect.dissect.base cimport Budget
from kdissect.kafka.body cimport Body
from kdissect.wire._bytes cimport be as _be
from kdissect.wire._bytes cimport reads_bytes as _reads
from kdissect.wire.reader cimport WireReader

from kdissect.errors import DecodeError
from kdissect.model import ARRAY, BYTES, ENUM, RAW, STRUCT, TIME_MS

# body.py's and its neighbours' objects, looked up on first use (body.py imports this module as
# it finishes loading).
cdef object _pure = None
cdef object _ops = None
cdef object _short = None
cdef object ACKS = None
cdef object ACKS_HINT = None
cdef object ACKS_NAMES = None
cdef object TIMEOUT_HINT = None
cdef object INDEX_HINT = None
cdef object INDEX_NAMES = None
cdef object BASE_HINT = None
cdef object START_HINT = None
cdef object THROTTLE_HINT = None
cdef object error_name = None
cdef object NO_ERROR = None
cdef Py_ssize_t MAX_NAME = 0
cdef Py_ssize_t MAX_TOPICS = 0


cdef void _load():
    global _pure, _ops, _short, ACKS, ACKS_HINT, ACKS_NAMES, TIMEOUT_HINT, INDEX_HINT
    global INDEX_NAMES, MAX_NAME, MAX_TOPICS, BASE_HINT, START_HINT, THROTTLE_HINT, error_name
    global NO_ERROR
    if _pure is None:
        import kdissect.accel as accel
        import kdissect.kafka.ops as ops
        import kdissect.kafka.summary as summary
        ACKS_HINT, ACKS_NAMES = ops.display_of("acks")
        TIMEOUT_HINT = ops.display_of("timeout_ms")[0]
        INDEX_HINT, INDEX_NAMES = ops.display_of("index")
        BASE_HINT = ops.display_of("base_offset")[0]
        START_HINT = ops.display_of("log_start_offset")[0]
        THROTTLE_HINT = ops.display_of("throttle_time_ms")[0]
        error_name = ops.error_name
        NO_ERROR = error_name(0)
        ACKS = summary.ACKS
        MAX_TOPICS = summary.MAX_TOPICS
        MAX_NAME = summary.MAX_NAME
        _short = summary.short
        _ops = ops
        _pure = accel.pure("kdissect.kafka.body", "decode_produce")


cdef struct Reader:
    const unsigned char* d
    Py_ssize_t pos
    Py_ssize_t end
    bint flexible


cdef inline bint _fixed(Reader* r, Py_ssize_t size, int64_t* out) noexcept:
    """A big-endian signed int of `size` (2, 4) bytes; False when it runs past the end."""
    if size > r.end - r.pos:
        return False
    if size == 2:
        out[0] = <int16_t>(<uint16_t>_be(r.d + r.pos, 2))
    else:
        out[0] = <int32_t>(<uint32_t>_be(r.d + r.pos, 4))
    r.pos += size
    return True


cdef inline bint _length(Reader* r, bint wide, int64_t* out) noexcept:
    """ops.length: a compact length (uvarint32 - 1, at most 5 bytes, as ops' fast path reads
    it) or an int16/int32 one; -1 is null. False when it is anything else."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef int i
    cdef unsigned char b
    if not r.flexible:
        return _fixed(r, 4 if wide else 2, out)
    for i in range(5):
        if r.pos >= r.end:
            return False
        b = r.d[r.pos]
        r.pos += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            if v > 0xFFFFFFFF:
                return False
            out[0] = <int64_t>v - 1
            return True
        shift += 7
    return False


cdef inline bint _skip(Reader* r, int64_t n) noexcept:
    """n >= 0 bytes that lie before the end, stepped over."""
    if n < 0 or n > r.end - r.pos:
        return False
    r.pos += n
    return True


cdef inline bint _no_tags(Reader* r) noexcept:
    """The empty tagged-field section of a flexible struct (nothing in older versions)."""
    if not r.flexible:
        return True
    if r.pos >= r.end or r.d[r.pos] != 0:
        return False
    r.pos += 1
    return True


cdef inline str _text(Reader* r, Py_ssize_t p, int64_t n):
    return PyUnicode_DecodeUTF8(<const char*>(r.d + p), n, "replace")


cdef object _records_field(bytes buf, Py_ssize_t start, Py_ssize_t p, int64_t n, Py_ssize_t after,
                           object opts, object budget, list diags, list counts):
    """ops.records once its length is read: null, bytes kept as they are, or decode_records."""
    if n == -1:
        counts.append(None)
        return new_field("records", None, start, after - start, None, None, None, None)
    if not opts.decode_records or n == 0:
        counts.append(None)
        return new_field("records", buf[p:p + n], start, after - start, None, BYTES, None, None)
    try:
        f, more, stats = _ops.decode_records(buf, p, p + n, opts, "records", True, budget)
    except DecodeError as e:
        diags.append(_ops.DIAGNOSTICS("records", f"records: {e}", e.offset))
        counts.append(None)
        return new_field("records", buf[p:p + n], start, after - start, None, RAW, None, None)
    diags.extend(more)
    counts.append(stats.get("records"))
    return f


cdef Body _body(list fields, str summary, dict info, list diagnostics):
    """A Body with its slots set (its __init__ not run)."""
    cdef Body out = Body.__new__(Body)
    out.fields, out.summary, out.info, out.diagnostics = fields, summary, info, diagnostics
    return out


cdef inline int _spend(object budget, Py_ssize_t n) except -1:
    """budget.elements(n), n being at most what is left (checked before)."""
    cdef Budget b
    if type(budget) is Budget:
        b = <Budget>budget
        b.elements_left = b.elements_left - n
    else:
        budget.elements(n)
    return 0


cdef inline str _record_count(object n):
    return f"{n} record" if n == 1 else f"{n} records"


def decode_produce(version, is_request, r, opts, state=None, budget=None):
    """body.decode_produce."""
    _load()
    if type(version) is not int or not 3 <= version <= 12 or not _reads(r):
        return _pure(version, is_request, r, opts, state, budget)
    cdef WireReader rd = <WireReader>r
    cdef bytes buf = <bytes>rd.buf
    if type(rd.pos) is not int or type(rd.end) is not int:
        return _pure(version, is_request, r, opts, state, budget)
    cdef Py_ssize_t start = rd.pos, end = rd.end
    if start < 0 or end < start or end > PyBytes_GET_SIZE(buf):
        return _pure(version, is_request, r, opts, state, budget)
    cdef Reader w
    w.d = <const unsigned char*>PyBytes_AS_STRING(buf)
    w.pos = start
    w.end = end
    w.flexible = version >= 9
    if budget is None:
        budget = Budget(opts)
    if is_request:
        out = _request(&w, buf, opts, budget)
    else:
        out = _response(&w, version, budget)
    if out is None:
        return _pure(version, is_request, r, opts, state, budget)
    rd.pos = end
    return out


cdef object _request(Reader* w, bytes buf, object opts, object budget):
    """A request's Body, or None for the plan to decode it."""
    cdef int64_t n, acks, timeout, ntopics, nparts, index
    cdef Py_ssize_t txn_at, txn_p, acks_at, topics_at, topic_at, name_p, parts_at, topic_end, i
    cdef Py_ssize_t part_at, rec_at, rec_p, rec_end
    cdef int64_t txn_n, name_n
    # The whole body read first, spending and recording nothing: what does not fit goes to
    # the plan, as if this function had not looked.
    txn_at = w.pos
    if not _length(w, False, &txn_n) or txn_n < -1:
        return None
    txn_p = w.pos
    if txn_n >= 0 and not _skip(w, txn_n):
        return None
    acks_at = w.pos
    if not _fixed(w, 2, &acks) or not _fixed(w, 4, &timeout):
        return None
    topics_at = w.pos
    if not _length(w, True, &ntopics) or ntopics != 1:
        return None
    topic_at = w.pos
    if not _length(w, False, &name_n) or name_n < 0:
        return None
    name_p = w.pos
    if not _skip(w, name_n):
        return None
    parts_at = w.pos
    if not _length(w, True, &nparts) or nparts < 0 or nparts > (w.end - w.pos) // 5:
        return None
    cdef list parts = []  # (start, index, records start, bytes start, length, bytes end, end) of each
    for i in range(nparts):
        part_at = w.pos
        if not _fixed(w, 4, &index):
            return None
        rec_at = w.pos
        if not _length(w, True, &n) or n < -1:
            return None
        rec_p = w.pos
        if n >= 0 and not _skip(w, n):
            return None
        rec_end = w.pos
        if not _no_tags(w):
            return None
        parts.append((part_at, index, rec_at, rec_p, n, rec_end, w.pos))
    parts_end = w.pos
    if not _no_tags(w):  # the topic's
        return None
    topic_end = w.pos
    if not _no_tags(w) or w.pos != w.end:  # the body's; then nothing after it
        return None
    if budget.elements_left < 1 + nparts:
        return None

    # The tree, in the order (and with the budget's calls) of the plan.
    txn = None if txn_n == -1 else _text(w, txn_p, txn_n)
    kids = [new_field("transactional_id", txn, txn_at, acks_at - txn_at, None, None, None, None),
            new_field("acks", acks, acks_at, 2, None, ACKS_HINT,
                      None if ACKS_NAMES is None else ACKS_NAMES.get(acks), None),
            new_field("timeout_ms", timeout, acks_at + 2, 4, None, TIMEOUT_HINT, None, None)]
    _spend(budget, 1)
    name = _text(w, name_p, name_n)
    _spend(budget, nparts)
    cdef list diags = []
    cdef list counts = []
    cdef list part_fields = []
    for part_at, index, rec_at, rec_p, n, rec_end, part_end in parts:
        part_fields.append(new_field("partition_data", None, part_at, part_end - part_at, [
            new_field("index", index, part_at, 4, None, INDEX_HINT,
                      None if INDEX_NAMES is None else INDEX_NAMES.get(index), None),
            _records_field(buf, rec_at, rec_p, n, rec_end, opts, budget, diags, counts)],
            STRUCT, None, None))
    topic = new_field("topic_data", None, topic_at, topic_end - topic_at, [
        new_field("name", name, topic_at, name_p + name_n - topic_at, None, None, None, None),
        new_field("partition_data", None, parts_at, parts_end - parts_at, part_fields, ARRAY, None, None)],
        STRUCT, None, None)
    kids.append(new_field("topic_data", None, topics_at, topic_end - topics_at, [topic], ARRAY, None, None))
    shown = []
    for (part_at, index, rec_at, rec_p, n, rec_end, part_end), count in zip(parts, counts):
        shown.append(str(index) if count is None else f"{index}:{_record_count(count)}")
    return _body(kids, f"acks={ACKS.get(acks, acks)} {_label(name)}[{', '.join(shown)}]",
                 {"topics": [name], "topic": name}, diags)


cdef inline str _label(str name):
    """summary.topic_label of a topic that carries its name: the name, cut as short cuts it."""
    return name if len(name) <= MAX_NAME else _short(name)


cdef inline int64_t _int64(const unsigned char* d) noexcept:
    return <int64_t>_be(d, 8)


cdef object _response(Reader* w, int version, object budget):
    """A response's Body, or None for the plan to decode it."""
    cdef int64_t n, ntopics, nparts, name_n, msg_n, index, code, elements = 0
    cdef Py_ssize_t topics_at, topic_at, name_p, parts_at, part_at, msg_at, msg_p, i, j, p
    cdef Py_ssize_t errors_at, parts_end, topic_end, topics_end, throttle_at, part_end
    # Each partition: index, error code, base offset, [log append time (v2+)], [log start
    # offset (v5+)], [record errors (v8+, none here), error message (v8+)], [tags (v9+)].
    cdef Py_ssize_t fixed = 22 + (8 if version >= 5 else 0)
    cdef bint v8 = version >= 8
    cdef list topics = []  # (start, name start, name length, parts start, parts, parts end, end)
    cdef list parts
    topics_at = w.pos
    if not _length(w, True, &ntopics) or ntopics < 0 or ntopics > (w.end - w.pos) // 2:
        return None
    elements += ntopics
    for i in range(ntopics):
        topic_at = w.pos
        if not _length(w, False, &name_n) or name_n < 0:
            return None
        name_p = w.pos
        if not _skip(w, name_n):
            return None
        parts_at = w.pos
        if not _length(w, True, &nparts) or nparts < 0 or nparts > (w.end - w.pos) // fixed:
            return None
        elements += nparts
        parts = []  # (start, record errors start, message start, message bytes start, length, end)
        for j in range(nparts):
            part_at = w.pos
            if fixed > w.end - w.pos:
                return None
            w.pos += fixed
            errors_at = msg_at = msg_p = w.pos
            msg_n = -2  # no record errors, no message (before v8)
            if v8:
                if not _length(w, True, &n) or n != 0:
                    return None
                msg_at = w.pos
                if not _length(w, False, &msg_n) or msg_n < -1:
                    return None
                msg_p = w.pos
                if msg_n >= 0 and not _skip(w, msg_n):
                    return None
            if not _no_tags(w):
                return None
            parts.append((part_at, errors_at, msg_at, msg_p, msg_n, w.pos))
        parts_end = w.pos
        if not _no_tags(w):
            return None
        topics.append((topic_at, name_p, name_n, parts_at, parts, parts_end, w.pos))
    topics_end = w.pos
    if 4 > w.end - w.pos:
        return None
    throttle_at = w.pos
    w.pos += 4
    if not _no_tags(w) or w.pos != w.end or budget.elements_left < elements:
        return None

    cdef const unsigned char* d = w.d
    cdef list names = []
    cdef list shown = []
    cdef list errors = []
    cdef list topic_fields = []
    _spend(budget, ntopics)
    for topic_at, name_p, name_n, parts_at, parts, parts_end, topic_end in topics:
        name = _text(w, name_p, name_n)
        names.append(name)
        _spend(budget, len(parts))
        offsets = []
        part_fields = []
        for part_at, errors_at, msg_at, msg_p, msg_n, part_end in parts:
            p = part_at
            index = <int32_t>(<uint32_t>_be(d + p, 4))
            code = <int16_t>(<uint16_t>_be(d + p + 4, 2))
            base = _int64(d + p + 6)
            kids = [new_field("index", index, p, 4, None, INDEX_HINT,
                              None if INDEX_NAMES is None else INDEX_NAMES.get(index), None),
                    new_field("error_code", code, p + 4, 2, None, ENUM, error_name(code) if code else NO_ERROR, None),
                    new_field("base_offset", base, p + 6, 8, None, BASE_HINT, None, None),
                    new_field("log_append_time_ms", _int64(d + p + 14), p + 14, 8, None, TIME_MS, None, None)]
            if code:
                errors.append(code)
            if version >= 5:
                kids.append(new_field("log_start_offset", _int64(d + p + 22), p + 22, 8, None, START_HINT,
                                      None, None))
            if v8:
                _spend(budget, 0)
                kids.append(new_field("record_errors", None, errors_at, msg_at - errors_at, [], ARRAY, None, None))
                message = None if msg_n == -1 else _text(w, msg_p, msg_n)
                kids.append(new_field("error_message", message, msg_at, msg_p - msg_at + (msg_n if msg_n > 0 else 0),
                                      None, None, None, None))
            part_fields.append(new_field("partition_responses", None, part_at, part_end - part_at, kids, STRUCT,
                                         None, None))
            offsets.append(f"{index}@{base}")
        shown.append(f"{_label(name)}[{', '.join(offsets)}]")
        topic_fields.append(new_field("responses", None, topic_at, topic_end - topic_at, [
            new_field("name", name, topic_at, name_p + name_n - topic_at, None, None, None, None),
            new_field("partition_responses", None, parts_at, parts_end - parts_at, part_fields, ARRAY, None, None)],
            STRUCT, None, None))
    throttle = <int32_t>(<uint32_t>_be(d + throttle_at, 4))
    fields = [new_field("responses", None, topics_at, topics_end - topics_at, topic_fields, ARRAY, None, None),
                  new_field("throttle_time_ms", throttle, throttle_at, 4, None, THROTTLE_HINT, None, None)]
    cdef dict info = {}
    if names:
        kept = [names[0]] if len(names) == 1 else list(dict.fromkeys(names))
        info["topics"] = kept
        info["topic"] = kept[0]
    more = len(shown) - MAX_TOPICS
    summary = ", ".join(shown[:MAX_TOPICS]) + (f", +{more}" if more > 0 else "")
    code = errors[0] if errors else 0
    info["error_code"] = code
    info["error"] = error_name(code) if code else None
    return _body(fields, f"{summary} {error_name(code)}".strip() if code else summary, info, [])
