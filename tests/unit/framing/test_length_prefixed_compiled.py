"""The compiled first filter of resynchronisation (kdissect/framing/_length_prefixed.pyx)
against the pure one (length_prefixed.next_length): the same offset for every buffer, range and
bounds. The regular expression the pure one searches with takes 20-50 ns a byte (1 GB of zeros
on a Kafka port: 50 s of resynchronisation); the twin about 1."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect import accel
from kdissect.framing import length_prefixed

twin = pytest.importorskip("kdissect.framing._length_prefixed", reason="the compiled twin is not built")
pure = accel.pure("kdissect.framing.length_prefixed", "next_length")

RANGES = [(4, 100 * 1024 * 1024), (8, 4 * 1024 * 1024), (16, 4 * 1024 * 1024), (0, 10), (300, 70_000),
          (5, 0xFFFFFFFF), (0, 0), (7, 3), (1, 1 << 40)]


def test_the_twin_is_in_place() -> None:
    if accel.PURE:
        assert length_prefixed.next_length is pure
    else:
        assert length_prefixed.next_length is twin.next_length


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40), st.integers(-2, 45), st.integers(-2, 45), st.sampled_from(RANGES))
def test_same_offset_as_the_pure_filter(data: bytes, i: int, last: int, bounds: tuple[int, int]) -> None:
    buf = bytearray(data)
    assert twin.next_length(buf, i, last, *bounds) == pure(buf, i, last, *bounds)


def test_same_offsets_over_a_long_buffer_of_few_distinct_bytes() -> None:
    r = random.Random(7)
    buf = bytearray(r.choice(b"\x00\x00\x00\x01\x05\x06\x07\x10\xff") for _ in range(20_000))
    for lo, hi in RANGES:
        want, got, i = [], [], 0
        while (i := pure(buf, i, len(buf), lo, hi)) >= 0:
            want.append(i)
            i += 1
        i = 0
        while (i := twin.next_length(buf, i, len(buf), lo, hi)) >= 0:
            got.append(i)
            i += 1
        assert got == want


def test_other_buffers_take_the_pure_path() -> None:
    assert twin.next_length(b"\x00\x00\x00\x05\x00", 0, 5, 4, 10) == 0
    assert twin.next_length(memoryview(b"\x00\x00\x00\x05"), 0, 0, 4, 10) == 0
