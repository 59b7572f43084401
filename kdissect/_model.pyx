"""Field and Row objects for the compiled core (see kdissect/accel.py): new_field and new_row,
declared in _model.pxd and cimported by the other extension modules, build the objects that
kdissect.model.Field(...) and Row(...) build.

Calling the classes runs their __init__ as Python code, which costs more than decoding most
fields. When the classes are laid out as checked at import (plain classes of __slots__ only,
with object's attribute access, each slot where its descriptor says and within the object, Row
redefining none of Field's attributes but its `children` property, and a sample built both ways
the same, slot by slot), an object is allocated as object.__new__ does and its slots are written
here; otherwise the classes are called.

The same check serves the modules that read the objects: _model.pxd declares its result
(LAYOUT_OK), the offsets of the slots and read_slot, which reads a slot at its offset when the
check passed and the object is exactly a Field or a Row, else through getattr.
"""

cdef extern from *:
    """
    #include <structmember.h>
    /* The offset of `descr` if it is a writable object slot (a __slots__ member descriptor),
       else -1. */
    static Py_ssize_t kd_slot_offset(PyObject *descr) {
        PyMemberDef *m;
        if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY) || m->offset <= 0) return -1;
        return m->offset;
    }
    /* A new instance of `type` with every slot empty, as object.__new__(type) gives. */
    static PyObject *kd_alloc(PyObject *type) {
        PyTypeObject *t = (PyTypeObject *)type;
        return t->tp_alloc(t, 0);
    }
    /* Stores `value` in the slot at `offset` of `obj` (an offset checked at import to lie
       within the objects of its type), releasing what the slot held. */
    static void kd_put(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **slot = (PyObject **)((char *)obj + offset);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
    }
    """
    Py_ssize_t kd_slot_offset(object descr)
    object kd_alloc(object type)
    void kd_put(object obj, Py_ssize_t offset, object value)


cdef object STRUCT  # kdissect.model's, held in C variables (as Field and Row, _model.pxd)
from kdissect.model import STRUCT, Field, Row

FIELD_SLOTS = ("name", "value", "offset", "length", "children", "hint", "display", "label")
ROW_SLOTS = ("columns", "values", "spans", "_kids")

cdef bint FAST = False  # objects are built here (else the classes are called)
# LAYOUT_OK (_model.pxd): the check at import passed, which allows FAST and the direct reads.
# The offsets of the slots in the objects (_model.pxd) are set by the check.


cdef inline void _put_common(object obj, object name, object value, object offset, object length,
                             object hint, object display, object label) noexcept:
    """Fills the Field slots of a new Field or Row but `children`."""
    kd_put(obj, F_NAME, name)
    kd_put(obj, F_VALUE, value)
    kd_put(obj, F_OFFSET, offset)
    kd_put(obj, F_LENGTH, length)
    kd_put(obj, F_HINT, hint)
    kd_put(obj, F_DISPLAY, display)
    kd_put(obj, F_LABEL, label)


cdef object new_field(object name, object value, object offset, object length, object children,
                      object hint, object display, object label):
    """Field(name, value, offset, length, children, hint, display, label)."""
    if not FAST:
        return Field(name, value, offset, length, children, hint, display, label)
    f = kd_alloc(Field)
    _put_common(f, name, value, offset, length, hint, display, label)
    kd_put(f, F_CHILDREN, children)
    return f


cdef object new_row(object name, object columns, object values, object spans, object offset,
                    object length, object label):
    """Row(name, columns, values, spans, offset, length, label): as Row.__init__, a STRUCT whose
    Field `children` slot stays empty (Row's `children` is a property over its columns) and no
    child Fields built yet (_kids None)."""
    if not FAST:
        return Row(name, columns, values, spans, offset, length, label)
    r = kd_alloc(Row)
    _put_common(r, name, None, offset, length, STRUCT, None, label)
    kd_put(r, R_COLUMNS, columns)
    kd_put(r, R_VALUES, values)
    kd_put(r, R_SPANS, spans)
    kd_put(r, R_KIDS, None)
    return r


_EMPTY = object()  # an empty slot, in _slots


cdef list _slots(object obj):
    """The type of a Field or Row and every slot it has: its value, or _EMPTY."""
    out = [type(obj), hasattr(obj, "__dict__")]
    for cls, names in ((Field, FIELD_SLOTS), (Row, ROW_SLOTS)):
        if isinstance(obj, cls):
            for name in names:
                try:
                    out.append(cls.__dict__[name].__get__(obj, cls))
                except AttributeError:
                    out.append(_EMPTY)
    return out


cdef bint _same(list a, list b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


cdef bint _layout_ok() except -1:
    """Whether new_field and new_row may fill the slots of Field and Row themselves, and readers
    read them at their offsets: the classes are plain ones of __slots__ only with object's
    attribute access, every slot is an object member within the objects, at its own offset (set
    here), Row redefines none of Field's attributes but `children` (a property), and objects
    built both ways hold the same values in every slot."""
    global FAST, F_NAME, F_VALUE, F_OFFSET, F_LENGTH, F_CHILDREN, F_HINT, F_DISPLAY, F_LABEL
    global R_COLUMNS, R_VALUES, R_SPANS, R_KIDS
    cdef Py_ssize_t ptr = sizeof(void*), off
    cdef list offsets = []
    for cls, mro, names, nslots in ((Field, (Field, object), FIELD_SLOTS, 8),
                                    (Row, (Row, Field, object), ROW_SLOTS, 12)):
        if (type(cls) is not type or cls.__mro__ != mro or cls.__dict__.get("__slots__") != names
                or cls.__new__ is not object.__new__ or cls.__setattr__ is not object.__setattr__
                or cls.__getattribute__ is not object.__getattribute__
                or cls.__basicsize__ != object.__basicsize__ + nslots * ptr or cls.__itemsize__ != 0):
            return False
        for name in names:
            off = kd_slot_offset(cls.__dict__[name])
            if off < object.__basicsize__ or off > cls.__basicsize__ - ptr or off % ptr:
                return False
            offsets.append(off)
    if len(set(offsets)) != len(offsets):
        return False
    if (type(Row.__dict__.get("children")) is not property
            or any(name in Row.__dict__ for name in FIELD_SLOTS if name != "children")):
        return False
    F_NAME, F_VALUE, F_OFFSET, F_LENGTH, F_CHILDREN, F_HINT, F_DISPLAY, F_LABEL = offsets[:8]
    R_COLUMNS, R_VALUES, R_SPANS, R_KIDS = offsets[8:]
    a = [object() for _ in range(8)]  # distinct values: each must land in its own slot
    FAST = True
    try:
        f = new_field(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
        r = new_row(a[0], a[1], a[2], a[3], a[4], a[5], a[6])
    finally:
        FAST = False
    return _same(_slots(f), _slots(Field(*a))) and _same(_slots(r), _slots(Row(*a[:7])))


def _build_objects(bint on):
    """Builds Field and Row objects here (`on`, when the check at import allowed it) or by calling
    the classes; returns the previous setting. Both give the same objects: for tests. Readers
    (read_slot) follow the check alone, not this setting."""
    global FAST
    was = FAST
    FAST = on and LAYOUT_OK
    return was


def _new_field(name, value=None, offset=-1, length=0, children=None, hint=None, display=None, label=None):
    """new_field, from Python: for tests."""
    return new_field(name, value, offset, length, children, hint, display, label)


def _new_row(name, columns, values, spans, offset=-1, length=0, label=None):
    """new_row, from Python: for tests."""
    return new_row(name, columns, values, spans, offset, length, label)


def mode():
    """How new_field and new_row build objects: "slots" (allocated and filled here) or "classes"
    (Field and Row called: the check at import found another layout, or a test asked)."""
    return "slots" if FAST else "classes"


try:
    LAYOUT_OK = _layout_ok()
except Exception:  # the classes are not what the check reads: they are called and read by getattr
    LAYOUT_OK = False
FAST = LAYOUT_OK
