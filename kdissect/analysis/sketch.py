"""A bounded quantile sketch for response times: exact while small, then log buckets.

Up to EXACT_LIMIT samples are kept as they are and quantiles are exact. Past that, samples go
into logarithmic buckets (each bucket spans a factor GAMMA, so any quantile is within ALPHA
relative error, like DDSketch); buckets are bounded by the value range (about 2,100 buckets
from 1 ns to 1 day), so memory does not grow with the number of samples. min, max, count and
sum stay exact.
"""

from __future__ import annotations

import math
from typing import Any

EXACT_LIMIT = 2048
ALPHA = 0.01  # relative accuracy of the bucketed quantiles
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
MIN_VALUE = 1e-9  # values below (zero, negative) share bucket "zero"


class QuantileSketch:
    __slots__ = ("count", "total", "min", "max", "exact", "buckets", "zeros")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.exact: list[float] | None = []
        self.buckets: dict[int, int] = {}
        self.zeros = 0

    def add(self, x: float) -> None:
        self.count += 1
        self.total += x
        self.min = min(self.min, x)
        self.max = max(self.max, x)
        if self.exact is not None:
            self.exact.append(x)
            if len(self.exact) > EXACT_LIMIT:
                pending, self.exact = self.exact, None
                for v in pending:
                    self._bucket(v)
            return
        self._bucket(x)

    def _bucket(self, x: float) -> None:
        if x < MIN_VALUE:
            self.zeros += 1
            return
        i = math.ceil(math.log(x) / _LOG_GAMMA)
        self.buckets[i] = self.buckets.get(i, 0) + 1

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1), nearest-rank; None when empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        if self.exact is not None:
            return sorted(self.exact)[rank - 1]
        if rank == 1:
            return self.min
        if rank >= self.count:
            return self.max
        seen = self.zeros
        if rank <= seen:
            return max(self.min, 0.0)
        for i in sorted(self.buckets):
            seen += self.buckets[i]
            if seen >= rank:
                mid = 2 * GAMMA ** i / (GAMMA + 1)  # the bucket's value of least relative error
                return min(max(mid, self.min), self.max)
        return self.max

    def histogram(self, bins: int = 12) -> list[tuple[float, float, int]]:
        """(lo, hi, count) over [min, max] in log-spaced bins (linear when the range is flat)."""
        if not self.count:
            return []
        lo, hi = self.min, self.max
        edges = _edges(lo, hi, bins)
        counts = [0] * (len(edges) - 1)
        for value, n in self._values():
            counts[_bin(edges, value)] += n
        return [(edges[i], edges[i + 1], counts[i]) for i in range(len(counts))]

    def _values(self) -> list[tuple[float, int]]:
        if self.exact is not None:
            return [(v, 1) for v in self.exact]
        out = [(max(self.min, 0.0), self.zeros)] if self.zeros else []
        out += [(min(max(2 * GAMMA ** i / (GAMMA + 1), self.min), self.max), n) for i, n in self.buckets.items()]
        return out

    def to_json(self) -> dict[str, Any]:
        q = self.quantile
        return {
            "count": self.count, "min": _r(self.min if self.count else None), "p50": _r(q(0.5)),
            "p90": _r(q(0.9)), "p99": _r(q(0.99)), "max": _r(self.max if self.count else None),
            "mean": _r(self.mean), "exact": self.is_exact,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _edges(lo: float, hi: float, bins: int) -> list[float]:
    if hi <= lo:
        return [lo, hi]
    if lo > 0 and hi / lo > 10:
        step = (math.log(hi) - math.log(lo)) / bins
        return [math.exp(math.log(lo) + step * i) for i in range(bins)] + [hi]
    step = (hi - lo) / bins
    return [lo + step * i for i in range(bins)] + [hi]


def _bin(edges: list[float], value: float) -> int:
    last = len(edges) - 2
    for i in range(last + 1):
        if value < edges[i + 1]:
            return i
    return last
