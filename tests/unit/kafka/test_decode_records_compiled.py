"""The compiled decode_records (kdissect/kafka/_records.pyx) against the pure one in records.py:
the same field tree (every slot of every Field and Row), diagnostics, counts and budget, for the
records fields of the Kafka captures with each option that changes decoding, cut short,
widened and mutated, for random bytes, and for bounds and buffers outside the compiled path (out
of range, past C's integers, not ints, not bytes) and names that are not plain strings.

Skipped when the extension is not built."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.dissect.base import Budget, Options
from kdissect.model import Field, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

_twin = pytest.importorskip("kdissect.kafka._records", reason="the compiled module kdissect.kafka._records is not built")

PURE: Callable[..., Any] = accel.pure("kdissect.kafka.records", "decode_records")
COMPILED: Callable[..., Any] = _twin.decode_records
assert PURE is not COMPILED
OPTIONS = (Options(max_decompressed=1 << 20), Options(record_detail=False), Options(decode_records=False))


def dump(x: Any) -> Any:
    """Every slot of a tree (a Row's values and spans, without building its child Fields), with
    the type of each value."""
    if isinstance(x, Field):
        slots = [(n, dump(getattr(x, n))) for n in Field.__slots__ if n != "children"]
        if isinstance(x, Row):
            return (type(x).__name__, slots, x.columns, dump(x.values), x.spans)
        return (type(x).__name__, slots, dump(x.children))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [dump(v) for v in x])
    return (type(x).__name__, repr(x))


def outcome(fn: Callable[..., Any], args: tuple[Any, ...], opts: Options, budget: bool) -> Any:
    b = Budget(opts) if budget else None
    try:
        out: Any = ("ok", dump(fn(*args[:3], opts, *args[3:], budget=b)))
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        out = ("raised", type(e), str(e))
    state = None if b is None else (b.entries_left, b.elements_left, b.inflate_left, b.inflated, sorted(b._said))
    return out, state


def check(*args: Any) -> None:
    """decode_records(buf, start, end, opts, *rest): the same outcome both ways, with each option
    and with a budget of the caller's or its own."""
    for opts in OPTIONS:
        for budget in (False, True):
            assert outcome(COMPILED, args, opts, budget) == outcome(PURE, args, opts, budget), (args[1:], opts)


@cache
def records_fields() -> list[tuple[bytes, int, int, str]]:
    """(message bytes, start, end, name) of the records fields the Kafka captures decode."""
    out: list[tuple[bytes, int, int, str]] = []
    for path in sorted(p for p in (CAPTURES / "kafka").iterdir() if ".pcap" in p.name and not p.name.endswith(".json")):
        registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
        for m in dissect_file(str(path), registry):
            stack = list(m.fields)
            while stack:
                f = stack.pop()
                if f.label is not None and f.label.startswith(f"{f.name} (") and f.label.endswith(")") \
                        and " in " in f.label and f.offset >= 0:
                    out.append((m.data, f.offset, f.offset + f.length, f.name))
                elif not isinstance(f, Row) and f.children:
                    stack.extend(f.children)
    return out


def test_records_fields_of_the_captures() -> None:
    fields = records_fields()
    if not fields:
        pytest.skip("no Kafka captures with records found")
    for data, start, end, name in fields[:300]:
        check(data, start, end, name)
        check(data, start, end - 7, name, False)  # cut short: a partial batch, an error
        check(data, start, len(data) + 10, name)  # past the buffer
        check(data + b"\x00" * 20, start, end + 20, name)  # a batch length too small


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data())
def test_mutated_records_fields(data: st.DataObject) -> None:
    fields = records_fields()
    if not fields:
        pytest.skip("no Kafka captures with records found")
    buf, start, end, name = data.draw(st.sampled_from(fields[:100]))
    at = data.draw(st.integers(start, max(start, end - 1)))
    mutated = buf[:at] + bytes([data.draw(st.integers(0, 255))]) + buf[at + 1:]
    check(mutated, start, data.draw(st.integers(at, end)), name)


@SETTINGS
@given(st.binary(max_size=300), st.integers(-10, 310), st.integers(-10, 310))
def test_random_bytes(data: bytes, start: int, end: int) -> None:
    check(data, start, end)


class Name(str):
    pass


@pytest.mark.parametrize("args", [
    (b"", 0, 0), (b"\x00" * 70, 0, 70), (b"\x00" * 70, 5, 2), (b"\x00" * 70, -5, 40), (b"\x00" * 70, 10, -3),
    (b"\x00" * 70, 1 << 70, 1 << 71), (b"\x00" * 70, -(1 << 70), 1 << 70), (b"\x00" * 70, (1 << 63) - 1, -(1 << 63)),
    (b"\x00" * 70, True, 60), (bytearray(70), 0, 70), (memoryview(bytes(70)), 0, 70), (b"\x00" * 70, 0, 70.0),
    (b"\x00" * 70, 0, 70, Name("records")), (b"\x00" * 70, 0, 70, 7),
], ids=repr)
def test_bounds_buffers_and_names(args: tuple[Any, ...]) -> None:
    check(*args)


def batches() -> list[tuple[bytes, bytes]]:
    """(message bytes, the bytes of one whole v2 batch in them) from the captures' records fields
    that hold exactly one."""
    out = []
    for data, start, end, _ in records_fields():
        size = int.from_bytes(data[start + 8:start + 12], "big", signed=True)
        if end - start >= 61 and data[start + 16] == 2 and start + 12 + size == end:
            out.append((data, data[start:end]))
    return out


TAILS = {
    "nothing": b"",
    "unknown magic": b"\x00" * 8 + (30).to_bytes(4, "big") + b"\x00" * 4 + b"\x07" + b"\x00" * 25,
    "length too small": b"\x00" * 8 + (3).to_bytes(4, "big") + b"\x00" * 10,
    "cut short": b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x02" * 20,
    "under twelve bytes": b"\x00" * 7,
    "under seventeen bytes": b"\x00" * 8 + (14).to_bytes(4, "big") + b"\x00" * 2,
}


@pytest.mark.parametrize("tail", TAILS, ids=str)
@pytest.mark.parametrize("entries", [0, 1, 2, 3, 5, None])
def test_well_formed_batches_then_anything(tail: str, entries: int | None) -> None:
    """Batches the compiled walk decodes itself, then an entry it leaves to records_common.walk,
    with a budget of entries that runs out before, at or after it."""
    found = batches()
    if not found:
        pytest.skip("no Kafka captures with a whole v2 batch found")
    for _, batch in found[:20]:
        buf = b"\x01" * 9 + batch * 3 + TAILS[tail]
        for opts in OPTIONS:
            results = []
            for fn in (COMPILED, PURE):
                b = Budget(opts)
                if entries is not None:
                    b.entries_left = entries
                try:
                    out: Any = ("ok", dump(fn(buf, 9, len(buf), opts, budget=b)))
                except Exception as e:  # noqa: BLE001 - any exception must be the same
                    out = ("raised", type(e), str(e))
                results.append((out, b.entries_left, b.elements_left, sorted(b._said)))
            assert results[0] == results[1], (tail, entries, opts)
