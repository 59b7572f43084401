"""The compiled record extraction (kdissect/spark/_records.pyx) against the pure one in
spark/records.py: the same records, column for column and type for type, or the same exception,
for every message of the captures of all four protocols (the project's and ../shared's), with
their Rows' child Fields built or not, with short and long value cuts, and for random trees of
Fields and Rows with the names the rules look for. No Spark needed.

Skipped when the extension is not built."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect import accel
from kdissect.dissect.base import Options
from kdissect.model import ARRAY, BYTES, STRUCT, Field, Message, Pdu, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry, names
from kdissect.spark import records

_twin = pytest.importorskip("kdissect.spark._records", reason="the compiled module kdissect.spark._records is not built")

PURE = accel.pure("kdissect.spark.records", "record_values")
COMPILED = _twin.record_values
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def typed(v: Any) -> Any:
    """A value with the types of everything in it (True is not 1)."""
    if isinstance(v, dict):
        return {k: typed(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [typed(x) for x in v])
    return (type(v).__name__, v)


def outcome(fn: Any, m: Message, max_bytes: int) -> Any:
    try:
        return ("ok", typed(fn(m, max_bytes)))
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        return ("raised", type(e), str(e))


def same(m: Message, max_bytes: int = 256) -> Any:
    compiled = outcome(COMPILED, m, max_bytes)  # first: the pure walk builds the Rows' children
    want = outcome(PURE, m, max_bytes)
    assert compiled == want, (m.protocol, m.frame, m.summary)
    assert outcome(COMPILED, m, max_bytes) == want  # and again, over the built children
    return want


def test_the_twin_is_what_records_binds_unless_pure() -> None:
    assert records.record_values is (PURE if accel.PURE else COMPILED)


def _captures() -> list[tuple[Path, str]]:
    out = []
    for proto in names():
        for root in (CAPTURES, SHARED_CAPTURES):
            out += [(p, proto) for p in sorted((root / proto).glob("*.pcap*")) if (root / proto).exists()]
    return out


@cache
def captured() -> list[Message]:
    msgs = []
    for path, proto in _captures():
        registry = DissectorRegistry(decode_as=sidecar_decode_as(path, proto))
        msgs += list(dissect_file(str(path), registry, Options(tls_keylog=sidecar_keylog(path))))
    return msgs


def test_captured_messages_give_the_same_records() -> None:
    msgs = captured()
    found = {m.protocol for m in msgs if same(m)[1] != ("list", [])}
    assert {"kafka", "pulsar", "rocketmq"} <= found
    for m in msgs[::7]:
        same(m, 8)


NAMES = ("records", "messages", "value", "payload", "key", "headers", "properties", "topic", "name", "index",
         "partition", "offset", "timestamp", "producer_id", "producer_epoch", "base_sequence", "sequence_id",
         "offset_delta", "compression", "attributes", "ledger_id", "entry_id", "topic_id", "x")
HINTS = (None, STRUCT, ARRAY, BYTES, "enum", "raw")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 5), st.integers(), st.text(max_size=5),
                    st.binary(max_size=5), st.sampled_from(["12", "-3", "x1"]))


@st.composite
def nodes(draw: st.DrawFn, depth: int) -> Field:
    name = draw(st.sampled_from(NAMES))
    hint = draw(st.sampled_from(HINTS))
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return Field(name, draw(SCALARS), -1, 0, None, hint, draw(st.one_of(st.none(), st.sampled_from(["LZ4", "x"]))))
    kids = draw(st.lists(nodes(depth - 1), max_size=4))
    if draw(st.booleans()):
        columns = tuple((draw(st.sampled_from(NAMES)), draw(st.sampled_from(HINTS))) for _ in kids)
        values = tuple(k if draw(st.booleans()) else k.value for k in kids)
        row = Row(name, columns, values, None)
        if draw(st.booleans()):
            row.children  # noqa: B018 - built children are what a Row then holds
        return row
    return Field(name, None, -1, 0, kids, hint)


@SETTINGS
@given(st.lists(nodes(4), max_size=4), st.dictionaries(st.sampled_from(["topic", "partition", "queue_id",
                                                                       "producer_id"]), SCALARS),
       st.sampled_from([0, 8, 256]))
def test_random_trees(fields: list[Field], info: dict[str, Any], max_bytes: int) -> None:
    m = Message(Pdu(b"\0" * 16, [1], 0.0, 0.0, True), 0, "c", "s", "x")
    m.fields = fields
    m.info = info
    same(m, max_bytes)


@pytest.mark.parametrize("column", [("records", ARRAY), ("messages", ARRAY), ("records", None), ("records", STRUCT),
                                    ("value", BYTES)])
@pytest.mark.parametrize("built", [False, True])
def test_a_record_row_whose_column_may_be_a_record_array(column: tuple[str, Any], built: bool) -> None:
    """A Row in a record array is a record unless one of its children is a record array itself,
    whether the column holds a scalar (a null array) or a Field, and whether its children were
    built."""
    for inner in (None, b"v", Field(column[0], None, -1, 0, [Field("value", b"x", -1, 1, None, BYTES)], ARRAY)):
        same_in_a_record_array(Row("record", (("offset", None), column, ("key", BYTES)), (7, inner, b"k"), None), built)


@pytest.mark.parametrize("built", [False, True])
def test_a_record_row_whose_field_values_bear_other_names_than_their_columns(built: bool) -> None:
    """A Row's child is its Field value when the column holds one, under the Field's own name:
    the record's fields are found by those names, not by the columns'."""
    cases = [
        (("payload", BYTES), Field("value", b"v", -1, 1, None, BYTES)),
        (("value", BYTES), Field("other", b"v", -1, 1, None, BYTES)),
        (("timestamp", None), Field("offset", 99, -1, 8)),
        (("x", STRUCT), Field("meta", None, -1, 0, [Field("producer_id", 5, -1, 8)], STRUCT)),
    ]
    for column, inner in cases:
        columns = (("offset", None), column, ("key", BYTES), ("value", BYTES))
        same_in_a_record_array(Row("record", columns, (7, inner, b"k", b"w"), None), built)


def same_in_a_record_array(row: Row, built: bool) -> None:
    """The records of a message whose record array holds row (its children built or not)."""
    if built:
        row.children  # noqa: B018 - built children are what a Row then holds
    m = Message(Pdu(b"\0" * 16, [1], 0.0, 0.0, True), 0, "c", "s", "x")
    m.fields = [Field("topic", "t", -1, 0), Field("records", None, -1, 0, [row], ARRAY)]
    m.info = {"topic": "t"}
    same(m)
