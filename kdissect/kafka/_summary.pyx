"""Compiled twin of the tree readers and the busiest summarisers of kdissect/kafka/summary.py (see
kdissect/accel.py): the same text for every tree. Field slots are read at their offsets when
the objects are exactly kdissect.model's Field (kdissect/_model.pxd), else through getattr;
children that are not a list take the pure function's loop.
"""

from kdissect._model cimport F_CHILDREN, F_NAME, F_VALUE, read_slot, reads_field_slots

# summary.py's own objects, looked up on first use (summary.py imports this module as it loads).
cdef object _topic_ids = None
cdef object ACKS = None
cdef Py_ssize_t MAX_TOPICS = 0
cdef Py_ssize_t MAX_NAME = 249  # summary.MAX_NAME (tests/unit/kafka check they agree)


cdef void _load():
    global _topic_ids, ACKS, MAX_TOPICS
    if _topic_ids is None:
        import kdissect.kafka.summary as summary
        from kdissect.kafka.topicids import topic_ids
        ACKS = summary.ACKS
        MAX_TOPICS = summary.MAX_TOPICS
        _topic_ids = topic_ids


cdef inline str _short(str name):
    """summary.short."""
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


cdef inline object _name(object f):
    return read_slot(f, reads_field_slots(f), F_NAME, "name")


cdef inline object _value(object f):
    return read_slot(f, reads_field_slots(f), F_VALUE, "value")


cdef inline object _children(object f):
    return read_slot(f, reads_field_slots(f), F_CHILDREN, "children")


cdef object _child(object fields, object name):
    if type(fields) is list:
        for f in <list>fields:
            if _name(f) == name:
                return f
        return None
    for f in fields or ():
        if f.name == name:
            return f
    return None


cdef inline object _value_of(object fields, object name):
    f = _child(fields, name)
    return None if f is None else _value(f)


cdef inline str _word(object v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


cdef inline object _elements(object fields, object name):
    f = _child(fields, name)
    if f is None:
        return []
    kids = _children(f)
    return kids or []


def child(fields, name):
    """summary.child."""
    return _child(fields, name)


def value(fields, name):
    """summary.value."""
    return _value_of(fields, name)


def text(fields, name):
    """summary.text."""
    return _short(_word(_value_of(fields, name)))


def elements(fields, name):
    """summary.elements."""
    return _elements(fields, name)


cdef str _label(object t, object ctx):
    kids = _children(t)
    for key in ("name", "topic", "topic_name"):
        v = _value_of(kids, key)
        if isinstance(v, str):
            return _short(v)
    tid = _value_of(kids, "topic_id")
    if tid is None:
        return "?"
    _load()
    ids = _topic_ids(ctx)
    known = ids.name(tid) if ids is not None else None
    return _short(known) if known is not None else str(tid)[:8]


def topic_label(t, ctx):
    """summary.topic_label."""
    return _label(t, ctx)


cdef str _shown(list items):
    _load()
    cdef Py_ssize_t more = len(items) - MAX_TOPICS
    shown = ", ".join(items[:MAX_TOPICS])
    return shown + (f", +{more}" if more > 0 else "")


def _limit(items):
    """summary._limit."""
    return _shown(items if type(items) is list else list(items))


cdef inline str _records(object n):
    return f"{n} record" if n == 1 else f"{n} records"


def produce_request(fields, ctx):
    """summary.produce_request."""
    _load()
    acks = _value_of(fields, "acks")
    records = ctx.records
    topics = []
    for t in _elements(fields, "topic_data"):
        parts = []
        for p in _elements(_children(t), "partition_data"):
            kids = _children(p)
            rec = _child(kids, "records")
            n = (records.get(id(rec), {}) if rec is not None else {}).get("records")
            index = _short(_word(_value_of(kids, "index")))
            parts.append(index if n is None else f"{index}:{_records(n)}")
        topics.append(f"{_label(t, ctx)}[{', '.join(parts)}]")
    if isinstance(acks, int):
        acks = ACKS.get(acks, acks)
    return f"acks={acks} {_shown(topics)}"


def partition_offsets(fields, ctx, topics_key, parts_key, part, offset):
    """summary.partition_offsets."""
    topics = []
    for t in _elements(fields, topics_key):
        parts = []
        for p in _elements(_children(t), parts_key):
            kids = _children(p)
            parts.append(f"{_short(_word(_value_of(kids, part)))}@{_short(_word(_value_of(kids, offset)))}")
        topics.append(f"{_label(t, ctx)}[{', '.join(parts)}]")
    return _shown(topics)
