"""The compiled twin of pipeline/output.py's held_size (see kdissect/accel.py): the same count of
a message's decoded fields, its tree walked with the slots read directly (kdissect/_model.pxd)."""

from cpython.bytes cimport PyBytes_GET_SIZE

from kdissect._model cimport F_CHILDREN, F_VALUE, R_KIDS, R_VALUES, read_slot, reads_field_slots, reads_row_slots

from kdissect.model import Field, Row
from kdissect.pipeline import output as _output

cdef Py_ssize_t FIELD_BYTES = _output.FIELD_BYTES
cdef Py_ssize_t COLUMN_BYTES = _output.COLUMN_BYTES
cdef object _Field = Field
cdef object _Row = Row
cdef object _NoneType = type(None)


def held_size(m):
    """output.held_size(m)."""
    cdef list stack = list(m.fields)
    cdef Py_ssize_t fields = 0, columns = 0, copied = 0
    cdef object f, kids, v, tv
    while stack:
        f = stack.pop()
        fields += 1
        if type(f) is _Row:
            kids = read_slot(f, reads_row_slots(f), R_KIDS, "_kids")
            if kids is None:  # the Row's columns, without building its fields
                for v in read_slot(f, reads_row_slots(f), R_VALUES, "values"):
                    # isinstance(v, Field), answered from the type for the values rows hold
                    tv = type(v)
                    if tv is _Field or tv is _Row:
                        stack.append(v)
                    elif tv is bytes:
                        columns += 1
                        copied += PyBytes_GET_SIZE(v)
                    elif tv is int or tv is _NoneType or tv is str or tv is bool or tv is float:
                        columns += 1
                    elif isinstance(v, _Field):
                        stack.append(v)
                    else:
                        columns += 1
                continue
        else:
            kids = read_slot(f, reads_field_slots(f), F_CHILDREN, "children")
        v = read_slot(f, reads_field_slots(f), F_VALUE, "value")
        if type(v) is bytes:
            copied += PyBytes_GET_SIZE(v)
        if kids:
            stack.extend(kids)
    return len(m.data) + copied + fields * FIELD_BYTES + columns * COLUMN_BYTES
