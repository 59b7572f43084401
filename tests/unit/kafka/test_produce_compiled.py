"""The compiled Produce shortcut (kdissect/kafka/_produce.pyx) against body.decode_produce, the
plan that decodes every Produce body: the same Body (every slot of every Field, the summary, the
facts in their order, the diagnostics), the same reader position and the same calls to the
message's budget. Bodies: those of the captures, a default-valued encoding of every version,
generated requests and responses (names, transactional ids, acks, partitions, record batches,
errors, record errors, messages, tagged fields, bytes after the body), each cut short and
mutated; a bytearray buffer; readers over a window of a larger buffer.

Skipped when the extension is not built."""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_schema_encoder import encode, uvarint
from test_ops_compiled import LogBudget, _captures, decode_captures_with, dump

from kdissect import accel
from kdissect.dissect.base import Options
from kdissect.kafka import body, plan
from kdissect.kafka.headers import is_flexible
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.wire.reader import WireReader

if accel.PURE:  # the twin lays out body.py's and base.py's extension types, which KDISSECT_PURE=1 replaces
    pytest.skip("KDISSECT_PURE=1: the twin is not used", allow_module_level=True)
_twin = pytest.importorskip("kdissect.kafka._produce", reason="the compiled module kdissect.kafka._produce is not built")

PURE = accel.pure("kdissect.kafka.body", "decode_produce")
COMPILED = _twin.decode_produce
VERSIONS = range(3, 14)


def outcome(fn: Callable[..., Any], version: int, is_request: bool, data: Any,
            window: tuple[int, int] | None = None, opts: Options | None = None,
            elements: int | None = None) -> tuple[Any, ...]:
    opts = opts or Options(max_decompressed=1 << 20)
    budget = LogBudget(opts, elements)
    r = WireReader(data) if window is None else WireReader(data, *window)
    out = fn(version, is_request, r, opts, None, budget)
    return ([dump(f) for f in out.fields], out.summary, list(out.info.items()),
            [(repr(d), d.offset) for d in out.diagnostics], r.pos, r.end, budget.log, budget.elements_left,
            budget.inflate_left, budget.inflated)


def same(version: int, is_request: bool, data: Any, window: tuple[int, int] | None = None,
         opts: Options | None = None, elements: int | None = None) -> tuple[Any, ...]:
    with accel.pure_functions("kdissect.kafka.body"):
        pure = outcome(PURE, version, is_request, data, window, opts, elements)
    compiled = outcome(COMPILED, version, is_request, data, window, opts, elements)
    assert compiled == pure, (version, is_request, bytes(data)[:200])
    return pure


# -- bodies ----------------------------------------------------------------------------------

def batch(values: list[bytes], base_offset: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 24)
    for i, v in enumerate(values):
        b.append(i, 1700000000000 + i, None, v, [])
    out = bytearray(b.build())
    struct.pack_into(">q", out, 0, base_offset)
    return bytes(out)


def length(n: int, flexible: bool, wide: bool) -> bytes:
    if flexible:
        return uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def text(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return length(-1, flexible, False)
    raw = s.encode()
    return length(len(raw), flexible, False) + raw


def tags(flexible: bool, extra: bytes) -> bytes:
    return (extra or b"\x00") if flexible else b""


def request(version: int, txn: str | None, acks: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]],
            extra_tags: bytes = b"") -> bytes:
    flex = version >= 9
    out = text(txn, flex) + struct.pack(">hi", acks, 30000) + length(len(topics), flex, True)
    for name, parts in topics:
        out += text(name, flex) + length(len(parts), flex, True)
        for index, records in parts:
            out += struct.pack(">i", index)
            out += length(-1, flex, True) if records is None else length(len(records), flex, True) + records
            out += tags(flex, b"")
        out += tags(flex, b"")
    return out + tags(flex, extra_tags)


Part = tuple[int, int, int, list[str | None], str | None]  # index, error code, base offset, record errors, message


def response(version: int, topics: list[tuple[str, list[Part]]], extra_tags: bytes = b"") -> bytes:
    flex = version >= 9
    out = length(len(topics), flex, True)
    for name, parts in topics:
        out += text(name, flex) + length(len(parts), flex, True)
        for index, code, base, errors, message in parts:
            out += struct.pack(">ihqq", index, code, base, 1700000000000)
            if version >= 5:
                out += struct.pack(">q", 0)
            if version >= 8:
                out += length(len(errors), flex, True)
                for i, e in enumerate(errors):
                    out += struct.pack(">i", i) + text(e, flex) + tags(flex, b"")
                out += text(message, flex)
            out += tags(flex, b"")
        out += tags(flex, b"")
    return out + struct.pack(">i", 0) + tags(flex, extra_tags)


@cache
def encoded() -> list[tuple[int, bool, bytes]]:
    """A default-valued body of every Produce version (one element per array, every tagged field)."""
    out = []
    for version in VERSIONS:
        for req in (True, False):
            fields = plan.message_fields(plan.message_name(0, req))
            assert fields is not None
            out.append((version, req, encode(fields, version, is_flexible(0, version))))
    return out


@cache
def captured() -> list[tuple[int, bool, bytes]]:
    """The Produce bodies of the captures, as the dissector hands them to decode_produce."""
    seen: set[tuple[int, bool, bytes]] = set()
    real = body.decode_produce

    def recording(version: int, is_request: bool, r: WireReader, *rest: Any) -> body.Body:
        seen.add((version, is_request, bytes(r.buf[r.pos:r.end])))
        return real(version, is_request, r, *rest)

    decode_captures_with(body, "decode_produce", recording)
    return sorted(seen)


def made() -> list[tuple[int, bool, bytes]]:
    one = batch([b"v"])
    two = batch([b"a", b"bb"], base_offset=7) + batch([b"c"], base_offset=9)
    long_name = "t" * 300
    out = []
    for v in VERSIONS:
        out += [
            (v, True, request(v, None, -1, [("bench-topic-0", [(0, one)])])),
            (v, True, request(v, "txn-é", 1, [("", [(3, two), (4, None), (5, b""), (-1, b"\x00" * 20)])])),
            (v, True, request(v, None, 0, [(long_name, [])])),
            (v, True, request(v, None, 7, [("a", [(0, one)]), ("b", [(1, one)])])),
            (v, True, request(v, None, -1, [("a", [(0, one)])], extra_tags=b"\x01\x00\x01\x05")),
            (v, True, request(v, None, -1, [("a", [(0, one)])]) + b"\x00"),
            (v, True, request(v, None, -1, [])),
            (v, False, response(v, [("bench-topic-0", [(0, 0, 0, [], None)])])),
            (v, False, response(v, [("a", [(0, 0, 5, [], None), (1, 6, -1, [], "not leader"), (2, 0, 1, [], "x")]),
                                    ("a", [(2, 0, 9, [], "")])])),
            (v, False, response(v, [(f"t{i}", [(i, 0, i, [], None)]) for i in range(7)])),
            (v, False, response(v, [(long_name, [(0, 87, 1, ["bad", None], "invalid record")])])),
            (v, False, response(v, [])),
            (v, False, response(v, [("a", [(0, 0, 0, [], None)])], extra_tags=b"\x01\x00\x01\x05")),
            (v, False, response(v, [("a", [(0, 0, 0, [], None)])]) + b"\x00\x00"),
        ]
    return out


def corpus() -> list[tuple[int, bool, bytes]]:
    return captured() + encoded() + made()


# -- tests -----------------------------------------------------------------------------------

def test_the_twin_is_what_body_binds() -> None:
    assert body.decode_produce is COMPILED


def test_the_usual_bodies_take_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request of one topic and a response without record errors are read without their plan."""
    expected = {(v, req): same(v, req, data) for v, req, data in made()[:1] + made()[7:8]}

    def no_plan(*args: Any) -> Any:
        raise AssertionError("the plan was run")

    monkeypatch.setattr(body, "plan_for", no_plan)
    for (v, req), want in expected.items():
        assert outcome(COMPILED, v, req, made()[0 if req else 7][2]) == want


def test_captured_bodies_decode_the_same() -> None:
    bodies = captured()
    if not bodies:
        pytest.skip("no Kafka captures found")
    for version, req, data in bodies:
        same(version, req, data)
        same(version, req, data, opts=Options(decode_records=False))
        same(version, req, data, opts=Options(record_detail=False))


def test_every_version_and_made_bodies_decode_the_same() -> None:
    for version, req, data in encoded() + made():
        for opts in (None, Options(decode_records=False), Options(record_detail=False)):
            same(version, req, data, opts=opts)
        for elements in (0, 1, 2):
            same(version, req, data, elements=elements)


def test_every_truncation() -> None:
    for version, req, data in encoded() + made()[:14]:
        for cut in range(len(data)):
            same(version, req, data[:cut])


def test_versions_the_shortcut_does_not_read() -> None:
    for _, req, data in made()[:14]:
        for other in (0, 2, 13):
            same(other, req, data)


def test_buffers_other_than_bytes_and_windows() -> None:
    for version, req, data in corpus()[::3]:
        same(version, req, bytearray(data))
        same(version, req, b"\xff\x00" + data + b"\x81", window=(2, 2 + len(data)))
        same(version, req, b"\x80" * 7 + data, window=(7, 7 + len(data) + 10))


def test_fields_built_by_calling_the_class() -> None:
    _model = pytest.importorskip("kdissect._model")
    was = _model._build_objects(False)
    try:
        for version, req, data in made():
            same(version, req, data)
    finally:
        _model._build_objects(was)


SLOW = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn) -> tuple[int, bool, bytes]:
    version, req, data = draw(st.sampled_from(corpus()))
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        how = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(buf)))
        if how == "set" and at < len(buf):
            buf[at] = draw(st.integers(0, 255))
        elif how == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif how == "delete":
            del buf[at:at + draw(st.integers(1, 4))]
        else:
            del buf[at:]
    return version, req, bytes(buf)


@SLOW
@given(mutated())
def test_mutated_bodies(case: tuple[int, bool, bytes]) -> None:
    same(*case)


names = st.text(max_size=12) | st.sampled_from(["", "t" * 249, "t" * 250, "é" * 200])
records = st.none() | st.just(b"") | st.binary(max_size=30) | st.lists(st.binary(max_size=8), min_size=1,
                                                                        max_size=3).map(batch)
parts = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), records), max_size=3)


@SLOW
@given(st.sampled_from(list(VERSIONS)), st.none() | names, st.integers(-(1 << 15), (1 << 15) - 1),
       st.lists(st.tuples(names, parts), min_size=1, max_size=2), st.sampled_from([b"", b"\x01\x00\x00"]),
       st.sampled_from([b"", b"\x00", b"\x07\x07"]))
def test_generated_requests(version: int, txn: str | None, acks: int,
                            topics: list[tuple[str, list[tuple[int, bytes | None]]]], extra: bytes, after: bytes) -> None:
    same(version, True, request(version, txn, acks, topics, extra) + after)


partitions = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 15), (1 << 15) - 1),
                                st.integers(-(1 << 63), (1 << 63) - 1),
                                st.just([]) | st.lists(st.none() | names, min_size=1, max_size=2),
                                st.none() | names), max_size=3)


@SLOW
@given(st.sampled_from(list(VERSIONS)), st.lists(st.tuples(names, partitions), max_size=7),
       st.sampled_from([b"", b"\x01\x00\x00"]), st.sampled_from([b"", b"\x00"]))
def test_generated_responses(version: int, topics: list[tuple[str, list[Part]]], extra: bytes, after: bytes) -> None:
    same(version, False, response(version, topics, extra) + after)


def test_read_of_a_capture_is_the_same() -> None:
    """Every Kafka capture's messages through the dissector, shortcut or not: the same trees,
    summaries, facts and diagnostics."""
    def messages() -> list[Any]:
        out = []
        for path, decode_as in _captures():
            for opts in (Options(), Options(record_detail=False)):
                for m in dissect_file(str(path), DissectorRegistry(decode_as=decode_as), opts):
                    out.append((m.frame, m.summary, list(m.info.items()), [repr(d) for d in m.diagnostics],
                                [dump(f) for f in m.fields], m.inflated))
        return out

    compiled = messages()
    real = body.decode_produce
    body.decode_produce = PURE
    try:
        with accel.pure_functions("kdissect.kafka.body"):
            pure = messages()
    finally:
        body.decode_produce = real
    assert compiled == pure
    assert sum(("op", "Produce") in m[2] for m in compiled) >= 10
