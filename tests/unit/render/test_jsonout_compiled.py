"""The JSON export path: the compiled tree walkers (kdissect/render/_jsonout.pyx) against the
pure ones in jsonout.py, and the orjson encoder (jsonout.dumps_bytes) against the standard
library's json.dumps.

Walkers: the same dicts, lists and strings (types, key order, float bits) or the same exception,
for every message of every capture under captures/ (Rows as decoded, then with their child
Fields built) and for generated Field/Row trees with odd values: bytes that are invalid UTF-8 or
not printable, text cut inside a character, huge integers, NaN and infinities, nested arrays,
repeated names, rows with fields in their columns. max_bytes 0, 1, 8 and 256, and odd ones.
Skipped, saying so, when the extension is not built.

Encoder: the text of json.dumps(d, ensure_ascii=False, separators=(",", ":")) with bytes as
base64, except the documented differences: NaN and infinities are null, and a lone surrogate is
a \\uXXXX escape.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import importlib
import json
import math
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import decode_capture, own_captures

from kdissect import accel
from kdissect.model import (
    ARRAY,
    BYTES,
    ENUM,
    FLAGS,
    RAW,
    SECRET,
    STRUCT,
    TIME_MS,
    Diagnostic,
    Field,
    Group,
    Match,
    Message,
    Pdu,
    Row,
    Severity,
)
from kdissect.render import jsonout

MODULE = jsonout.__name__
NAMES = ("printable", "bytes_value", "bytes_text", "text_or_hex", "row_dict", "field_value", "fields_dict",
         "message_dict", "message_json", "message_line", "_odd_floats")
PURE = {n: accel.pure(MODULE, n) for n in NAMES}
try:
    _twin: Any = importlib.import_module("kdissect.render._jsonout")
except ImportError:
    _twin = None
needs_twin = pytest.mark.skipif(
    _twin is None, reason="the compiled twin kdissect.render._jsonout is not built "
                          "(cythonize it or pip install the project with a C compiler)")
MAX_BYTES = (0, 1, 8, 256)
SLOW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return ("raised", type(e), str(e))


def pure_outcome(name: str, *args: Any) -> tuple[Any, ...]:
    with accel.pure_functions("kdissect.render.jsonout"):
        return outcome(PURE[name], *args)


def twin_outcome(name: str, *args: Any) -> tuple[Any, ...]:
    return outcome(getattr(_twin, name), *args)


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down, dict keys in the same order and floats with
    the same bits (NaN equal to NaN, -0.0 not to 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def assert_same(name: str, *args: Any) -> Any:
    want = pure_outcome(name, *args)
    got = twin_outcome(name, *args)
    assert same(got, want), f"{name}: compiled {got!r}\n  pure {want!r}"
    return want


# ---------------------------------------------------------------------------------------------
# Captures


capture_messages = cache(decode_capture)  # (each module its own: some tests change the messages)


def _materialize(fields: list[Field]) -> int:
    """Builds the child Fields of every Row below `fields`; how many Rows there were."""
    rows = 0
    stack = list(fields)
    while stack:
        f = stack.pop()
        if type(f) is Row:
            rows += 1
        stack.extend(f.children or ())
    return rows


def test_the_twin_is_bound_unless_pure() -> None:
    if _twin is None or accel.PURE:
        assert accel.compiled(MODULE, "message_dict") is None
    else:
        assert all(accel.compiled(MODULE, n) is getattr(_twin, n) for n in NAMES)


@needs_twin
def test_the_twin_reads_field_and_row_slots_directly() -> None:
    # The twin reads the slots at their offsets when kdissect/_model.pyx's layout check passed at
    # import, which is what lets _build_objects(True) build objects there ("slots"). "classes"
    # would mean model.py changed Field or Row: the twin stays correct through getattr, only
    # slower.
    from kdissect import _model

    was = _model._build_objects(True)
    try:
        assert _model.mode() == "slots", "Field or Row changed: update kdissect/_model.pyx (_layout_ok)"
    finally:
        _model._build_objects(was)


@needs_twin
@pytest.mark.parametrize("path", own_captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_messages_give_the_same_dicts(path: Path) -> None:
    msgs = capture_messages(path)
    assert msgs
    for m in msgs:
        for mb in MAX_BYTES:
            assert_same("message_dict", m, mb)
            assert_same("message_json", m, mb)
    # Once something has walked the trees (-V, filters), Rows answer from their child Fields.
    fresh = decode_capture(path)
    for m in fresh:
        _materialize(m.fields)
        for mb in MAX_BYTES:
            assert_same("message_dict", m, mb)
            assert_same("message_json", m, mb)


@needs_twin
def test_capture_messages_are_written_without_their_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The compiled message_json writes every message of the captures itself: none takes the
    # dict path (message_dict, then the encoder), which it would ask for through accel.pure.
    msgs = [m for p in own_captures() for m in capture_messages(p)]
    asked: list[tuple[str, str]] = []
    real = accel.pure

    def pure(module: str, name: str) -> Any:
        asked.append((module, name))
        return real(module, name)

    monkeypatch.setattr(accel, "pure", pure)
    for m in msgs:
        for mb in MAX_BYTES:
            _twin.message_json(m, mb)
    assert len(msgs) > 1000
    assert asked == []


@needs_twin
def test_writing_a_message_builds_no_row_fields() -> None:
    # message_json reads Rows from their values, as message_dict does: writing the JSON of a
    # message leaves its Rows as decoded (their child Fields are built only by a walk).
    rows = [f for p in own_captures() for m in capture_messages(p) for f in _rows(m.fields)]
    unbuilt = [r for r in rows if r._kids is None]
    assert unbuilt
    for p in own_captures():
        for m in capture_messages(p):
            _twin.message_json(m, 256)
    assert all(r._kids is None for r in unbuilt)


@pytest.mark.parametrize("path", own_captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_messages_encode_as_the_standard_library_does(path: Path) -> None:
    for m in capture_messages(path):
        d = jsonout.message_dict(m, 256)
        want = json.dumps(d, ensure_ascii=False, default=_old_default, separators=(",", ":"))
        assert jsonout.dumps(d) == want
        assert jsonout.dumps_bytes(d) == want.encode()


def _rows(fields: list[Field]) -> list[Row]:
    """The Rows below `fields` (as they are: no Row's children are built)."""
    out = []
    stack = list(fields)
    while stack:
        f = stack.pop()
        if type(f) is Row:
            out.append(f)
            stack.extend(v for v in f.values if isinstance(v, Field)) if f._kids is None else stack.extend(f._kids)
        else:
            stack.extend(f.children or ())
    return out


def test_captures_hold_rows() -> None:
    assert sum(_materialize(m.fields) for p in own_captures() for m in capture_messages(p)) > 0


# ---------------------------------------------------------------------------------------------
# Generated trees

names = st.sampled_from(["a", "b", "value", "a_name", "a_text", "k", ""])
scalar_hints = st.sampled_from([None, None, ENUM, FLAGS, TIME_MS, BYTES, RAW, SECRET])
column_hints = st.sampled_from([None, BYTES, RAW, STRUCT, ARRAY, ENUM, TIME_MS])
displays = st.none() | st.sampled_from(["NAME", "", "a|b"])
_ODD_BYTES: list[bytes] = [
    b"", b"\t\r\n", b"a\tb\r\nc", b"a\x00b", b"\x7f", b"\x1b[0m", b"\xc3", b"caf\xc3\xa9", b"\xed\xa0\x80", b"\xff\xfe",
    *(t.encode() for t in ("é\tx\r\n", "é\x00", "é\x85", "\u2028", "\u00ad", "\U0001f600", "é" * 20, "x" * 300)),
]
odd_bytes = st.sampled_from(_ODD_BYTES)
byte_strings = st.one_of(
    st.binary(max_size=40),
    st.binary(min_size=250, max_size=300),
    st.text(max_size=40).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.text(min_size=1, max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass")),
    odd_bytes,
)
odd_numbers = st.sampled_from([
    2**64, 2**64 - 1, -2**63, -2**63 - 1, 2**70, -2**100, float("nan"), float("inf"), float("-inf"),
    1e-7, 2.5e-5, 1e-9, 1e-10, 1e16, 1e22, -0.0, 5e-324,
])
odd_texts = st.sampled_from(["\ud800", "a\udfffb", "\ud83d\ude00", "\u2028\u2029", "\x00\x1f\x7f\x80", "é😀", ""])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-2**80, max_value=2**80), st.floats(),
    odd_numbers, st.text(max_size=20), odd_texts,
    byte_strings, byte_strings.map(lambda b: bytearray(b)), byte_strings.map(lambda b: memoryview(b)),
    st.lists(st.one_of(st.integers(), st.binary(max_size=4), st.text(max_size=4), st.floats()), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(min_value=-3, max_value=3)),
                    st.one_of(st.integers(), st.binary(max_size=4), st.floats()), max_size=2),
)
COLUMN_SETS = [
    (("offset_delta", None), ("timestamp_delta", TIME_MS), ("key", BYTES), ("value", BYTES), ("headers", ARRAY)),
    (("a", None), ("b", BYTES)),
    (("r", RAW), ("s", STRUCT), ("e", ENUM)),
    (("a", None), ("a", BYTES)),
    (),
]


class _SubField(Field):
    """Not a Field: attributes through getattr."""

    __slots__ = ("extra",)


class _SubRow(Row):
    """Not a Row: walked through its (built) children."""

    __slots__ = ()


field_classes = st.sampled_from([Field, Field, Field, _SubField])
leaves = st.builds(lambda cls, n, v, h, d: cls(n, v, hint=h, display=d), field_classes, names, scalars, scalar_hints,
                   displays)


@st.composite
def rows(draw: st.DrawFn, children: st.SearchStrategy[Field]) -> Row:
    columns = draw(st.sampled_from(COLUMN_SETS)
                   | st.lists(st.tuples(names, column_hints), max_size=4).map(tuple))
    values = tuple(draw(st.one_of(scalars, children)) for _ in columns)
    spans = draw(st.none() | st.just(tuple(range(2 * len(columns)))))
    row = draw(st.sampled_from([Row, Row, Row, _SubRow]))(draw(names), columns, values, spans)
    if draw(st.integers(0, 3)) == 0:
        _ = row.children  # built: the child Fields are the truth now
    return row


def extend(children: st.SearchStrategy[Field]) -> st.SearchStrategy[Field]:
    kids = st.lists(children, max_size=4)
    return st.one_of(
        st.builds(lambda cls, n, c: cls(n, None, children=c, hint=STRUCT), field_classes, names, kids),
        st.builds(lambda cls, n, c: cls(n, None, children=c, hint=ARRAY), field_classes, names, kids),
        st.builds(lambda n, h: Field(n, None, children=None, hint=h), names, st.sampled_from([STRUCT, ARRAY])),
        # a scalar with sub-fields (flags broken out, parsed payloads)
        st.builds(lambda n, v, c, h, d: Field(n, v, children=c, hint=h, display=d),
                  names, scalars, kids, scalar_hints, displays),
        rows(children),
    )


trees = st.recursive(leaves, extend, max_leaves=25)
forests = st.lists(trees, max_size=6)


@needs_twin
@SLOW
@given(forests)
def test_generated_trees_give_the_same_values(fields: list[Field]) -> None:
    for mb in MAX_BYTES:
        assert_same("fields_dict", fields, mb)
        assert_same("fields_dict", tuple(fields), mb)
        for f in fields:
            assert_same("field_value", f, mb)
            if type(f) is Row:
                assert_same("row_dict", f, mb)


class _OwnDiagnostic:
    """Not a Diagnostic: written through its own to_json."""

    def to_json(self) -> dict[str, Any]:
        return {"key": "x.y", "message": "own \u00e9\n"}


class _BrokenDiagnostic:
    def to_json(self) -> dict[str, Any]:
        raise KeyError("broken")


@needs_twin
@pytest.mark.parametrize("diagnostics", [
    [],
    [Diagnostic(Severity.ERROR, Group.MALFORMED, "kafka.truncated", "int16 past the end", 12)],
    [Diagnostic(Severity.NOTE, Group.COMMENT, "a.b", 'quote " and \\ and \x01 and \u00e9', -1),
     Diagnostic(Severity.CHAT, Group.SEQUENCE, "tcp.gap", "", 0)],
    [Diagnostic("error", Group.MALFORMED, "k", "m", 1)],  # (no _value_: both raise)
    [Diagnostic(Severity.ERROR, Group.MALFORMED, "k", "m", None)],  # (None >= 0: both raise)
    [Diagnostic(Severity.ERROR, Group.MALFORMED, "k", "m", 2**70)],
    [Diagnostic(Severity.ERROR, Group.MALFORMED, "k", "m", 3), _OwnDiagnostic()],
    [_BrokenDiagnostic()],
    (Diagnostic(Severity.WARNING, Group.PROTOCOL, "k", "in a tuple", 4),),
])
def test_diagnostics_are_written_as_their_dicts(diagnostics: Any) -> None:
    # The compiled writer writes a Diagnostic's members itself, with constant keys; anything
    # else goes through to_json, and whatever raises there raises the same.
    m = Message(Pdu(b"\x00" * 7, [3, 4], 1.5, 1.5, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    m.diagnostics = diagnostics
    for mb in (0, 256):
        assert_same("message_json", m, mb)
    assert same(outcome(_twin.message_json, m), pure_outcome("message_json", m))


@needs_twin
@SLOW
@given(forests, st.dictionaries(st.text(max_size=5), scalars, max_size=4), st.floats(allow_nan=False))
def test_generated_messages_give_the_same_dicts(fields: list[Field], info: dict[str, Any], ts: float) -> None:
    m = Message(Pdu(b"\x00" * 7, [3, 4], ts, ts, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    m.fields = fields
    m.info = info
    m.add(Diagnostic(Severity.WARNING, Group.MALFORMED, "kafka.truncated", "cut", 5))
    m.match = Match(9, "response", 0.0012345)
    for mb in MAX_BYTES:
        assert_same("message_dict", m, mb)
        assert_same("message_json", m, mb)
        assert_same("message_line", m, mb)
        assert same(pure_outcome("message_json", m, mb), twin_outcome("message_json", m, mb))  # again: the same
    assert same(outcome(_twin.message_dict, m), pure_outcome("message_dict", m))
    assert same(outcome(_twin.message_json, m), pure_outcome("message_json", m))
    assert same(outcome(_twin.message_line, m), pure_outcome("message_line", m))


@pytest.mark.parametrize("fn", ["pure", "twin"])
def test_repeated_names_never_change_the_tree(fn: str) -> None:
    # A repeated name after a field whose value is a list: the list in the output holds both,
    # and the field's own list is left as it is, so writing the message again gives the same.
    own = [1, 2]
    fields = [Field("a", own), Field("a", 3), Field("a", 4), Field("b", [5]), Field("b", None, children=[], hint=ARRAY)]
    if fn == "twin" and _twin is None:
        pytest.skip("the compiled twin is not built")
    m = Message(Pdu(b"\x00" * 7, [3], 1.0, 1.0, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    m.fields = fields
    for _ in range(3):
        if fn == "pure":
            with accel.pure_functions(MODULE):
                d, text = PURE["fields_dict"](fields, 256), PURE["message_json"](m, 256)
        else:
            d, text = _twin.fields_dict(fields, 256), _twin.message_json(m, 256)
        assert d == {"a": [1, 2, 3, 4], "b": [[5], []]}
        assert b'"fields":{"a":[1,2,3,4],"b":[[5],[]]}' in text
        assert own == [1, 2] and fields[3].value == [5]


# Times as captures give them (microseconds, nanoseconds), response times of a few ms, and floats
# near the edges of the writer's decimal path: 1e-4, 2**33, the ties of a third decimal in ms.
micro_times = st.integers(0, 2**33 * 10**6).map(lambda n: n / 1e6)
nano_times = st.integers(0, 2**33 * 10**9).map(lambda n: n / 1e9)
edges = st.sampled_from([1e-4, 0.99999e-4, 2.0**33, 2.0**33 - 1e-6, 0.0005, 0.0015, 0.0000005, 1e6 - 0.5e-6])
times = micro_times | nano_times | edges | st.floats(allow_nan=False)


@needs_twin
@SLOW
@given(times, times)
def test_times_and_response_times_are_written_as_repr_writes_them(ts: float, rtt: float) -> None:
    m = Message(Pdu(b"\x00" * 7, [3], ts, ts, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    m.match = Match(9, "response", rtt)
    assert_same("message_json", m, 256)
    m.match = Match(9, "response", rtt / 1000.0)
    assert_same("message_json", m, 256)


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: abs(x) >= 2.0**24))
def test_times_from_two_to_the_24_round_to_themselves(x: float) -> None:
    # The compiled message_json writes such a time as it is, without round(ts, 9): a double's
    # spacing there is above 2e-9, so the nearest double to x rounded to 9 decimals is x.
    assert repr(round(x, 9)) == repr(x)


@needs_twin
@SLOW
@given(byte_strings | st.binary())
def test_byte_strings_give_the_same_text(b: bytes) -> None:
    assert_same("printable", b)
    assert_same("printable", bytearray(b))
    assert_same("printable", memoryview(b))  # no decode(): the same AttributeError
    for mb in (*MAX_BYTES, 3, len(b), len(b) - 1, -1, 2**70):
        for name in ("bytes_value", "bytes_text", "text_or_hex"):
            assert_same(name, b, mb)
            assert_same(name, bytearray(b), mb)


# Lengths around the words the twin reads (8 and 16 bytes; 12 of base64 read 16 at a time).
LENGTHS = (*range(0, 26), 27, 28, 29, 31, 32, 33, 35, 36, 40, 41, 47, 48, 49)


@needs_twin
@pytest.mark.parametrize("c", [0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x7E, 0x7F, 0x80, 0xC3, 0xFF])
def test_one_odd_byte_anywhere_in_ascii_text(c: int) -> None:
    # The twin tests printable ASCII 8 bytes at a time: every length and position around a word.
    for n in LENGTHS:
        for pos in range(n):
            b = bytes(0x41 + (i % 26) for i in range(n))
            b = b[:pos] + bytes([c]) + b[pos + 1:]
            assert_same("printable", b)
            for name in ("bytes_value", "bytes_text", "text_or_hex"):
                assert_same(name, b, 0)
                assert_same(name, b, 9)


@needs_twin
@pytest.mark.parametrize("c", [0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x22, 0x5C, 0x7E, 0x7F, 0x80, 0xC3, 0xFF])
def test_one_odd_byte_anywhere_in_written_bytes(c: int) -> None:
    # The writer writes a byte string's base64 12 or six bytes at a time and its text as it is
    # up to the first byte that is not printable ASCII or needs an escape, 16 or 8 bytes at a
    # time: every length and position around a word, whole and cut.
    m = Message(Pdu(b"\x00" * 7, [3], 1.5, 1.5, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    for n in LENGTHS:
        for pos in range(max(n, 1)):
            b = bytes(0x41 + (i % 26) for i in range(n))
            b = b[:pos] + bytes([c]) + b[pos + 1:]
            m.fields = [Field("v", b), Field("k", b, hint=BYTES)]
            for mb in (0, 9, 256):
                assert_same("message_json", m, mb)


@needs_twin
def test_bytes_of_every_length_are_written_as_in_python() -> None:
    # Base64 of 12 bytes at a time (where the processor can) then six, then three, then the
    # padding: every length up to a few vectors, every byte value, and text around the words
    # of the text test.
    rng = random.Random(7)
    m = Message(Pdu(b"\x00" * 7, [3], 1.5, 1.5, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    for n in range(0, 100):
        for b in (bytes(rng.randrange(256) for _ in range(n)), bytes((i * 37) % 256 for i in range(n)),
                  b"\xff" * n, bytes(0x20 + rng.randrange(95) for _ in range(n))):
            m.fields = [Field("v", b), Field("k", b, hint=BYTES)]
            for mb in (0, 13, 256):
                assert_same("message_json", m, mb)
                assert_same("message_line", m, mb)


@needs_twin
def test_integers_of_every_width_are_written_as_in_python() -> None:
    # The digits are written two at a time: every number of digits, both signs, the ends of C's
    # long long and past them.
    m = Message(Pdu(b"\x00" * 7, [3], 1.5, 1.5, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    values = [0, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**64]
    for k in range(20):
        values += [10**k - 1, 10**k, 10**k + 1, 5 * 10**k]
    values += [-v for v in values]
    m.fields = [Field(f"i{i}", v) for i, v in enumerate(values)]
    assert_same("message_json", m, 256)
    assert b'"i1":9223372036854775807,"i2":-9223372036854775808,' in _twin.message_json(m, 256)


@needs_twin
@pytest.mark.parametrize("mb", [True, False, 8.0, -(2**70), 2**70, 2**63 - 1, -1])
def test_odd_max_bytes_behave_as_in_python(mb: Any) -> None:
    raw = Field("r", b"\x00\x01" * 10, hint=RAW)
    text = Field("t", "é".encode() * 10)
    row = Row("row", COLUMN_SETS[0], (1, 2, b"\xff" * 20, b"v" * 20, Field("headers", None, children=[], hint=ARRAY)),
              None)
    for name, args in (("fields_dict", ([raw, text, row],)), ("field_value", (raw,)), ("field_value", (text,)),
                       ("row_dict", (row,)), ("bytes_value", (b"abcdefghij" * 3,))):
        assert_same(name, *args, mb)


@needs_twin
@pytest.mark.parametrize("values", [(1,), (1, b"x", 3), (), [1, b"x"], [1], "an iterator"])
def test_rows_whose_values_do_not_fit_their_columns_raise_the_same(values: Any) -> None:
    def row() -> Row:
        vals: Any = iter([1, b"x", 2]) if values == "an iterator" else values
        return Row("r", (("a", None), ("b", BYTES)), vals, None)

    assert same(twin_outcome("row_dict", row(), 8), pure_outcome("row_dict", row(), 8))


@needs_twin
@pytest.mark.parametrize("columns", [(("a", None), ("b",)), (("a", None), "bcd"), (("a", None), 7), [("a", None)]])
def test_rows_whose_columns_are_no_pairs_raise_the_same(columns: Any) -> None:
    row = Row("r", columns, (1, 2), None)
    want = pure_outcome("row_dict", row, 8)
    assert want[0] == "raised"
    assert same(twin_outcome("row_dict", row, 8), want)


@needs_twin
@pytest.mark.parametrize("depth", [50, 150, 400])
@pytest.mark.parametrize("hint", [STRUCT, ARRAY])
def test_deep_messages_are_written_as_in_python(depth: int, hint: str) -> None:
    # The writer follows 100 levels; a deeper message takes the dict path. (Past Python's
    # recursion limit that raises RecursionError: test_a_deep_tree_raises_recursion_error_as_in_python.)
    f = Field("leaf", 1)
    for _ in range(depth):
        f = Field("s", None, children=[f], hint=hint)
    m = Message(Pdu(b"\x00" * 7, [3], 1.0, 1.0, True), 2, "10.0.0.1:1", "10.0.0.2:9092", "kafka")
    m.fields = [f]
    want = pure_outcome("message_json", m, 8)
    assert want[0] == "ok"
    assert same(twin_outcome("message_json", m, 8), want)


@needs_twin
def test_a_deep_tree_raises_recursion_error_as_in_python() -> None:
    f = Field("leaf", 1)
    for _ in range(5000):
        f = Field("s", None, children=[f], hint=STRUCT)
    assert twin_outcome("field_value", f, 8)[:2] == ("raised", RecursionError)
    assert pure_outcome("field_value", f, 8)[:2] == ("raised", RecursionError)


# ---------------------------------------------------------------------------------------------
# The encoder


def _old_default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode()
    return str(o)


def _nonfinite_as_null(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _nonfinite_as_null(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_nonfinite_as_null(x) for x in v]
    return v


def contract(d: Any) -> bytes:
    """What export writes for d: the standard library's text, NaN and infinities as null, lone
    surrogates escaped."""
    text = json.dumps(_nonfinite_as_null(d), ensure_ascii=False, default=_old_default, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


@SLOW
@given(forests, st.sampled_from(MAX_BYTES))
def test_generated_dicts_encode_as_the_contract_says(fields: list[Field], mb: int) -> None:
    with accel.pure_functions("kdissect.render.jsonout"):
        d = jsonout.fields_dict(fields, mb)
    assert jsonout.dumps_bytes(d) == contract(d)
    assert jsonout.dumps(d) == contract(d).decode()


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_float_is_written_as_repr(x: float) -> None:
    assert jsonout.dumps(x) == repr(x)
    assert jsonout.dumps({"x": [x]}) == json.dumps({"x": [x]}, separators=(",", ":"))


def test_float_notation_switches_are_written_as_repr() -> None:
    for e in range(-330, 310):
        for m in ("1", "1.5", "9.999999999999998", "2.2250738585072014", "4.9"):
            x = float(f"{m}e{e}")
            if math.isfinite(x):
                assert jsonout.dumps([x, -x]) == json.dumps([x, -x], separators=(",", ":")), x
    assert jsonout._ORJSON_FLOATS_KNOWN  # this orjson writes floats as _odd_floats expects


def test_an_orjson_writing_floats_otherwise_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    # orjson before 3.11.7 wrote positive exponents without "+" (1e16): the check at import sees
    # it, and the encoder then leaves everything to the standard library.
    real = orjson.dumps
    monkeypatch.setattr(orjson, "dumps", lambda v, *a, **k: real(v, *a, **k).replace(b"e+", b"e"))
    assert not jsonout._orjson_floats_known()
    monkeypatch.setattr(jsonout, "_ORJSON_FLOATS_KNOWN", False)
    assert jsonout.dumps([1e16, b"x", 2**70]) == '[1e+16,"eA==",1180591620717411303424]'


class _Str(str, enum.Enum):
    A = "a"


class _Int(enum.IntEnum):
    X = 5


class _Flag(enum.IntFlag):
    A = 1
    B = 2


class _Float(float):
    pass


class _Plain(enum.Enum):
    A = 1


class _Pair(NamedTuple):
    a: int
    b: bytes


@dataclasses.dataclass
class _Point:
    x: int = 1


CASES: list[tuple[str, Any, str]] = [  # (what, value, the text export writes)
    ("exponent", [1e16, 1e22, 1.5e300, 1e-10, 1.23e-18], "[1e+16,1e+22,1.5e+300,1e-10,1.23e-18]"),
    ("small floats orjson writes otherwise", [1e-7, 2.5e-5, 1e-9, 1.2345678e-05, -4e-6],
     "[1e-07,2.5e-05,1e-09,1.2345678e-05,-4e-06]"),
    ("positional", [0.0001, 1e15, 0.1, -0.0, 1.0], "[0.0001,1000000000000000.0,0.1,-0.0,1.0]"),
    ("non-finite", {"a": float("nan"), "b": [float("inf"), float("-inf")]}, '{"a":null,"b":[null,null]}'),
    ("uint64", [2**64 - 1, -2**63], "[18446744073709551615,-9223372036854775808]"),
    ("beyond 64 bits", {"v": 2**64, "w": -2**63 - 1, "x": 1e-7}, '{"v":18446744073709551616,"w":-9223372036854775809,"x":1e-07}'),
    ("non-str keys", {1: "a", None: 2, False: 3, 1.5: 4}, '{"1":"a","null":2,"false":3,"1.5":4}'),
    ("enums", [_Str.A, _Int.X, _Flag.A | _Flag.B, Severity.ERROR], '["a",5,3,"error"]'),
    ("float subclass", [_Float(1.5), _Float(1e-7)], "[1.5,1e-07]"),
    ("tuples", {"t": (1, (2,))}, '{"t":[1,[2]]}'),
    ("named tuples", {"p": _Pair(1, b"x")}, '{"p":[1,"eA=="]}'),
    ("non-ASCII", ["é😀", "\u2028\u2029", "\u00ad"], '["é😀","\u2028\u2029","\u00ad"]'),
    ("control characters", "\x00\x08\t\n\x0b\x0c\r\x1f\x7f\x80\"\\",
     '"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\x7f\x80\\"\\\\"'),
    ("lone surrogates", ["\ud800", "a\udfffb"], '["\\ud800","a\\udfffb"]'),
    ("bytes", [b"\x00\xff", bytearray(b"ab"), memoryview(b"ab")], '["AP8=","YWI=","YWI="]'),
    ("other objects", [datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.date(2024, 1, 2), _Point(), {1, 2}],
     '["2024-01-02 03:04:05","2024-01-02","_Point(x=1)","{1, 2}"]'),
    ("a string that looks like an odd float", ["0.00001", "x e-7,"], '["0.00001","x e-7,"]'),
]


@pytest.mark.parametrize(("what", "value", "text"), CASES, ids=[c[0] for c in CASES])
def test_encoder_cases(what: str, value: Any, text: str) -> None:
    assert jsonout.dumps(value) == text
    assert jsonout.dumps_bytes(value) == text.encode("utf-8", "backslashreplace")
    assert jsonout.dumps_bytes(value) == contract(value)


def test_plain_enum_members_are_their_value() -> None:
    # The one difference left (orjson writes Enum members itself): kdissect puts none in its output.
    assert jsonout.dumps([_Plain.A]) == "[1]"
    assert json.dumps([_Plain.A], default=_old_default) == '["_Plain.A"]'


def test_nesting_beyond_orjsons_limit_is_encoded() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(400):
        inner.append([])
        inner = inner[0]
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(deep)
    assert jsonout.dumps(deep) == "[" * 401 + "]" * 401


def test_what_the_standard_library_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        jsonout.dumps({(1, 2): 3})


# ---------------------------------------------------------------------------------------------
# The float check


@needs_twin
@SLOW
@given(st.one_of(
    st.lists(st.sampled_from([b"0", b".", b"e", b"-", b"6", b"7", b"9", b"5", b",", b"]", b"}", b"x", b"0.0000"]),
             max_size=20).map(b"".join),
    st.binary(max_size=64),
))
def test_the_float_check_is_the_same(out: bytes) -> None:
    assert same(twin_outcome("_odd_floats", out), pure_outcome("_odd_floats", out))
    assert same(twin_outcome("_odd_floats", bytearray(out)), pure_outcome("_odd_floats", bytearray(out)))


def test_the_float_check_flags_orjsons_forms_only() -> None:
    check = PURE["_odd_floats"]
    for x in (1e-5, 2.5e-5, 1e-6, 1e-7, -3e-8, 9.9e-9):
        assert check(orjson.dumps([x])) and check(orjson.dumps({"a": x})) and check(orjson.dumps(x))
    for x in (1e-4, 1e-10, 1e16, 0.5, 1795330253.8123457):
        assert not check(orjson.dumps([x, {"a": x}]))
    assert not check(b'{"k":"value-0-6-x","h":"00ff"}')
