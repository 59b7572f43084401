"""The compiled field decoders (kdissect/kafka/_ops.pyx) against the pure ones in ops.py: plans
built from each set of builders decode the same bodies into the same trees (every slot of every
Field), the same ctx effects (errors, topics, groups, diagnostics, record stats, the budget's
calls in order), the same reader position and the same exceptions (type, message, offset,
partial tree). Bodies: the Kafka messages of the captures and a default-valued encoding of every
API version, truncated and mutated; random bytes; bytes, bytearray and memoryview buffers, and
readers over a window of a larger buffer.

Skipped when the extension is not built."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_schema_encoder import encode
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.dissect.base import Budget, Options
from kdissect.kafka import body, ops, plan
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import is_flexible
from kdissect.model import Field
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.wire.reader import WireReader

_twin = pytest.importorskip("kdissect.kafka._ops", reason="the compiled module kdissect.kafka._ops is not built")
_model = pytest.importorskip("kdissect._model", reason="the compiled module kdissect._model is not built")  # builds the Field objects

NAMES = ("fixed", "_error_code", "_timestamp", "boolean", "uuid_field", "uvarint_field", "string",
         "raw_bytes", "array", "struct_dec", "records", "nullable_struct")
PURE = {n: accel.pure("kdissect.kafka.ops", n) for n in NAMES}
COMPILED = {n: getattr(_twin, n) for n in NAMES}
assert all(PURE[n] is not COMPILED[n] for n in NAMES)
_twin.boolean("x", "bool", "")  # the twin finds ops.py's pure builders now, before any patching

_RAW_COMPILE = plan.compile_message.__wrapped__
_COMPILE = {"pure": cache(_RAW_COMPILE), "compiled": cache(_RAW_COMPILE)}


@contextmanager
def builders(kind: str) -> Iterator[None]:
    """ops.py's builders (and plan.py's table of them, and its plan cache) set to one kind."""
    fns = PURE if kind == "pure" else COMPILED
    saved_ops = {n: getattr(ops, n) for n in NAMES}
    saved_scalars = dict(plan._SCALARS)
    saved_compile, saved_plans = plan.compile_message, plan._PLANS
    try:
        for n in NAMES:
            setattr(ops, n, fns[n])
        for typ, make in saved_scalars.items():
            plan._SCALARS[typ] = fns[make.__name__]
        plan.compile_message, plan._PLANS = _COMPILE[kind], {}
        yield
    finally:
        for n, f in saved_ops.items():
            setattr(ops, n, f)
        plan._SCALARS.update(saved_scalars)
        plan.compile_message, plan._PLANS = saved_compile, saved_plans


class LogBudget(Budget):
    """A Budget that records the calls made to it, in order."""

    def __init__(self, opts: Options, elements: int | None = None) -> None:
        super().__init__(opts)
        if elements is not None:
            self.elements_limit = self.elements_left = elements
        self.log: list[tuple[str, Any, Any]] = []

    def elements(self, n: int) -> int:
        keep = super().elements(n)
        self.log.append(("elements", n, keep))
        return keep

    def first(self, key: str) -> bool:
        said = super().first(key)
        self.log.append(("first", key, said))
        return said

    def spend(self, produced: int, kept: bool) -> None:
        super().spend(produced, kept)
        self.log.append(("spend", produced, kept))


# -- comparing -------------------------------------------------------------------------------

def dump(f: Any) -> Any:
    """Every slot of a Field tree, with the type of each value (True is not 1)."""
    if not isinstance(f, Field):
        return ("not a Field", type(f).__name__, repr(f))
    return (f.name, type(f.value).__name__, f.value, f.offset, f.length, f.hint, f.display, f.label,
            None if f.children is None else [dump(c) for c in f.children])


Shape = tuple[int, int, bool]  # api key, version, request


def outcome(kind: str, shape: Shape, data: Any, window: tuple[int, int] | None = None,
            opts: Options | None = None, elements: int | None = None) -> tuple[Any, ...]:
    """Everything a plan's decode shows: tree or exception, reader, ctx and budget."""
    opts = opts or Options(max_decompressed=1 << 20)
    with builders(kind):
        dec = plan.plan_for(*shape)
        budget = LogBudget(opts, elements)
        ctx = ops.Ctx(opts, None, shape[1], budget)
        r = WireReader(data) if window is None else WireReader(data, *window)
        try:
            result: Any = ("ok", dump(dec(r, ctx)))
        except Exception as e:  # noqa: BLE001 - any exception must be the same
            result = ("raised", type(e), str(e), getattr(e, "offset", None), dump(getattr(e, "partial", None)),
                      e.__cause__, e.__suppress_context__)
    return (result, r.pos, r.end, ctx.errors, ctx.topics, ctx.groups, [repr(d) for d in ctx.diags],
            list(ctx.records.values()), budget.log, budget.elements_left, budget.inflate_left)


def same(shape: Shape, data: Any, window: tuple[int, int] | None = None, opts: Options | None = None,
         elements: int | None = None) -> tuple[Any, ...]:
    pure = outcome("pure", shape, data, window, opts, elements)
    compiled = outcome("compiled", shape, data, window, opts, elements)
    assert compiled == pure, (shape, bytes(data)[:200])
    return pure


# -- bodies ----------------------------------------------------------------------------------

SHAPES: list[Shape] = [(k, v, req) for k, api in sorted(APIS.items()) for v in range(api.newest + 1)
                       for req in (True, False)]


@cache
def encoded() -> list[tuple[Shape, bytes]]:
    """A default-valued body of every API version (one element per array, every tagged field)."""
    out = []
    for key, version, req in SHAPES:
        fields = plan.message_fields(plan.message_name(key, req))
        if fields is not None:
            out.append(((key, version, req), encode(fields, version, is_flexible(key, version))))
    return out


def _captures() -> list[tuple[Path, dict[int, str]]]:
    paths = sorted((CAPTURES / "kafka").glob("*.pcap*"))
    if (SHARED_CAPTURES / "kafka").exists():
        paths += sorted((SHARED_CAPTURES / "kafka").glob("*.pcap*"))
    return [(p, sidecar_decode_as(p, "kafka")) for p in paths]


@cache
def captured() -> list[tuple[Shape, bytes]]:
    """The Kafka message bodies of the captures, as the dissector hands them to plans."""
    seen: set[tuple[Shape, bytes]] = set()
    real = body.plan_for

    def recording(api_key: int, version: int, is_request: bool) -> Callable[..., Field]:
        dec = real(api_key, version, is_request)

        def run(r: WireReader, ctx: ops.Ctx) -> Field:
            seen.add(((api_key, version, is_request), bytes(r.buf[r.pos:r.end])))
            return dec(r, ctx)
        return run

    decode_captures_with(body, "plan_for", recording)
    return sorted(seen, key=lambda s: (s[0], len(s[1]), s[1]))


def decode_captures_with(owner: Any, name: str, stand_in: Any) -> None:
    """Every Kafka capture decoded with owner's `name` replaced by stand_in (put back after)."""
    real = getattr(owner, name)
    setattr(owner, name, stand_in)
    try:
        for path, decode_as in _captures():
            for _ in dissect_file(str(path), DissectorRegistry(decode_as=decode_as)):
                pass
    finally:
        setattr(owner, name, real)


def corpus() -> list[tuple[Shape, bytes]]:
    return captured() + encoded()


# -- tests -----------------------------------------------------------------------------------

def test_the_twin_is_what_ops_binds_unless_pure() -> None:
    if accel.PURE:
        assert ops.fixed is PURE["fixed"]
    else:
        assert all(getattr(ops, n) is COMPILED[n] for n in NAMES)
        assert all(plan._SCALARS[t] in COMPILED.values() for t in plan._SCALARS)


def test_captured_bodies_decode_the_same() -> None:
    bodies = captured()
    if not bodies:
        pytest.skip("no Kafka captures found")
    assert len({s for s, _ in bodies}) >= 10
    ok = 0
    for shape, data in bodies:
        ok += same(shape, data)[0][0] == "ok"
        for opts in (Options(decode_records=False), Options(show_secrets=True, max_decompressed=1 << 20)):
            same(shape, data, opts=opts)
    assert ok >= len(bodies) // 2


def test_every_api_version_decodes_the_same() -> None:
    for shape, data in encoded():
        assert same(shape, data)[0][0] == "ok", shape
        same(shape, data, elements=0)  # the first array (or tagged section) is capped
        same(shape, data, elements=1)


def test_fields_are_built_in_c() -> None:
    """The check at import of kdissect/_model.pyx found Field laid out as it expects: the twin's
    Fields are allocated and their slots filled (else Field is called, slower)."""
    was = _model._build_objects(True)
    try:
        assert _model.mode() == "slots", "Field changed: update kdissect/_model.pyx (_layout_ok)"
    finally:
        _model._build_objects(was)


def test_fields_built_by_calling_the_class() -> None:
    """With Field called instead of filled in place, the same trees."""
    was = _model._build_objects(False)
    try:
        assert _model.mode() == "classes"
        for shape, data in encoded():
            same(shape, data)
            same(shape, data[: len(data) // 2])
    finally:
        _model._build_objects(was)


def test_every_truncation_of_every_api_version() -> None:
    for shape, data in encoded():
        for cut in range(len(data)):
            same(shape, data[:cut])


def test_buffers_other_than_bytes_and_windows() -> None:
    for shape, data in corpus()[::3]:
        same(shape, bytearray(data))
        same(shape, memoryview(data))
        same(shape, b"\xff\x00" + data + b"\x81", window=(2, 2 + len(data)))
        same(shape, b"\x80" * 7 + data, window=(7, 7 + len(data) + 10))  # end clamped by the reader


SLOW = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Shape, bytes]:
    shape, data = draw(st.sampled_from(corpus()))
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        how = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(buf)))
        if how == "set" and at < len(buf):
            buf[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, draw(st.integers(0, 255))]))
        elif how == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif how == "delete":
            del buf[at:at + draw(st.integers(1, 4))]
        else:
            del buf[at:]
    return shape, bytes(buf)


@SLOW
@given(mutated(), st.sampled_from([None, 0, 1, 3, 50]), st.sampled_from(["bytes", "bytearray", "window"]))
def test_mutated_bodies(case: tuple[Shape, bytes], elements: int | None, buffer: str) -> None:
    shape, data = case
    if buffer == "bytearray":
        same(shape, bytearray(data), elements=elements)
    elif buffer == "window":
        same(shape, b"\x00\x80" + data + b"\x00", window=(2, 2 + len(data)), elements=elements)
    else:
        same(shape, data, elements=elements)


@SLOW
@given(st.sampled_from(SHAPES), st.binary(max_size=300), st.sampled_from([None, 2]))
def test_random_bytes(shape: Shape, data: bytes, elements: int | None) -> None:
    same(shape, data, elements=elements)


@SLOW
@given(st.sampled_from(SHAPES), st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80", b"\xff",
                                                          b"\xff\xff", b"\x00\x00\x00\x01", b"\xff\xff\xff\xff",
                                                          b"\x80\x80\x80\x80\x10", b"\xff" * 10, b"\x80" * 9 + b"\x01",
                                                          b"\x05abcd", b"\x00\x03abc", b"\xc3\x28"]), max_size=40))
def test_crafted_tokens(shape: Shape, parts: list[bytes]) -> None:
    same(shape, b"".join(parts))
