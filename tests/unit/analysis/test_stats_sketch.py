"""The response-time sketch: exact while small, bounded and within its accuracy when large."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.analysis.sketch import ALPHA, EXACT_LIMIT, QuantileSketch


def nearest_rank(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_exact_when_small(values: list[float]) -> None:
    sk = QuantileSketch()
    for v in values:
        sk.add(v)
    assert sk.is_exact
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        assert sk.quantile(q) == nearest_rank(values, q)
    assert sk.min == min(values) and sk.max == max(values) and sk.count == len(values)
    assert sum(n for _, _, n in sk.histogram()) == len(values)


def test_bounded_and_accurate_when_large() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 2) for _ in range(60_000)] + [0.0] * 100
    sk = QuantileSketch()
    for v in values:
        sk.add(v)
    assert not sk.is_exact
    assert len(sk.buckets) < 2500  # bounded by the value range, not by the sample count
    for q in (0.5, 0.9, 0.99):
        want = nearest_rank(values, q)
        got = sk.quantile(q)
        assert got is not None and abs(got - want) <= ALPHA * want * 1.01, (q, got, want)
    assert sk.quantile(0.0) == 0.0
    assert sk.quantile(1.0) == max(values)
    assert sum(n for _, _, n in sk.histogram()) == len(values)


def test_switches_to_buckets_past_the_limit() -> None:
    sk = QuantileSketch()
    for i in range(EXACT_LIMIT + 1):
        sk.add(float(i + 1))
    assert not sk.is_exact and sk.exact is None
    assert sk.to_json()["count"] == EXACT_LIMIT + 1


def test_empty() -> None:
    sk = QuantileSketch()
    assert sk.quantile(0.5) is None and sk.histogram() == []
    assert sk.to_json()["p50"] is None
