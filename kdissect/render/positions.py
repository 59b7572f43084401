"""Where each decoded field lies in its message's bytes: the `positions` object of the JSON
export (docs/json.md), what tshark's `-T json -x` gives as `<field>_raw`.

`positions` mirrors `fields` (jsonout.fields_dict): the same keys, objects and arrays, with
`[offset, length]` in place of each value. Offsets count from the first byte of the message,
its length prefix included (the bytes `length` counts). A struct's own span is its object's
`_span`; an array's own span is the sibling `<key>._span`, since the array's elements fill its
key. What is not known is left out: a field without a position in the message (decoded from a
decompressed buffer), and a struct or array with nothing known inside. An array keeps its
length, with null for an element whose position is not known.

The tree is read as fields_dict reads it: Rows from their columns until their child Fields
exist, a scalar with sub-fields as an object whose `value` is the scalar's own span, repeated
names as one array.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kdissect.model import ARRAY, BYTES, RAW, STRUCT, Field, Message, Row

SPAN = "_span"  # a struct's own [offset, length], in its object
ARRAY_SPAN = "._span"  # after an array's key: the array's own [offset, length], beside it
# Row columns whose values fields_dict converts, so that a Field there is walked.
_CONVERTED = frozenset({BYTES, RAW, STRUCT, ARRAY})

# While walking, spans are tuples, arrays lists and structs dicts, None where unknown; _prune
# turns that into JSON-ready lists and drops what is unknown.
_Tree = Any


def message_positions(m: Message) -> dict[str, Any]:
    """The `positions` object of m: spans within m.data (a position outside it is unknown)."""
    return _prune(_fields(m.fields, len(m.data))) or {}


def _span(offset: Any, length: Any, size: int) -> tuple[int, int] | None:
    """(offset, length) when it lies within the message's `size` bytes, else None."""
    if type(offset) is int and type(length) is int and offset >= 0 and length >= 0 and offset + length <= size:
        return (offset, length)
    return None


def _field(f: Field, size: int) -> _Tree:
    hint = f.hint
    own = _span(f.offset, f.length, size)
    if hint == STRUCT:
        if type(f) is Row and not f.materialized:
            return _with_span(_row(f, size), own)
        return _with_span(_fields(f.children or (), size), own)
    if hint == ARRAY:
        return [_field(c, size) for c in f.children or ()]
    if f.children:  # a scalar with sub-fields: fields_dict writes the scalar as `value`
        d = _fields(f.children, size)
        d["value"] = own
        return d
    return own


def _with_span(d: dict[str, _Tree], own: tuple[int, int] | None) -> dict[str, _Tree]:
    """A struct's object with its own span first, unless a field of that name is there."""
    if own is None or SPAN in d:
        return d
    return {SPAN: own, **d}


def _gives_list(f: Field) -> bool:
    """Whether fields_dict writes a list for f: an array, or a scalar whose value is a list."""
    if f.hint == ARRAY:
        return True
    return f.hint != STRUCT and not f.children and isinstance(f.value, list)


def _fields(fields: Iterable[Field], size: int) -> dict[str, _Tree]:
    out: dict[str, _Tree] = {}
    lists: dict[str, bool] = {}  # each name seen, and whether fields_dict holds a list under it
    arrays: dict[str, tuple[int, int] | None] = {}  # a name given to one array only: its span
    for f in fields:
        name = f.name
        pos = _field(f, size)
        if name not in lists:
            out[name] = pos
            lists[name] = _gives_list(f)
            if f.hint == ARRAY:
                arrays[name] = _span(f.offset, f.length, size)
            continue
        arrays.pop(name, None)
        prev = out[name]
        if not (lists[name] and f.hint != ARRAY):  # fields_dict starts a list of the repeats
            prev = out[name] = [prev]
            lists[name] = True
        elif type(prev) is not list:  # appended to a list value: its items have no positions
            out[name] = None
            continue
        prev.append(pos)
    for name, span in arrays.items():
        if span is not None and name + ARRAY_SPAN not in lists:
            out[name + ARRAY_SPAN] = span
    return out


def _row(row: Row, size: int) -> dict[str, _Tree]:
    """A Row as row_dict writes it: a key per column, a later column replacing an earlier one."""
    out: dict[str, _Tree] = {}
    spans = row.spans
    have = len(spans) if spans is not None else 0
    for i, ((name, hint), v) in enumerate(zip(row.columns, row.values, strict=False)):
        out.pop(name + ARRAY_SPAN, None)
        if isinstance(v, Field) and hint in _CONVERTED:
            out[name] = _field(v, size)
            if v.hint == ARRAY:
                _array_span(out, name, v, size)
        elif spans is not None and 2 * i + 1 < have:
            out[name] = _span(spans[2 * i], spans[2 * i + 1], size)
        else:
            out[name] = None
    return out


def _array_span(out: dict[str, _Tree], name: str, f: Field, size: int) -> None:
    span = _span(f.offset, f.length, size)
    if span is not None:
        out[name + ARRAY_SPAN] = span


def _prune(t: _Tree) -> Any:
    """The JSON form of a walked tree: spans as lists, unknowns left out (None when nothing is
    known), arrays kept whole (null for unknown elements) when one element is known."""
    if t is None:
        return None
    if type(t) is tuple:
        return list(t)
    if type(t) is dict:
        d = {k: p for k, v in t.items() if (p := _prune(v)) is not None}
        return d or None
    items = [_prune(v) for v in t]
    return items if any(v is not None for v in items) else None
