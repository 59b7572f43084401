"""The compiled decode_batch, count_batch and record_elements (kdissect/kafka/_records_v2.pyx)
against the pure ones in records_v2.py: the same batch and record trees (every slot of every Field and Row, the shared column
tuples), ctx counters, budget and diagnostics, and the same exceptions, for the RecordBatches of
the captures, mutations and truncations of them, crafted records (long and non-canonical
varints, values past 63 bits, null and negative lengths, control records) and random bytes.

Skipped when the extension is not built."""

from __future__ import annotations

import array
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.dissect.base import Budget, Inflation, Options
from kdissect.kafka import records, records_v2
from kdissect.kafka.records_common import Ctx
from kdissect.model import Field, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

_twin = pytest.importorskip("kdissect.kafka._records_v2", reason="the compiled module kdissect.kafka._records_v2 is not built")
_model = pytest.importorskip("kdissect._model", reason="the compiled module kdissect._model is not built")  # builds the Field and Row objects
if accel.PURE:  # the twin lays out the compiled Budget, Inflation and Ctx; KDISSECT_PURE=1 loads the pure classes
    pytest.skip("the compiled twin cannot run beside the pure classes of KDISSECT_PURE=1", allow_module_level=True)

PURE: Callable[..., list[Field]] = accel.pure("kdissect.kafka.records_v2", "record_elements")
COMPILED: Callable[..., list[Field]] = _twin.record_elements
assert PURE is not COMPILED
PURE_DECODE: Callable[..., Field] = accel.pure("kdissect.kafka.records_v2", "decode_batch")
PURE_COUNT: Callable[..., Field] = accel.pure("kdissect.kafka.records_v2", "count_batch")
COMPILED_DECODE: Callable[..., Field] = _twin.decode_batch
COMPILED_COUNT: Callable[..., Field] = _twin.count_batch
assert PURE_DECODE is not COMPILED_DECODE and PURE_COUNT is not COMPILED_COUNT
OPTS = Options(max_decompressed=1 << 20)
I64 = 1 << 63
Batch = tuple[bytes, int, int, bool]  # decode_batch's buf, start, end, real
Call = tuple[Any, ...]  # record_elements' arguments but ctx


# -- comparing -------------------------------------------------------------------------------

_EMPTY = object()


def _slot(obj: Field, cls: type, name: str) -> object:
    try:
        return cls.__dict__[name].__get__(obj, type(obj))
    except AttributeError:
        return _EMPTY


def same(a: object, b: object, path: str = "") -> None:
    """a and b are the same tree: types, every slot, values (with their types), recursively."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, Field):
        assert isinstance(b, Field)
        path = f"{path}/{a.name}"
        for name in Field.__slots__:
            if name != "children":
                same(_slot(a, Field, name), _slot(b, Field, name), f"{path}.{name}")
        if isinstance(a, Row):
            assert isinstance(b, Row)
            assert a.columns is b.columns, f"{path}: other columns"  # the shared tuples
            assert not a.materialized and not b.materialized, path
            assert (_slot(a, Field, "children") is _EMPTY) == (_slot(b, Field, "children") is _EMPTY), path
            same(a.spans, b.spans, f"{path}.spans")
            same(a.values, b.values, f"{path}.values")
            # Its child Fields, built from the columns: the Field values are those compared.
            for i, (x, y) in enumerate(zip(a.children, b.children, strict=True)):
                if isinstance(a.values[i], Field):
                    assert x is a.values[i] and y is b.values[i], path
                else:
                    same(x, y, f"{path}.children[{i}]")
        else:
            same(a.children, b.children, f"{path}.children")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, array.array):  # spans
        assert isinstance(b, array.array)
        assert a.typecode == b.typecode and a == b, f"{path}: {a!r} != {b!r}"
    elif isinstance(a, BaseException):
        assert isinstance(b, BaseException)
        assert a.args == b.args, path
        same(getattr(a, "offset", None), getattr(b, "offset", None), f"{path}.offset")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def new_ctx(entries: int | None = None, elements: int | None = None, room: int | None = None) -> Ctx:
    """A ctx whose message may show `entries` more entries and decode `elements` more elements,
    and whose capture (when `room` is given) may show `room` more entries before its cap."""
    ctx = Ctx(OPTS, Budget(OPTS))
    if entries is not None:
        ctx.budget.entries_left = entries
    if elements is not None:
        ctx.budget.elements_left = elements
    if room is not None:
        c = ctx.budget._capture = Inflation()
        ctx.budget._entries_cap = 1000
        c.entries = 1000 - room
    return ctx


def ctx_state(ctx: Ctx) -> tuple[object, ...]:
    b = ctx.budget
    return (ctx.records, ctx.batches, ctx.nbytes, ctx.diags, b.entries_left, b.inflate_left,
            b.inflated, b.elements_left, sorted(b._said), None if b._capture is None else b._capture.entries)


def outcome(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as e:  # the exception is part of the behaviour compared
        return e


def check_elements(call: Call, entries: int | None = None, elements: int | None = None,
                   room: int | None = None) -> list[Field] | object:
    """Runs both record_elements on `call` (fresh ctxs) and asserts the same outcome."""
    results = []
    for fn in (PURE, COMPILED):
        ctx = new_ctx(entries, elements, room)
        out = outcome(partial(fn, *call[:9], ctx, *call[9:]))
        results.append((out, ctx_state(ctx)))
    same(results[0], results[1])
    return results[0][0]


@contextmanager
def elements_fn(fn: Callable[..., list[Field]]) -> Iterator[None]:
    """records_v2 decodes with `fn` as its record_elements."""
    saved = records_v2.record_elements
    records_v2.record_elements = fn
    try:
        yield
    finally:
        records_v2.record_elements = saved


def check_batch(batch: Batch, entries: int | None = None, room: int | None = None) -> object:
    """The pure decode_batch with either record_elements, and the compiled decode_batch: the
    same batch tree, ctx and exception; and the same for both count_batch."""
    buf, start, end, real = batch

    def run(decode: Callable[..., Field], elements: Callable[..., list[Field]]) -> tuple[object, ...]:
        ctx = new_ctx(entries, room=room)
        with elements_fn(elements):
            out = outcome(partial(decode, buf, start, end, ctx, real))
        return out, ctx_state(ctx)

    # A reference for each comparison: comparing builds the child Fields of the Rows.
    reference = run(PURE_DECODE, PURE)
    same(reference, run(PURE_DECODE, COMPILED))
    same(run(PURE_DECODE, PURE), run(COMPILED_DECODE, COMPILED))
    counted = []
    for count in (PURE_COUNT, COMPILED_COUNT):
        ctx = new_ctx(entries, room=room)
        out = outcome(partial(count, buf, start, end, ctx, real))
        counted.append((out, ctx_state(ctx)))
    same(counted[0], counted[1])
    return reference[0]


@pytest.fixture(params=[True, False], ids=["slots", "classes"])
def objects(request: pytest.FixtureRequest) -> Iterator[None]:
    """Field and Row objects built by filling their slots (kdissect/_model.pyx), or by calling
    their classes."""
    was = _model._build_objects(request.param)
    yield
    _model._build_objects(was)


# -- the captures --------------------------------------------------------------------------------


def spied(run: Callable[[], object]) -> tuple[tuple[Batch, ...], tuple[Call, ...]]:
    """The RecordBatches that `run` decodes (decode_batch's arguments) and the record_elements
    calls they make (decompressed buffers included)."""
    batches: list[Batch] = []
    calls: list[Call] = []
    decode = records.DECODERS[2]

    def spy_batch(buf: bytes, start: int, end: int, ctx: Ctx, real: bool) -> Field:
        batches.append((buf, start, end, real))
        return PURE_DECODE(buf, start, end, ctx, real)  # it calls records_v2.record_elements

    def spy_elements(*args: Any) -> list[Field]:
        calls.append(args[:9] + args[10:])
        return PURE(*args)

    records.DECODERS[2] = spy_batch
    try:
        with elements_fn(spy_elements):
            run()
    finally:
        records.DECODERS[2] = decode
    return tuple(batches), tuple(calls)


@cache
def captured(path: Path) -> tuple[tuple[Batch, ...], tuple[Call, ...]]:
    """What a dissection of the capture decodes (see spied)."""
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    return spied(lambda: list(dissect_file(str(path), registry, OPTS)))


@cache
def built() -> tuple[tuple[Batch, ...], tuple[Call, ...]]:
    """Batches of an independent encoder (kafka-python): every codec, headers, null keys and
    values, transactional, a producer's sequence (see spied)."""
    data = b""
    for codec in range(5):
        for transactional in (False, True):
            b = DefaultRecordBatchBuilder(2, codec, transactional, 7 if transactional else -1, 1, 3, 1 << 20)
            for i in range(6):
                headers = [("h", b"x"), ("", None), ("\u00e9t\u00e9", b"")] if i % 2 else []
                b.append(i, 1700000000000 + i * 7, None if i == 1 else b"k%d" % i,
                         None if i == 2 else b"value-%d " % i * (i + codec), headers)
            data += bytes(b.build())
    return spied(lambda: records.decode_records(data, 0, len(data), OPTS))


OWN = sorted(p for p in (CAPTURES / "kafka").iterdir() if ".pcap" in p.name)


def _shared() -> list[Path]:
    d = SHARED_CAPTURES / "kafka"
    return sorted(p for p in d.iterdir() if ".pcap" in p.name) if d.exists() else []


@cache
def corpus() -> tuple[tuple[Batch, ...], tuple[Call, ...]]:
    """The batches of the project's captures, of the shared ones when present, and built ones."""
    batches: list[Batch] = []
    calls: list[Call] = []
    for b, c in [captured(p) for p in OWN + _shared()] + [built()]:
        batches += b
        calls += c
    return tuple(batches), tuple(calls)


def test_the_captures_hold_batches() -> None:
    own = [captured(p) for p in OWN]
    assert sum(len(b) for b, _ in own) >= 5
    assert any(c[5] & records_v2.CONTROL for _, calls in own for c in calls), "no control batch"
    batches, calls = built()
    assert len(batches) == 10 and sum(not c[9] for c in calls) == 8  # decompressed


def test_built_batches(objects: None) -> None:
    batches, calls = built()
    for batch in batches:
        check_batch(batch)
    for call in calls:
        check_elements(call)


@pytest.mark.parametrize("path", OWN, ids=lambda p: p.name)
def test_captured_batches(path: Path, objects: None) -> None:
    batches, calls = captured(path)
    for batch in batches:
        check_batch(batch)
    for call in calls:
        check_elements(call)


@pytest.mark.parametrize("entries", [0, 1, 3])
def test_captured_batches_past_the_limit(entries: int) -> None:
    batches, calls = corpus()
    for batch in batches[:50]:
        check_batch(batch, entries)
    for call in calls[:50]:
        check_elements(call, entries)


@pytest.mark.parametrize("room", [-2, 0, 1, 3, 40])
def test_captured_batches_past_the_capture_limit(room: int) -> None:
    """The capture's cap on entries ends a batch's records as the message's limit does (the
    compiled function spends the entries it may in C)."""
    batches, calls = corpus()
    for batch in batches[:50]:
        check_batch(batch, 100, room)
    for call in calls[:50]:
        check_elements(call, 100, room=room)


def test_shared_captures(objects: None) -> None:
    paths = _shared()
    if not paths:
        pytest.skip("../shared/captures/kafka is absent: the test needs real captures from outside the project")
    for path in paths:
        batches, calls = captured(path)
        for batch in batches:
            check_batch(batch)
        for call in calls:
            check_elements(call)


def _cuts(start: int, end: int) -> range:
    """Every end in the first 160 bytes after start, then every 7th."""
    return range(start, end, 1 if end - start <= 160 else 7)


def test_truncations_of_captured_batches() -> None:
    batches, calls = corpus()
    for buf, start, end, real in batches[:: max(1, len(batches) // 12)]:
        for cut in _cuts(start, min(end, start + 1200)):
            check_batch((buf, start, cut, real))
    small = [c for c in calls if c[2] - c[1] <= 1200]
    for call in small[:: max(1, len(small) // 12)]:
        buf, pos, end = call[:3]
        for cut in _cuts(pos, end):
            check_elements((buf, pos, cut, *call[3:]))
            check_elements((buf[:cut], pos, end, *call[3:]))


_EDITS = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), _EDITS, st.integers(0, 1 << 16), st.booleans(), st.sampled_from([None, 0, 2]))
def test_mutated_batches(data: st.DataObject, edits: list[tuple[int, int]], cut: int, recrc: bool,
                         entries: int | None) -> None:
    batches, _ = corpus()
    buf, start, end, real = data.draw(st.sampled_from(batches))
    b = bytearray(buf[start:end])
    for pos, value in edits:
        b[pos % len(b)] = value
    size = len(b) if data.draw(st.booleans()) else max(0, len(b) - cut % 64)
    b = b[:size]
    if recrc and len(b) >= 21:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    prefix = data.draw(st.binary(max_size=3))
    check_batch((prefix + bytes(b), len(prefix), len(prefix) + len(b), real), entries)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), _EDITS, st.integers(-3, 3), st.integers(0, 300))
def test_mutated_record_sections(data: st.DataObject, edits: list[tuple[int, int]], dcount: int,
                                 cut: int) -> None:
    """The records of captured batches (decompressed ones too), mutated, with the header's
    values changed."""
    _, calls = corpus()
    buf, pos, end, count, declared, attrs, base_offset, base_ts, max_ts, real, where = data.draw(st.sampled_from(calls))
    b = bytearray(buf)
    for p, value in edits:
        b[pos + p % max(1, end - pos) if end > pos else p % len(b)] = value
    attrs ^= data.draw(st.sampled_from([0, 0x08, 0x20, 0x28]))
    base_offset = data.draw(st.sampled_from([base_offset, I64 - 1, -I64, 1 << 70]))
    base_ts = data.draw(st.sampled_from([base_ts, I64 - 1, -I64, -(1 << 70)]))
    check_elements((bytes(b), pos, max(pos, end - cut), max(0, count + dcount), declared, attrs, base_offset,
                    base_ts, max_ts, real, where))


# -- crafted records -------------------------------------------------------------------------


def uvarint(v: int, pad: int = 0) -> bytes:
    """v (>= 0) as a varint, with `pad` extra zero groups (a longer, non-canonical form)."""
    groups = []
    while True:
        groups.append(v & 0x7F)
        v >>= 7
        if not v:
            break
    groups += [0] * pad
    return bytes(g | 0x80 for g in groups[:-1]) + bytes(groups[-1:])


def varint(n: int, pad: int = 0) -> bytes:
    return uvarint(2 * n if n >= 0 else -2 * n - 1, pad)


_PAD = st.sampled_from([0, 0, 0, 0, 1, 3, 9])
_INT = st.one_of(st.integers(-300, 300), st.integers(-I64, I64 - 1), st.integers(-(1 << 69), (1 << 69) - 1),
                 st.sampled_from([I64 - 1, -I64, 1 << 62, -(1 << 62), (1 << 62) - 1]))


@st.composite
def a_varint(draw: st.DrawFn, value: st.SearchStrategy[int] = _INT) -> bytes:
    return varint(draw(value), draw(_PAD))


_FLAWS = st.sampled_from([None] * 8 + ["key", "value", "header", "count", "trailing", "cut", "length"])


@st.composite
def a_blob(draw: st.DrawFn, flawed: bool = False, null: bool = True, control: bool = False) -> bytes:
    """A varint length and its bytes: null, or (flawed) a negative length, or one past the end."""
    pad = draw(_PAD)
    if null and draw(st.integers(0, 5)) == 0:
        return varint(-1, pad)
    if flawed and draw(st.booleans()):
        return varint(draw(st.integers(-(1 << 65), -1 if null else -2)), pad)
    if control and draw(st.booleans()):
        data = struct.pack(">hh", draw(st.integers(-2, 2)), draw(st.integers(-1, 7))) + draw(st.binary(max_size=4))
    else:
        data = draw(st.binary(max_size=12))
    return varint(len(data) + (draw(st.sampled_from([1, 5, 1 << 64])) if flawed else 0), pad) + data


@st.composite
def a_record(draw: st.DrawFn) -> bytes:
    """A record, valid or with one flaw (a bad length, count or blob; bytes missing or left)."""
    flaw = draw(_FLAWS)
    body = bytes([draw(st.integers(0, 255))]) + draw(a_varint()) + draw(a_varint())
    body += draw(a_blob(flaw == "key", control=True)) + draw(a_blob(flaw == "value", control=True))
    headers = draw(st.lists(st.tuples(a_blob(null=False), a_blob()), max_size=3))
    if flaw == "header" and headers:
        i = draw(st.integers(0, len(headers) - 1))
        headers[i] = (draw(a_blob(True)), headers[i][1])
    count = len(headers)
    if flaw == "count":
        count += draw(st.sampled_from([1, -1, -len(headers) - 1, 1 << 62, 1 << 66]))
    body += varint(count, draw(_PAD)) + b"".join(k + v for k, v in headers)
    if flaw == "trailing":
        body += draw(st.sampled_from([b"\x00", b"\x01\x02"]))
    if flaw == "cut":
        body = body[: max(0, len(body) - draw(st.integers(1, 3)))]
    length = len(body)
    if flaw == "length":
        length += draw(st.sampled_from([1, -1, -len(body) - 1, 1 << 63, 1 << 68]))
    return varint(length, draw(_PAD)) + body


_BASE = st.one_of(st.integers(-(1 << 40), 1 << 40), st.sampled_from([I64 - 1, -I64, I64, -I64 - 1, 1 << 70, -(1 << 70)]))


@settings(max_examples=300, deadline=None)
@given(st.lists(a_record(), max_size=5), st.binary(max_size=3), st.binary(max_size=3), st.integers(-2, 2),
       st.sampled_from([0, 0x08, 0x20, 0x28, 0x10, 0x7FFF, -1]), _BASE, _BASE, _BASE, st.booleans(),
       st.integers(-1, 100), st.sampled_from([None, None, 0, 1, 2]), st.sampled_from([True, False]),
       st.sampled_from([None, None, 0, 1, 2, 3]))
def test_crafted_records(recs: list[bytes], prefix: bytes, trailing: bytes, dcount: int, attrs: int,
                         base_offset: int, base_ts: int, max_ts: int, real: bool, where: int,
                         entries: int | None, fast: bool, elements: int | None) -> None:
    # `elements`: what is left of the message's elements budget, which record headers spend
    buf = prefix + b"".join(recs) + trailing
    was = _model._build_objects(fast)
    try:
        check_elements((buf, len(prefix), len(buf), max(0, len(recs) + dcount), len(recs), attrs,
                        base_offset, base_ts, max_ts, real, where), entries, elements)
    finally:
        _model._build_objects(was)


def test_objects_are_built_in_c() -> None:
    """The check at import of kdissect/_model.pyx, which builds the twin's Field and Row
    objects, found them laid out as it expects: it fills their slots (else it calls their
    classes, slower)."""
    was = _model._build_objects(True)
    try:
        assert _model.mode() == "slots", "Field or Row changed: update kdissect/_model.pyx (_layout_ok)"
    finally:
        _model._build_objects(was)


def test_crafted_records_decode() -> None:
    """The crafted form decodes, long varints and big values included, to the same records."""
    rec = (bytes([0]) + varint(1 << 66) + varint(-5, 2) + varint(3) + b"key" + varint(-1)
           + varint(1, 9) + varint(2) + b"h1" + varint(1) + b"v")
    buf = varint(len(rec)) + rec
    rec2 = bytes([0]) + varint(7) + varint(1) + varint(4) + b"\x00\x00\x00\x01" + varint(6) + b"\x00\x00\x00\x00\x00\x09" + varint(0)
    buf += varint(len(rec2)) + rec2
    for attrs in (0, 0x20, 0x28):
        for base in (I64 - 1, 5, 1 << 70):
            out = check_elements((buf, 0, len(buf), 2, 2, attrs, base, base, 77, True, 0))
            assert isinstance(out, list) and len(out) == 2
            assert out[0].values[2] == 1 << 66 and out[0].values[4] == base - 5


# -- batches ---------------------------------------------------------------------------------


def test_the_tables_hold_the_compiled_functions() -> None:
    """records.py takes decode_batch and count_batch from records_v2 after it bound them."""
    if accel.compiled("kdissect.kafka.records_v2", "decode_batch") is None:
        pytest.skip("KDISSECT_PURE is set: the pure functions run")
    assert records_v2.decode_batch is COMPILED_DECODE and records_v2.count_batch is COMPILED_COUNT
    assert records.DECODERS[2] is COMPILED_DECODE and records.COUNTERS[2] is COMPILED_COUNT


def _header(base_offset: int = 5, attrs: int = 0, count: int = 1, base_ts: int = 1700000000000,
            max_ts: int = 1700000000007, records: bytes = b"", magic: int = 2, crc: int | None = None,
            length: int | None = None) -> bytes:
    """A RecordBatch of these header values and record bytes; the CRC computed unless given."""
    rest = struct.pack(">hiqqqhii", attrs, max(count - 1, 0), base_ts, max_ts, 42, 1, 0, count) + records
    crc = crc32c.crc32c(rest) if crc is None else crc
    body = struct.pack(">ibI", 0, magic, crc) + rest
    return struct.pack(">qi", base_offset, len(body) if length is None else length) + body


_HEADER_VALUES = st.fixed_dictionaries({
    "base_offset": st.sampled_from([0, 5, I64 - 1, -I64, -1]),
    "attrs": st.one_of(st.integers(-(1 << 15), (1 << 15) - 1), st.sampled_from([0, 0x08, 0x10, 0x20, 0x40, 0x78, 0x48])),
    "count": st.sampled_from([0, 1, 2, 3, -1, -(1 << 31), (1 << 31) - 1, 100]),
    "base_ts": st.sampled_from([0, -1, 1700000000000, I64 - 1, -I64, 253402300799999, 253402300800000]),
    "max_ts": st.sampled_from([0, -1, 1700000000000, I64 - 1, -I64]),
    "magic": st.sampled_from([2, 0, -1, 127]),
    "crc": st.sampled_from([None, None, 0, 0xFFFFFFFF, 0x80000000]),
    "length": st.sampled_from([None, None, 0, -1, 1 << 30]),
})


@settings(max_examples=300, deadline=None)
@given(_HEADER_VALUES, st.lists(a_record(), max_size=3), st.binary(max_size=3), st.integers(0, 80),
       st.booleans(), st.sampled_from([None, 0, 1]))
def test_crafted_batches(values: dict[str, Any], recs: list[bytes], prefix: bytes, cut: int, real: bool,
                         entries: int | None) -> None:
    """Batches of every header value (flags, codecs, timestamps past the dates, counts that do
    not fit, a wrong CRC), crafted records, cut anywhere."""
    b = _header(**values, records=b"".join(recs))
    buf = prefix + b
    check_batch((buf, len(prefix), len(buf), real), entries)
    check_batch((buf, len(prefix), max(len(prefix), len(buf) - cut), real), entries)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=120), st.integers(0, 10), st.integers(0, 130), st.booleans())
def test_random_batches(buf: bytes, start: int, size: int, real: bool) -> None:
    check_batch((buf, start, start + size, real))


@pytest.mark.parametrize("args", [
    (-1, 61), (0, 1 << 70), (1 << 70, 2), (3, 1), (0, -5), (61, 0), (0, 62), (0, 61), (0, 60),
])
def test_odd_batch_arguments(args: tuple[int, int]) -> None:
    """Positions outside the buffer, past any C integer, reversed; other buffers and `real`s."""
    start, end = args
    data = _header(records=b"\x00" * 3)[:61]
    for buf in (data, bytearray(data), memoryview(data), "text" * 20, None):
        for real in (True, False, 1):
            check_batch((buf, start, end, real))  # type: ignore[arg-type]


# -- random bytes and other arguments ------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 20), st.integers(-5, 260), st.integers(-2, 40),
       st.integers(0, 0xFFFF), _BASE, st.booleans(), st.sampled_from([None, 0, 3]))
def test_random_bytes(buf: bytes, pos: int, end: int, count: int, attrs: int, base: int, real: bool,
                      entries: int | None) -> None:
    check_elements((buf, pos, end, count, count, attrs, base, base, base, real, -1 if real else 7), entries)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=100), st.sampled_from([bytearray, memoryview]), st.integers(0, 10), st.integers(1, 5))
def test_other_buffers(buf: bytes, kind: type, pos: int, count: int) -> None:
    check_elements((kind(buf), pos, len(buf), count, count, 0, 0, 0, 0, True, 0))


@pytest.mark.parametrize("args", [
    (b"\x02\x00\x00\x00\x00", -1, 5, 1),  # a negative start: Python's indexing
    (b"\x02\x00", 0, 1 << 70, 1),  # past any C integer
    (b"\x02\x00", 1 << 70, 2, 1),
    (b"\x02\x00", 0, 2, 1 << 70),
    (b"\x02\x00", I64 - 1, -I64 + 1, 0),  # the trailing bytes: a difference past int64
    (b"\x02\x00", I64 - 1, 2, 1),
    (b"\x0c\x00\x00\x00\x00\x00\x00", 0, 7, -3),
    (b"\x0c\x00\x00\x00\x00\x00\x00", 0, -9, 0),
    (b"\x0c\x00\x00\x00\x00\x00\x00", 9, 7, 0),
    (b"\x0c\x00\x00\x00\x00\x00\x00", 0, 7, True),
    ("text", 0, 4, 1),
    (None, 0, 4, 1),
])
def test_odd_arguments(args: tuple[Any, int, int, int]) -> None:
    buf, pos, end, count = args
    for real in (True, False, 1):
        check_elements((buf, pos, end, count, 7, 0, 0, 0, 0, real, 3))
    check_elements((buf, pos, end, count, 7, 1.5, 0, 0, 0, True, 3))
    check_elements((buf, pos, end, count, 7, 0, None, 0, 0, True, 3))
