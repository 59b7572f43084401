"""kdissect/_model.pyx, which builds the Field and Row objects of the compiled core: the objects
it builds, by filling their slots or by calling the classes, are those the classes build (every
slot, identical values), and its check at import falls back to calling the classes when they
are laid out otherwise.

Skipped when the extension is not built."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kdissect.model import ARRAY, ENUM, STRUCT, Field, Row

_model = pytest.importorskip("kdissect._model", reason="the compiled module kdissect._model is not built")

_EMPTY = object()


def slots(obj: Any) -> list[Any]:
    """The type of a Field or Row, whether it has a __dict__, and every slot: value or _EMPTY."""
    out: list[Any] = [type(obj), hasattr(obj, "__dict__"), gc.is_tracked(obj)]
    for cls in (Field, Row):
        if isinstance(obj, cls):
            for name in cls.__slots__:
                try:
                    out.append(cls.__dict__[name].__get__(obj, cls))
                except AttributeError:
                    out.append(_EMPTY)
    return out


def identical(a: Any, b: Any) -> bool:
    sa, sb = slots(a), slots(b)
    return len(sa) == len(sb) and all(x is y for x, y in zip(sa, sb, strict=True))


@pytest.fixture(params=[True, False], ids=["slots", "classes"])
def fast(request: pytest.FixtureRequest) -> Iterator[bool]:
    was = _model._build_objects(request.param)
    yield request.param
    _model._build_objects(was)


def test_slots_are_filled_in_c() -> None:
    """The check at import found Field and Row laid out as expected (else they are called)."""
    was = _model._build_objects(True)
    try:
        assert _model.mode() == "slots", "Field or Row changed: update kdissect/_model.pyx (_layout_ok)"
        assert _model._build_objects(False) is True and _model.mode() == "classes"
    finally:
        _model._build_objects(was)


KIDS = [Field("a", 1)]
FIELD_ARGS = [
    tuple(object() for _ in range(8)),
    ("n",),
    ("n", 7, 3, 4),
    ("n", 1 << 70, -1, 0, None, ENUM, "SEVEN", "a label"),
    ("n", None, 0, 9, KIDS, ARRAY, None, None),
    ("n", b"\x00", 5, 1, KIDS, STRUCT, "d", None),
]
COLUMNS = (("a", None), ("b", ENUM))
ROW_ARGS = [
    tuple(object() for _ in range(7)),
    ("r", COLUMNS, (1, Field("b", 2)), None),
    ("r", COLUMNS, (1, "x"), (0, 1, 1, 2), 0, 3, "offset 5"),
]


@pytest.mark.parametrize("args", FIELD_ARGS)
def test_new_field_is_the_class_field(fast: bool, args: tuple[Any, ...]) -> None:
    f = _model._new_field(*args)
    assert identical(f, Field(*args))
    if isinstance(args[0], str):
        assert repr(f) == repr(Field(*args)) and f.get("a") == Field(*args).get("a")


@pytest.mark.parametrize("args", ROW_ARGS)
def test_new_row_is_the_class_row(fast: bool, args: tuple[Any, ...]) -> None:
    r = _model._new_row(*args)
    assert identical(r, Row(*args))
    assert not r.materialized
    if isinstance(args[0], str):
        built = Row(*args)
        assert [slots(k)[3:] for k in r.children] == [slots(k)[3:] for k in built.children]
        assert r.materialized and r.children is r._kids


def test_references_are_counted(fast: bool) -> None:
    """Each object holds one reference to each value and drops it when freed."""
    v = object()
    before = sys.getrefcount(v)
    objs = [_model._new_field(v, v, v, v, v, v, v, v) for _ in range(100)]
    objs += [_model._new_row(v, v, v, v, v, v, v) for _ in range(100)]
    assert sys.getrefcount(v) == before + 100 * 8 + 100 * 7
    del objs
    assert sys.getrefcount(v) == before


def _inits(build: Callable[[], object]) -> set[type]:
    """The classes, of Field and Row, whose __init__ runs while `build` does (model.py may be
    compiled, so its __init__ is watched by wrapping it, not by Python's profiler)."""
    seen: set[type] = set()
    originals = {cls: cls.__dict__["__init__"] for cls in (Field, Row)}

    def watched(cls: type, init: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            seen.add(cls)
            init(self, *args, **kwargs)
        return __init__

    for cls, init in originals.items():
        cls.__init__ = watched(cls, init)  # type: ignore[misc]
    try:
        build()
    finally:
        for cls, init in originals.items():
            cls.__init__ = init  # type: ignore[misc]
    return seen


def test_the_toggle_chooses_how() -> None:
    """Filling the slots runs no __init__; the fallback calls the classes."""
    def build() -> None:
        _model._new_field("n", 1)
        _model._new_row("r", COLUMNS, (1, 2), None)

    was = _model._build_objects(True)
    try:
        assert _inits(build) == set()
        _model._build_objects(False)
        assert _inits(build) == {Field, Row}
    finally:
        _model._build_objects(was)


# Field and Row replaced, before kdissect._model is imported, by classes laid out otherwise.
CHANGES = {
    "field_extra_slot": """
class Field(m.Field):
    __slots__ = ("extra",)
m.Field = Field
""",
    "field_setattr": """
class Field:
    __slots__ = m.Field.__slots__
    __init__ = m.Field.__init__
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
m.Field = Field
""",
    "row_init_sets_kids": """
init = m.Row.__init__
class Row(m.Field):
    __slots__ = m.Row.__slots__
    children = m.Row.children
    def __init__(self, name, columns, values, spans, offset=-1, length=0, label=None):
        init(self, name, columns, values, spans, offset, length, label)
        self._kids = []
m.Row = Row
""",
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_other_layouts_fall_back_to_the_classes(change: str) -> None:
    code = ("import kdissect.model as m\n" + CHANGES[change] + """
import kdissect._model as k
assert k.mode() == "classes", k.mode()
assert k._build_objects(True) is False and k.mode() == "classes"
f, r = k._new_field("n", 1, 2, 3), k._new_row("r", (("a", None),), (1,), None)
assert type(f) is m.Field and (f.name, f.value, f.offset, f.length) == ("n", 1, 2, 3)
assert type(r) is m.Row and (r.name, r.columns, r.values, r.spans) == ("r", (("a", None),), (1,), None)
print("ok")
""")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr[-2000:]
