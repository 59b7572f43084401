"""Time series in bounded memory, for the charts of `kdissect report` (and `expert -F json`).

The capture's length is not known while it streams, so a series starts with narrow bins and,
when a value falls past its last bin, doubles the width of all (merging neighbours) until it
fits: at most MAX_BINS bins whatever the capture's length, each the same width. Every series of
one run shares a `Clock` (the origin, the width), so their bins line up.
"""

from __future__ import annotations

import bisect
from typing import Any

MAX_BINS = 512
FIRST_WIDTH = 0.01  # seconds: a short capture keeps its detail
# Latency heatmap rows: log-spaced response-time buckets from 10 µs to 100 s, 4 per decade.
HEAT_EDGES_MS = tuple(round(10 ** (e / 4), 6) for e in range(-8, 21))


class Clock:
    """The origin and the current bin width of every series of a run."""

    __slots__ = ("origin", "width", "series", "length")

    def __init__(self) -> None:
        self.origin: float | None = None
        self.width = FIRST_WIDTH
        self.series: list[Bins] = []
        self.length = 0  # bins up to the latest time seen: what each series' to_json fills to

    def index(self, ts: float) -> int:
        """The bin of `ts`, widening every series first if it falls past the last bin."""
        if self.origin is None:
            self.origin = ts
        i = max(0, int((ts - self.origin) // self.width))
        while i >= MAX_BINS:
            self.width *= 2
            for s in self.series:
                s.halve()
            i //= 2
            self.length = (self.length + 1) // 2
        self.length = max(self.length, i + 1)
        return i

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "bin_s": self.width, "bins": self.length}


class Bins:
    """A number per bin: a sum (counts, bytes) or, with `last=True`, the last value seen in
    the bin (a lag, a queue depth): the bins a value never reached are None."""

    __slots__ = ("clock", "values", "last")

    def __init__(self, clock: Clock, last: bool = False) -> None:
        self.clock = clock
        self.values: list[float | None] = []
        self.last = last
        clock.series.append(self)

    def add(self, ts: float, value: float = 1) -> None:
        i = self.clock.index(ts)
        values = self.values
        if i >= len(values):
            values.extend([None] * (i + 1 - len(values)))
        old = values[i]
        values[i] = value if self.last or old is None else old + value

    def halve(self) -> None:
        v = self.values
        out: list[float | None] = []
        for i in range(0, len(v), 2):
            a, b = v[i], v[i + 1] if i + 1 < len(v) else None
            if self.last:
                out.append(b if b is not None else a)
            else:
                out.append(None if a is None and b is None else (a or 0) + (b or 0))
        self.values = out

    def to_json(self) -> list[float | None]:
        """Every bin of the run (Clock.length), sums 0 where nothing came."""
        v = self.values + [None] * (self.clock.length - len(self.values))
        return v if self.last else [x or 0 for x in v]


class Heatmap:
    """Response times per bin of time and HEAT_EDGES_MS bucket (the count in each cell)."""

    __slots__ = ("rows",)

    def __init__(self, clock: Clock) -> None:
        self.rows = [Bins(clock) for _ in range(len(HEAT_EDGES_MS) + 1)]

    def add(self, ts: float, ms: float) -> None:
        self.rows[bucket(ms)].add(ts)

    def to_json(self) -> dict[str, Any]:
        used = [i for i, r in enumerate(self.rows) if any(r.values)]
        if not used:
            return {"edges_ms": [], "counts": []}
        lo, hi = used[0], used[-1]
        return {"edges_ms": [_edge(i) for i in range(lo, hi + 2)],  # rows' lower edges, then the top
                "counts": [self.rows[i].to_json() for i in range(lo, hi + 1)]}


def bucket(ms: float) -> int:
    """The heatmap row of a response time: row 0 is below HEAT_EDGES_MS[0], row i from
    HEAT_EDGES_MS[i-1] up to HEAT_EDGES_MS[i], the last row from the last edge up."""
    return bisect.bisect_right(HEAT_EDGES_MS, ms)


def _edge(i: int) -> float | None:
    """The lower edge of row i: 0 for the first row, None (no bound) past the last."""
    if i == 0:
        return 0.0
    return HEAT_EDGES_MS[i - 1] if i <= len(HEAT_EDGES_MS) else None


class Points:
    """Up to `cap` (time, value) points in capture order; past the cap every other point is
    dropped and only every 2nd, 4th... new one kept, so the points stay spread over the run."""

    __slots__ = ("cap", "t", "v", "stride", "seen")

    def __init__(self, cap: int = 2000) -> None:
        self.cap = cap
        self.t: list[float] = []
        self.v: list[float] = []
        self.stride = 1
        self.seen = 0

    def add(self, ts: float, value: float) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.t.append(ts)
        self.v.append(value)
        if len(self.t) >= self.cap:
            self.t = self.t[::2]
            self.v = self.v[::2]
            self.stride *= 2

    def to_json(self, origin: float | None) -> dict[str, Any]:
        o = origin or 0.0
        return {"t": [round(t - o, 6) for t in self.t], "v": self.v, "sampled": self.stride > 1}
