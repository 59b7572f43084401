"""The compiled held_size (kdissect/pipeline/_output.pyx) against the pure one in output.py: the
same count for every message of the captures (the project's and, when present, ../shared's),
with their Rows as decoded and with their fields built, for trees with subclasses of Field and
Row in them, and for generated trees. Skipped when the extension is not built."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.model import STRUCT, Field, Message, Pdu, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

_twin = pytest.importorskip("kdissect.pipeline._output", reason="the compiled module kdissect.pipeline._output is not built")

PURE = accel.pure("kdissect.pipeline.output", "held_size")
COMPILED = _twin.held_size


def _messages() -> list[Message]:
    out = []
    for path in [*sorted(CAPTURES.glob("*/*.pcap")), *sorted(SHARED_CAPTURES.glob("*/*.pcap"))]:
        reg = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
        out += list(dissect_file(str(path), reg))
    return out


def _has_row(fields: list[Field]) -> bool:
    return any(type(f) is Row or (f.children is not None and _has_row(f.children)) for f in fields)


def _walk(fields: list[Field]) -> None:
    """Builds every Row's fields."""
    for f in fields:
        if f.children:
            _walk(f.children)


def test_every_message_of_the_captures_counts_the_same() -> None:
    msgs = _messages()
    assert any(_has_row(m.fields) for m in msgs)
    assert [COMPILED(m) for m in msgs] == [PURE(m) for m in msgs]
    for m in msgs:
        _walk(m.fields)
    assert [COMPILED(m) for m in msgs] == [PURE(m) for m in msgs]


class SubField(Field):
    __slots__ = ()


class SubRow(Row):
    __slots__ = ()


class OddBytes(bytes):
    pass


# What a Row's column may hold besides a Field: the plain values and others (a bytes subclass
# is not counted as bytes, a list is a column like any other).
_COLUMN_VALUES = st.one_of(st.integers(), st.binary(max_size=32), st.none(), st.text(max_size=8),
                           st.booleans(), st.floats(allow_nan=False), st.binary(max_size=8).map(OddBytes),
                           st.lists(st.integers(), max_size=2))


def _tree(draw: Any, depth: int) -> Field:
    kind = draw(st.sampled_from(["leaf", "struct", "row", "subfield", "subrow"] if depth else ["leaf"]))
    if kind == "leaf":
        return Field("x", draw(st.integers()), 0, 1)
    if kind in ("struct", "subfield"):
        kids = [_tree(draw, depth - 1) for _ in range(draw(st.integers(0, 3)))]
        cls = Field if kind == "struct" else SubField
        return cls("s", None, 0, 1, kids if kids or draw(st.booleans()) else None, STRUCT)
    values = tuple(_tree(draw, depth - 1) if draw(st.booleans()) else draw(_COLUMN_VALUES)
                   for _ in range(draw(st.integers(0, 3))))
    cls = Row if kind == "row" else SubRow
    row = cls("r", tuple((f"c{i}", None) for i in range(len(values))), values, None)
    if draw(st.booleans()):
        _ = row.children  # built
    return row


@st.composite
def messages(draw: Any) -> Message:
    m = Message(Pdu(draw(st.binary(max_size=64)), [1], 0.0, 0.0, True), 0, "c", "s", "kafka")
    m.fields = [_tree(draw, 4) for _ in range(draw(st.integers(0, 4)))]
    m.inflated = draw(st.integers(0, 1 << 20))
    return m


@settings(max_examples=300, deadline=None)
@given(messages())
def test_generated_trees_count_the_same(m: Message) -> None:
    assert COMPILED(m) == PURE(m)
