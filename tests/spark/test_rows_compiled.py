"""The compiled rows (kdissect/spark/_rows.pyx) against the pure ones in spark/rows.py: the same
message rows, transaction rows and protocol structs, value for value and type for type, or the same exception, for every message of the captures of all four protocols (the
project's and ../shared's), and for random facts, fields and projections with values of every
type a JSON export holds. No Spark needed.

Skipped when the extension is not built."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect import accel, protocols
from kdissect.dissect.base import Options
from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, RAW, STRUCT, Field, Match, Message, Pdu, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry, names
from kdissect.render import jsonout
from kdissect.render.jsonout import message_dict
from kdissect.spark import rows
from kdissect.spark.schema import combined_columns, message_columns
from kdissect.spark.sqltypes import arrow_schema
from kdissect.spark.values import END_TIME_S, FIRST_TIME_S, converter

_twin = pytest.importorskip("kdissect.spark._rows", reason="the compiled module kdissect.spark._rows is not built")
_fields_json = pytest.importorskip("kdissect.render._jsonout").fields_json

NAMES = ("projected", "message_values", "transaction_values", "combined_values")
PURE = {name: accel.pure("kdissect.spark.rows", name) for name in NAMES}
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Capture times: today's, and any a pcapng file may give (64-bit timestamps, an offset), with the
# edges of what the TIMESTAMP, DATE and nanosecond BIGINT columns hold.
TIMES = st.one_of(st.floats(0, 4e9), st.floats(-1e19, 1e19),
                  st.sampled_from([FIRST_TIME_S, FIRST_TIME_S - 1e-6, END_TIME_S, END_TIME_S - 1e-3,
                                   (1 << 63) / 1e9, -(1 << 63) / 1e9]))


def typed(v: Any) -> Any:
    """A value with the types of everything in it (True is not 1) and the order of dict keys."""
    if isinstance(v, dict):
        return ("dict", [(k, typed(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [typed(x) for x in v])
    return (type(v).__name__, v)


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", typed(fn(*args)))
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        return ("raised", type(e), str(e))


def same(name: str, *args: Any) -> Any:
    compiled = outcome(getattr(_twin, name), *args)
    with accel.pure_functions("kdissect.spark.rows"):  # (the pure message_values calls projected)
        want = outcome(PURE[name], *args)
    assert compiled == want, (name, args)
    return want


def test_the_twins_are_what_rows_binds_unless_pure() -> None:
    for name in NAMES:
        assert getattr(rows, name) is (PURE[name] if accel.PURE else getattr(_twin, name))


@cache
def captured() -> list[Message]:
    msgs = []
    for proto in names():
        for root in (CAPTURES, SHARED_CAPTURES):
            for path in sorted((root / proto).glob("*.pcap*")) if (root / proto).exists() else ():
                registry = DissectorRegistry(decode_as=sidecar_decode_as(path, proto))
                msgs += list(dissect_file(str(path), registry, Options(tls_keylog=sidecar_keylog(path))))
    return msgs


def test_captured_messages_give_the_same_rows() -> None:
    msgs = captured()
    assert {m.protocol for m in msgs} == set(names())
    columns = [name for name, _ in message_columns()]
    seen = set()
    for m in msgs:
        row = same("message_values", m)
        assert row[0] == "ok"
        seen |= {k for k, v in zip(columns, row[1][1], strict=True) if k in names() and v != ("NoneType", None)}
        same("transaction_values", m)
        same("combined_values", m)
    assert seen == set(names())
    for m in msgs[::5]:
        same("message_values", m, 8, message_dict(m, 8))


@pytest.mark.parametrize("pure", [False, True])
def test_captured_rows_give_the_arrow_batches_of_their_dicts(pure: bool) -> None:
    """The batches of the rows' values are those pyarrow builds from the same rows as dicts,
    with the twins and with the pure functions."""
    pa = pytest.importorskip("pyarrow")
    from kdissect.spark.worker import batches

    schema = arrow_schema(combined_columns())
    with accel.pure_functions("kdissect.spark.rows") if pure else contextlib.nullcontext(), \
            accel.pure_functions("kdissect.spark.records") if pure else contextlib.nullcontext():
        for max_bytes in (256, 8):
            values = [rows.combined_values(m, max_bytes) for m in captured()]
            table = [rows.combined_row(m, max_bytes) for m in captured()]
            got = pa.Table.from_batches(list(batches(iter(values), combined_columns())), schema=schema)
            assert got.equals(pa.Table.from_pylist(table, schema=schema))
            assert got.schema == schema and got.num_rows == len(captured())


def projections() -> list[rows.Compiled]:
    return [rows.compile_projection(d.columns) for d in protocols.dissectors()]



class Relabelled(Message):
    """A Message whose subclass redefines attributes: the compiled rows read an exact Message's
    slots, and anything else as the pure functions do."""

    @property  # type: ignore[override]
    def summary(self) -> str:
        return "relabelled"

    @summary.setter
    def summary(self, _: str) -> None:
        pass

    @property  # type: ignore[override]
    def src(self) -> str:
        return "elsewhere:1"

    @src.setter
    def src(self, _: str) -> None:
        pass


def test_a_message_subclass_gives_the_rows_of_its_own_attributes() -> None:
    for m in captured()[:40]:
        other = Relabelled(Pdu(m.data, list(m.frames), m.ts, m.ts_end, m.to_server), m.stream, m.src, m.dst,
                           m.protocol)
        for name in ("info", "fields", "kind", "match", "peer", "diagnostics", "frame", "capture", "tls"):
            setattr(other, name, getattr(m, name))
        row = same("message_values", other)
        assert row[0] == "ok" and ("str", "relabelled") in row[1][1] and ("str", "elsewhere:1") in row[1][1]
        same("transaction_values", other)
        same("combined_values", other)
        if m.peer is not None:
            m2 = Relabelled(Pdu(m.peer.data, list(m.peer.frames), m.peer.ts, m.peer.ts_end, m.peer.to_server),
                            m.peer.stream, m.peer.src, m.peer.dst, m.peer.protocol)
            m2.kind, m2.info, m2.match = m.peer.kind, m.peer.info, m.peer.match
            other.peer = m2
            same("transaction_values", other)

# What the projections' paths read, and values of every type an export may hold there.
KEYS = sorted({part for c in projections() for _, paths, _, _ in c for _, parts in paths for part in parts}
              | {"*", "x"})
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(), st.integers(min_value=1 << 60),
                    st.floats(allow_nan=False), st.text(max_size=4),
                    st.sampled_from(["12", " -7 ", "--5", "\u00b2", "1_0", "", "x", "2147483648"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4), max_leaves=16)
TREES = st.dictionaries(st.sampled_from(KEYS), st.one_of(SCALARS, VALUES), max_size=8)


@SETTINGS
@given(st.sampled_from(range(len(projections()))), TREES, TREES)
def test_random_fields_and_info_project_the_same(which: int, fields: dict[str, Any], info: dict[str, Any]) -> None:
    same("projected", projections()[which], fields, info)


TYPES = st.sampled_from(["string", "int", "bigint", "double", "boolean", ("array", "string"), ("array", "int")])
PARTS = st.lists(st.sampled_from(KEYS), min_size=1, max_size=3).map(tuple)
# Paths as compile_projection makes them, and odd ones (a flag that is not a bool, no parts, a
# part that is not a str), which the compiled projection reads without its plan.
PATHS = st.one_of(st.tuples(st.booleans(), PARTS), st.tuples(st.sampled_from([0, 1]), PARTS),
                  st.tuples(st.just(False), st.sampled_from([(), ("header", 3)])))


@st.composite
def compiled_projections(draw: Any) -> rows.Compiled:
    cols = []
    for name, t in draw(st.lists(st.tuples(st.text(max_size=3), TYPES), min_size=1, max_size=5)):
        cols.append((name, tuple(draw(st.lists(PATHS, max_size=3))), converter(t), t))
    return tuple(cols)


@SETTINGS
@given(compiled_projections(), TREES, TREES)
def test_random_projections_read_the_same(c: rows.Compiled, fields: dict[str, Any], info: dict[str, Any]) -> None:
    """Projections of every column type with paths into info and the fields ("*" parts too),
    read by the compiled plan (or without it, for odd paths) as by the pure function."""
    same("projected", c, fields, info)
    same("projected", c, fields, info)  # (the plan kept for c)


@SETTINGS
@given(st.sampled_from(names() + ["x"]), st.sampled_from(["request", "response", "event"]), TREES, VALUES,
       TIMES, st.booleans(), st.booleans())
def test_random_messages_give_the_same_rows(protocol: str, kind: str, info: dict[str, Any], fields: Any,
                                            ts: float, paired: bool, answered: bool) -> None:
    m = Message(Pdu(b"\0" * 9, [3, 4], ts, ts + 0.5, kind == "request"), 2, "c:1", "s:2", protocol)
    m.kind, m.info, m.summary = kind, info, "s"
    if paired:
        other = Message(Pdu(b"\0" * 5, [1], ts - 1.25, ts - 1, kind != "request"), 2, "s:2", "c:1", protocol)
        other.info = {"op": "Other", "error_code": 3, "version": "12"}
        if kind == "response":
            m.peer = other
            m.match = Match(1, "request", 1.5)
        elif answered:
            m.match = Match(9, "response", 0.000123456)
    same("message_values", m, 256, {**message_dict(m), "fields": fields})
    same("message_values", m, 256)  # (read from m itself)
    same("transaction_values", m)


# Field trees for message_values read from the message itself: the names the projections read
# (and names they derive: x_name of an enum, x_text of bytes), repeated, with structs, arrays and
# Rows, as fields_dict turns them into the fields object.
# A projection that reads derived keys only (x_name without x): its twin reads the fields they
# derive from too.
DERIVED: Any = (("a", "string", ("a_name", "b.c")), ("t", "string", ("t_text",)), ("e", "string", ("e_name_name",)),
                ("h", "int", ("header.api_key", "info.x")))
NAMES_READ = sorted({*KEYS, "error", "error_code_name_name", "topics_text", "client_id_text", "x_name",
                     "a", "a_name", "b", "c", "t", "t_text", "e", "e_name", "e_name_name"})
LEAF_NAMES = st.one_of(st.sampled_from(["a", "t", "e", "e_name", "error_code"]), st.sampled_from(NAMES_READ))
LEAVES = st.builds(Field, LEAF_NAMES, st.one_of(SCALARS, st.binary(max_size=4)),
                   hint=st.sampled_from([None, ENUM, FLAGS, BYTES, RAW]),
                   display=st.one_of(st.none(), st.text(max_size=3)))


def _nodes(inner: st.SearchStrategy[Field]) -> st.SearchStrategy[Field]:
    """Structs, arrays and Rows; a Row's column names are distinct, as the dissectors make them
    (the pure record walk builds a Row's children, and a Row whose names repeat is written
    otherwise built than unbuilt)."""
    kids = st.lists(inner, max_size=4)
    return st.one_of(st.builds(Field, st.sampled_from(NAMES_READ), st.none(), children=kids,
                               hint=st.sampled_from([STRUCT, ARRAY])),
                     st.builds(lambda name, pairs: Row(name, tuple((n, None) for n, _ in pairs),
                                                       tuple(v for _, v in pairs), None),
                               st.sampled_from(NAMES_READ),
                               st.lists(st.tuples(st.sampled_from(NAMES_READ), SCALARS), max_size=3,
                                        unique_by=lambda pair: pair[0])))


FIELD_TREES = st.lists(st.recursive(LEAVES, _nodes, max_leaves=12), max_size=10)
RTTS = st.one_of(st.none(), st.floats(allow_nan=False), st.floats(-2.0, 2.0), st.integers(-3, 3),
                 st.integers(0, 10**7).map(lambda k: (k + 0.5) / 1e6), st.sampled_from([5e-7, 1.0005e-3, 2.5e-6]))


@SETTINGS
@given(st.sampled_from(names() + ["x"]), FIELD_TREES, RTTS, st.booleans())
def test_random_field_trees_give_the_same_rows(protocol: str, tree: list[Field], rtt: Any, derived: bool) -> None:
    with _projecting(protocol, DERIVED if derived else None):
        _same_rows(protocol, tree, rtt)


@contextlib.contextmanager
def _projecting(protocol: str, projection: Any) -> Any:
    """The protocol's struct made by `projection` (None: its own) while the block runs."""
    if projection is None or protocol not in names():
        yield
        return
    own = rows._COMPILED.get(protocol)
    rows._COMPILED[protocol] = rows.compile_projection(projection)
    try:
        yield
    finally:
        rows._COMPILED.pop(protocol)
        if own is not None:
            rows._COMPILED[protocol] = own


def _same_rows(protocol: str, tree: list[Field], rtt: Any) -> None:
    m = Message(Pdu(b"\0" * 9, [3, 4], 1.7e9, 1.7e9 + 0.5, False), 2, "s:2", "c:1", protocol)
    m.kind, m.fields, m.info = "response", tree, {"op": "Produce"}
    m.peer = Message(Pdu(b"\0" * 5, [1], 1.7e9 - 1, 1.7e9 - 1, True), 2, "c:1", "s:2", protocol)
    m.match = Match(1, "request", rtt)
    for max_bytes in (256, 2, 0):
        same("message_values", m, max_bytes)
        assert _fields_text(tree, max_bytes) == _fields_text_of_dict(tree, max_bytes)
    same("transaction_values", m)
    same("combined_values", m)


def _fields_text(fields: Any, max_bytes: Any) -> Any:
    return outcome(_fields_json, fields, max_bytes)


def _fields_text_of_dict(fields: Any, max_bytes: Any) -> Any:
    with accel.pure_functions("kdissect.render.jsonout"):
        return outcome(lambda f, mb: jsonout.dumps_bytes(jsonout.fields_dict(f, mb)), fields, max_bytes)


def test_the_fields_text_is_that_of_the_fields_dict() -> None:
    """render/_jsonout.fields_json, which the compiled rows write `fields` with: the bytes of
    dumps_bytes(fields_dict(...)), or its exception, for every captured message and odd inputs."""
    for m in captured():
        for max_bytes in (256, 8, 0):
            assert _fields_text(m.fields, max_bytes) == _fields_text_of_dict(m.fields, max_bytes)
    tree = [Field("a", 1), Field("a", b"x", hint=BYTES)]
    for fields, max_bytes in ((tree, "8"), (tree, -3), (tuple(tree), 8), ([object()], 8),
                              (None, 8), ([Field("a", float("inf")), Field(3, 1)], 8)):
        assert _fields_text(fields, max_bytes) == _fields_text_of_dict(fields, max_bytes), (fields, max_bytes)


FACTS = ("op", "op_code", "version", "corr", "error_code", "error", "topic")  # the typed columns of info
INFO = st.dictionaries(st.sampled_from(sorted({*KEYS, *FACTS})), st.one_of(SCALARS, VALUES), max_size=8)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(names() + ["x"]), st.sampled_from(["request", "response", "event"]),
                          INFO, TIMES), min_size=1, max_size=6))
def test_odd_values_give_the_arrow_batches_of_their_dicts(messages: list[tuple[str, str, dict[str, Any], float]]) -> None:
    """Facts out of their columns' range, texts and values of every type in info: the batches
    of the values are those pyarrow builds from the dict rows."""
    pa = pytest.importorskip("pyarrow")
    from kdissect.spark.worker import batches

    msgs = []
    for protocol, kind, info, ts in messages:
        m = Message(Pdu(b"\0" * 9, [3, 4], ts, ts + 0.5, kind == "request"), 2, "c:1", "s:2", protocol)
        m.kind, m.info, m.summary = kind, info, "s"
        msgs.append(m)
    schema = arrow_schema(combined_columns())
    got = pa.Table.from_batches(list(batches((rows.combined_values(m) for m in msgs), combined_columns())))
    assert got.equals(pa.Table.from_pylist([rows.combined_row(m) for m in msgs], schema=schema))


def test_odd_inputs_go_to_the_pure_functions() -> None:
    c = projections()[0]
    twice = (*c, (c[0][0], ((True, ("x",)),), *c[0][2:]))  # a column's name again, read elsewhere
    for args in ((list(c), {"x": 1}, {}), (c, [], {"op": "x"}), (c, {}, None), (twice, {}, {"x": 3}),
                 (twice, {"header": {"api_key": 1}}, {})):
        same("projected", *args)
