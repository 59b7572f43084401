# kdissect.model's Field and Row objects for compiled code (kdissect/_model.pyx): building them
# (`from kdissect._model cimport new_field, new_row`) and reading their slots
# (`from kdissect._model cimport reads_field_slots, reads_row_slots, read_slot, F_NAME, ...`).

from cpython.object cimport PyObject

# Field(name, value, offset, length, children, hint, display, label)
cdef object new_field(object name, object value, object offset, object length, object children,
                      object hint, object display, object label)

# Row(name, columns, values, spans, offset, length, label)
cdef object new_row(object name, object columns, object values, object spans, object offset,
                    object length, object label)

cdef object Field, Row  # kdissect.model's classes, as the layout check at import found them
# Whether the layout check at import passed: the offsets below are then those of the slots in
# objects of exactly Field and Row (a Row holds Field's slots at the same offsets).
cdef bint LAYOUT_OK
cdef Py_ssize_t F_NAME, F_VALUE, F_OFFSET, F_LENGTH, F_CHILDREN, F_HINT, F_DISPLAY, F_LABEL
cdef Py_ssize_t R_COLUMNS, R_VALUES, R_SPANS, R_KIDS

cdef extern from *:
    """
    /* The object in the slot at `offset` of `o`, borrowed; NULL when the slot is empty. */
    static CYTHON_INLINE PyObject *kd_slot(PyObject *o, Py_ssize_t offset) {
        return *(PyObject **)((char *)o + offset);
    }
    """
    PyObject* kd_slot(PyObject* o, Py_ssize_t offset)


cdef inline bint reads_field_slots(object o):
    """Whether Field's slots (F_*) of `o` may be read at their offsets: the layout check passed
    and `o` is exactly a Field or a Row (a subclass may redefine any attribute)."""
    return LAYOUT_OK and (type(o) is Field or type(o) is Row)


cdef inline bint reads_row_slots(object o):
    """Whether Row's slots (R_*) and Field's (F_*) of `o` may be read at their offsets: the
    layout check passed and `o` is exactly a Row. Row.children is a property, not a slot."""
    return LAYOUT_OK and type(o) is Row


cdef inline object read_slot(object o, bint direct, Py_ssize_t offset, str name):
    """o.name: the slot at `offset` when `direct` (reads_field_slots or reads_row_slots said so),
    else getattr. An empty slot goes to getattr too, which raises the AttributeError."""
    cdef PyObject* p
    if direct:
        p = kd_slot(<PyObject*>o, offset)
        if p != NULL:
            return <object>p
    return getattr(o, name)
