"""The compiled batch builder (kdissect/spark/_batch.pyx) against worker.batch's pyarrow
conversion: the same record batch (values, types, the children of null structs) or the same
exception, for random rows of every column type the tables use, with the values pyarrow accepts
beside the common ones (subclasses, ints out of range, tuples for lists, dicts with missing or
extra members, lone surrogates), and for the combined rows of every capture. No Spark needed.

Skipped when the extension is not built."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect import accel
from kdissect.spark import worker
from kdissect.spark.rows import combined_values
from kdissect.spark.schema import combined_columns
from kdissect.spark.sqltypes import array, arrow_schema, map_of, struct
from kdissect.spark.units import Piece

pytest.importorskip("kdissect.spark._batch", reason="the compiled module kdissect.spark._batch is not built")
pa = pytest.importorskip("pyarrow")

PURE = accel.pure("kdissect.spark.worker", "batch")
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INNER = struct((("n", "int"), ("s", "string"), ("l", array("string")), ("m", map_of("binary"))))
COLUMNS = (
    ("s", "string"), ("b", "binary"), ("i", "int"), ("l", "bigint"), ("d", "double"), ("t", "boolean"),
    ("ts", "timestamp"), ("day", "date"), ("ls", array("bigint")), ("m", map_of("string")),
    ("st", INNER), ("lst", array(INNER)),
)
SCHEMA = arrow_schema(COLUMNS)


class Text(str):
    pass


class Number(int):
    pass


def ints(bits: int) -> st.SearchStrategy[Any]:
    edge = 1 << (bits - 1)
    return st.one_of(st.integers(-edge, edge - 1), st.sampled_from([edge, -edge - 1, 1 << 64, True]),
                     st.integers(-edge, edge - 1).map(Number))


TEXTS = st.one_of(st.text(max_size=12), st.sampled_from(["\ud800", "é" * 3, ""]), st.text(max_size=3).map(Text),
                  st.binary(max_size=4))
BYTES = st.one_of(st.binary(max_size=8), st.text(max_size=3), st.binary(max_size=3).map(bytearray))
DATES = st.one_of(st.dates(), st.datetimes(), st.sampled_from([datetime.date(1, 1, 1), datetime.date(9999, 12, 31),
                                                              datetime.date(1970, 1, 1), datetime.date(1969, 12, 31)]))


def nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s)


def seq(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(s, max_size=3), st.lists(s, max_size=2).map(tuple))


def pairs(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    pair = st.one_of(st.tuples(st.text(max_size=3), value), st.tuples(st.none(), value),
                     st.lists(st.text(max_size=2), min_size=2, max_size=2))
    return st.one_of(st.lists(pair, max_size=3), st.dictionaries(st.text(max_size=3), value, max_size=2))


INNER_VALUES = st.one_of(
    st.tuples(nullable(ints(32)), nullable(TEXTS), nullable(seq(nullable(TEXTS))), nullable(pairs(nullable(BYTES)))),
    st.tuples(nullable(ints(32))),
    st.fixed_dictionaries({}, optional={"n": nullable(ints(32)), "s": nullable(TEXTS), "x": st.integers(),
                                        "l": nullable(seq(nullable(TEXTS)))}),
    st.integers(),
)

VALUES = (
    TEXTS, BYTES, ints(32), ints(64), st.one_of(st.floats(allow_nan=False), st.integers(-5, 5)), st.one_of(st.booleans(), st.integers(0, 1)),
    ints(64), DATES, seq(nullable(ints(64))), pairs(nullable(TEXTS)), INNER_VALUES, seq(nullable(INNER_VALUES)),
)
# Mostly values of the common kinds, so that a column is built here more often than not.
COMMON = (
    st.text(max_size=6), st.binary(max_size=6), st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(-(1 << 63), (1 << 63) - 1), st.floats(allow_nan=False), st.booleans(), st.integers(0, 1 << 60), st.dates(),
    st.lists(nullable(st.integers(-5, 5)), max_size=3),
    st.lists(st.tuples(st.text(max_size=3), nullable(st.text(max_size=3))), max_size=3),
    st.tuples(nullable(st.integers(-5, 5)), nullable(st.text(max_size=3)), nullable(st.lists(st.text(max_size=2))),
              nullable(st.lists(st.tuples(st.text(max_size=2), nullable(st.binary(max_size=2)))))),
    st.lists(nullable(st.fixed_dictionaries({"n": st.integers(0, 9)}, optional={"s": st.text(max_size=2)})), max_size=2),
)


def outcome(fn: Any, chunk: Any) -> Any:
    try:
        b = fn(chunk, SCHEMA)
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        return ("raised", type(e), str(e))
    b.validate(full=True)
    return ("ok", b)


def same(chunk: Any) -> None:
    want, got = outcome(PURE, chunk), outcome(worker.batch, chunk)
    assert want[0] == got[0], (want, got)
    if want[0] == "raised":
        assert want == got
        return
    a, b = want[1], got[1]
    assert b.schema == a.schema and b.num_rows == a.num_rows
    assert b.equals(a)
    for name in ("st", "lst"):  # the children of null structs too: empty values, as pyarrow leaves them
        x, y = a.column(name), b.column(name)
        if name == "lst" and x.null_count < len(x):
            x, y = x.values, y.values
        if pa.types.is_struct(x.type) and x.null_count < len(x):
            for i in range(x.type.num_fields):
                assert y.field(i).equals(x.field(i))


def rows_of(per_column: tuple[st.SearchStrategy[Any], ...]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(st.tuples(*(nullable(s) for s in per_column)), min_size=1, max_size=12)


@SETTINGS
@given(rows_of(COMMON))
def test_common_values_give_pyarrows_batch(chunk: list[tuple[Any, ...]]) -> None:
    same(chunk)


@SETTINGS
@given(rows_of(VALUES))
def test_any_values_give_pyarrows_batch_or_exception(chunk: list[tuple[Any, ...]]) -> None:
    same(chunk)


@SETTINGS
@given(st.lists(st.one_of(st.tuples(st.none()), st.tuples(st.integers(0, 3)), st.lists(st.none(), max_size=2),
                          st.just(None)), min_size=0, max_size=3))
def test_rows_of_another_shape_give_the_pure_exception(chunk: list[Any]) -> None:
    one = arrow_schema((("i", "int"),))

    def run(fn: Any) -> Any:
        try:
            return ("ok", fn(chunk, one))
        except Exception as e:  # noqa: BLE001 - any exception must be the same
            return ("raised", type(e), str(e))

    want, got = run(PURE), run(worker.batch)
    assert want[0] == got[0] and (want[0] == "ok" and got[1].equals(want[1]) or want == got)


def test_null_columns_and_null_structs() -> None:
    empty = (None,) * len(COLUMNS)
    same([empty, empty])
    same([(*empty[:10], None, [None, (1, "a", ["b"], [("k", b"v")])]), (*empty[:10], (2, None, None, None), None)])


def test_nan_is_kept() -> None:
    nan = float("nan")
    row = (None,) * 4 + (nan,) + (None,) * (len(COLUMNS) - 5)
    got = worker.batch([row, row], SCHEMA).column("d").to_pylist()
    assert [str(x) for x in got] == [str(x) for x in PURE([row, row], SCHEMA).column("d").to_pylist()] == ["nan"] * 2


def captures() -> list[Any]:
    return sorted(p for root in (CAPTURES, SHARED_CAPTURES) if root.is_dir()
                  for p in root.rglob("*.pcap*") if p.is_file() and not p.name.endswith(".json"))


def test_captured_rows_give_pyarrows_batches() -> None:
    schema = arrow_schema(combined_columns())
    checked = 0
    for path in captures():
        cfg = worker.Config(decode_as=sidecar_decode_as(path, path.parent.name), tls_keylog=sidecar_keylog(path),
                            max_bytes=0)
        chunk = [combined_values(m, 0) for m in worker.messages(Piece(str(path), path.stat().st_size), cfg)]
        if not chunk:
            continue
        got = worker.batch(chunk, schema)
        got.validate(full=True)
        assert got.equals(PURE(chunk, schema)), path
        checked += 1
    assert checked > 20


PURE_BATCHES = accel.pure("kdissect.spark.worker", "_batches")
RECORD = st.tuples(*(st.none() for _ in range(6)), st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=3)),
                   st.none(), st.one_of(st.none(), st.binary(max_size=40), st.just(bytearray(b"ab"))))
RECORD_COLS = (("n", "int"), ("_records", array(struct((*((f"c{i}", "int") for i in range(6)), ("key", "binary"),
                                                        ("x", "int"), ("value", "binary"))))))


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 9), st.one_of(st.lists(RECORD, max_size=4), st.just([(1,)]))),
                min_size=1, max_size=30),
       st.integers(1, 8), st.integers(1, 120), st.integers(1, 6))
def test_batches_keep_the_bounds_of_the_pure_ones(rows: list[Any], most_rows: int, most_bytes: int,
                                                  most_records: int) -> None:
    """Combined rows weighed by their records' keys and values (bytes, None, or anything else,
    which the pure weigher weighs or refuses) cut into the same batches, or the same exception."""
    assert worker.KEY_AT == 6 and worker.VALUE_AT == 8  # (the records of RECORD_COLS)
    bounds = {"BATCH_ROWS": most_rows, "BATCH_BYTES": most_bytes, "BATCH_RECORDS": most_records}
    saved = {name: getattr(worker, name) for name in bounds}

    def run(fn: Any) -> Any:
        try:
            return ("ok", list(fn(iter(rows), RECORD_COLS)))
        except Exception as e:  # noqa: BLE001 - any exception must be the same
            return ("raised", type(e), str(e))

    try:
        for name, v in bounds.items():
            setattr(worker, name, v)
        want, got = run(PURE_BATCHES), run(worker._batches)
    finally:
        for name, v in saved.items():
            setattr(worker, name, v)
    assert want[0] == got[0]
    if want[0] == "raised":
        assert want == got
        return
    assert [b.num_rows for b in got[1]] == [b.num_rows for b in want[1]]
    assert all(b.equals(a) for a, b in zip(want[1], got[1], strict=True))
