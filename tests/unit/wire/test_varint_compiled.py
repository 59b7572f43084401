"""The compiled varints (kdissect/wire/_varint.pyx) against the pure ones (varint.py): the same
value and next position, or the same exception, for every buffer type, position and end,
including varints of ten bytes and more, cut short, and positions outside the buffer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect import accel

twin = pytest.importorskip("kdissect.wire._varint", reason="the compiled twin of varint is not built")
PURE = {name: accel.pure("kdissect.wire.varint", name) for name in ("uvarint_at", "varint_at")}


def outcome(f: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "value", f(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return type(e).__name__, (str(e), getattr(e, "offset", None))


def check(buf: bytes, pos: int, end: int) -> None:
    for b in (buf, bytearray(buf), memoryview(buf)):
        for name, pure in PURE.items():
            assert outcome(getattr(twin, name), b, pos, end) == outcome(pure, b, pos, end), (name, buf, pos, end)


VARINT_BYTES = st.one_of(st.integers(0x80, 0xFF), st.integers(0, 0x7F), st.sampled_from([0, 0x7F, 0x80, 0xFF]))


@given(st.lists(VARINT_BYTES, max_size=14).map(bytes), st.integers(-2, 16), st.integers(-2, 18))
def test_same_as_pure(buf: bytes, pos: int, end: int) -> None:
    check(buf, pos, end)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**69])
def test_encoded_values(value: int) -> None:
    out = bytearray()
    v = value
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            break
    buf = bytes(out)
    assert twin.uvarint_at(buf, 0, len(buf)) == (value, len(buf))
    for end in range(len(buf) + 2):
        check(buf, 0, end)
