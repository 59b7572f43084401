"""The expert's bounded time series: widths double, sums and last values survive the merge."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kdissect.expert.series import HEAT_EDGES_MS, MAX_BINS, Bins, Clock, Heatmap, Points, bucket


def test_bins_start_narrow_and_keep_every_value() -> None:
    clock = Clock()
    counts, lasts = Bins(clock), Bins(clock, last=True)
    clock.index(1000.0)  # the origin
    for i in range(100):
        counts.add(1000.0 + i * 0.001 + 0.0005)
        lasts.add(1000.0 + i * 0.001 + 0.0005, i)
    assert clock.width == 0.01 and clock.length == 10
    assert counts.to_json() == [10] * 10
    assert lasts.to_json() == [9, 19, 29, 39, 49, 59, 69, 79, 89, 99]


@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), st.integers(0, 1000)), min_size=1, max_size=300))
def test_widening_keeps_sums_and_the_latest_value(samples: list[tuple[float, int]]) -> None:
    clock = Clock()
    clock.index(0.0)
    counts, lasts = Bins(clock), Bins(clock, last=True)
    for ts, v in sorted(samples):
        counts.add(ts, v)
        lasts.add(ts, v)
    assert clock.length <= MAX_BINS
    assert sum(counts.to_json()) == sum(v for _, v in samples)  # type: ignore[arg-type]
    assert [x for x in lasts.to_json() if x is not None][-1] == sorted(samples)[-1][1]
    width = clock.width
    for ts, _ in samples:
        assert int(ts // width) < clock.length


def test_a_series_made_late_lines_up_with_the_others() -> None:
    clock = Clock()
    early = Bins(clock)
    early.add(0.0)
    early.add(100.0)  # widens to 0.32 s bins
    late = Bins(clock)
    late.add(100.0)
    assert len(early.to_json()) == len(late.to_json()) == clock.length
    assert early.to_json()[-1] == late.to_json()[-1] == 1


def test_heatmap_rows_and_edges() -> None:
    assert bucket(0.005) == 0 and bucket(0.01) == 1 and bucket(1.0) == 9 and bucket(1e9) == len(HEAT_EDGES_MS)
    clock = Clock()
    heat = Heatmap(clock)
    heat.add(0.0, 0.5)
    heat.add(0.0, 0.6)
    heat.add(0.05, 3.0)
    out = heat.to_json()
    assert out["edges_ms"] == [0.316228, 0.562341, 1.0, 1.778279, 3.162278]  # 4 rows' lower edges, the top
    assert out["counts"] == [[1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0] * 6, [0, 0, 0, 0, 0, 1]]
    assert Heatmap(Clock()).to_json() == {"edges_ms": [], "counts": []}


def test_points_stay_spread_over_the_run() -> None:
    p = Points(cap=100)
    for i in range(10_000):
        p.add(float(i), i)
    assert len(p.t) < 100 and p.stride == 128
    assert p.t[0] == 0.0 and p.t[-1] > 9_000
    out = p.to_json(origin=0.0)
    assert out["sampled"] and out["t"] == p.t
