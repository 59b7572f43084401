"""The compiled tree readers and summarisers (kdissect/kafka/_summary.pyx) against the pure ones in
summary.py: every summariser gives the same text, or the same exception, with either set in
place, on the bodies of every Kafka message of the captures, on a default-valued body of every
API version, and on random trees (names the summarisers look for, values of every type,
children that are missing, empty or not Fields' usual list).

Skipped when the extension is not built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_schema_encoder import encode
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.dissect.base import Options
from kdissect.kafka import plan, summary
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import is_flexible
from kdissect.kafka.ops import Ctx
from kdissect.model import Field
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.wire.reader import WireReader

_twin = pytest.importorskip("kdissect.kafka._summary", reason="the compiled module kdissect.kafka._summary is not built")

NAMES = ("child", "value", "text", "elements", "topic_label", "_limit", "produce_request", "partition_offsets")
PURE = {n: accel.pure("kdissect.kafka.summary", n) for n in NAMES}
COMPILED = {n: getattr(_twin, n) for n in NAMES}
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def functions(kind: str) -> Iterator[None]:
    """summary.py's twinned functions, and its table of summarisers, set to one kind."""
    fns = PURE if kind == "pure" else COMPILED
    saved = {n: getattr(summary, n) for n in NAMES}
    table = dict(summary.SUMMARISERS)
    try:
        for n in NAMES:
            setattr(summary, n, fns[n])
        for key, fn in table.items():
            name = getattr(fn, "__name__", "")
            if name in NAMES:
                summary.SUMMARISERS[key] = fns[name]
        yield
    finally:
        for n, fn in saved.items():
            setattr(summary, n, fn)
        summary.SUMMARISERS.update(table)


def outcome(kind: str, api_key: int, is_request: bool, fields: Any, ctx: Ctx) -> Any:
    with functions(kind):
        try:
            return ("ok", summary.summarise(api_key, is_request, fields, ctx))
        except Exception as e:  # noqa: BLE001 - any exception must be the same
            return ("raised", type(e), str(e))


def same(api_key: int, is_request: bool, fields: Any, ctx: Ctx) -> Any:
    want = outcome("pure", api_key, is_request, fields, ctx)
    assert outcome("compiled", api_key, is_request, fields, ctx) == want, (api_key, is_request)
    return want


def test_the_twins_are_what_summary_binds_unless_pure() -> None:
    for n in NAMES:
        assert getattr(summary, n) is (PURE[n] if accel.PURE else COMPILED[n])
    assert summary.SUMMARISERS[(0, True)] is summary.produce_request


@cache
def captured() -> list[tuple[int, bool, list[Field], Ctx]]:
    """What the dissector summarised for every Kafka message of the captures."""
    paths = sorted((CAPTURES / "kafka").glob("*.pcap*"))
    if (SHARED_CAPTURES / "kafka").exists():
        paths += sorted((SHARED_CAPTURES / "kafka").glob("*.pcap*"))
    seen: list[tuple[int, bool, list[Field], Ctx]] = []
    real = summary.summarise

    def recording(api_key: int, is_request: bool, fields: list[Field], ctx: Ctx) -> str:
        seen.append((api_key, is_request, fields, ctx))
        return real(api_key, is_request, fields, ctx)

    import kdissect.kafka.body as body
    body.summarise = recording
    try:
        for path in paths:
            for opts in (Options(), Options(record_detail=False)):
                for _ in dissect_file(str(path), DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka")), opts):
                    pass
    finally:
        body.summarise = real
    return seen


def test_captured_bodies_summarise_the_same() -> None:
    results = [same(*case) for case in captured()]
    texts = {r[1] for r in results if r[0] == "ok"}
    assert any(t.startswith("acks=") and "record" in t for t in texts)
    assert any("@" in t for t in texts)


def test_every_api_version_summarises_the_same() -> None:
    for key, api in sorted(APIS.items()):
        for version in range(api.newest + 1):
            for req in (True, False):
                fields = plan.message_fields(plan.message_name(key, req))
                if fields is None:
                    continue
                data = encode(fields, version, is_flexible(key, version))
                ctx = Ctx(Options(), None, version)
                tree = plan.plan_for(key, version, req)(WireReader(data), ctx)
                same(key, req, tree.children, ctx)


NAMES_SEEN = ("topic_data", "partition_data", "index", "records", "acks", "name", "topic", "topic_name",
              "topic_id", "responses", "partition_responses", "base_offset", "topics", "partitions",
              "partition", "fetch_offset", "partition_index", "high_watermark", "x")
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(), st.text(max_size=6),
                   st.binary(max_size=4), st.floats(allow_nan=False))


def trees(depth: int) -> st.SearchStrategy[Any]:
    leaf = st.builds(lambda n, v: Field(n, v), st.sampled_from(NAMES_SEEN), VALUES)
    if depth == 0:
        return st.lists(leaf, max_size=4)
    node = st.builds(lambda n, v, kids: Field(n, v, children=kids), st.sampled_from(NAMES_SEEN), VALUES,
                     st.one_of(st.none(), trees(depth - 1), trees(depth - 1).map(tuple)))
    return st.lists(st.one_of(leaf, node), max_size=5)


@SETTINGS
@given(trees(3), st.sampled_from(sorted(summary.SUMMARISERS)), st.dictionaries(st.integers(), st.dictionaries(
    st.sampled_from(("records", "batches", "bytes")), st.integers(0, 3)), max_size=2))
def test_random_trees(fields: list[Field], api: tuple[int, bool], stats: dict[int, dict[str, int]]) -> None:
    ctx = Ctx(Options(), None, 3)
    ctx.records.update(stats)
    for f in fields:  # a records field the stats describe
        if f.name == "records":
            ctx.records[id(f)] = {"records": len(stats)}
    same(api[0], api[1], fields, ctx)
    same(0, True, [Field("topic_data", None, children=[Field("t", None, children=fields)])], ctx)
    for n in ("child", "value", "text", "elements"):
        for name in NAMES_SEEN[:6]:
            want = PURE[n](fields, name)
            got = COMPILED[n](fields, name)
            assert got is want if n in ("child", "value") else got == want
    assert PURE["_limit"]([str(i) for i in range(len(fields) * 2)]) == COMPILED["_limit"](
        [str(i) for i in range(len(fields) * 2)])


def test_names_are_cut_at_the_same_length() -> None:
    for n in (summary.MAX_NAME - 1, summary.MAX_NAME, summary.MAX_NAME + 1, 40_000):
        fields = [Field("name", "n" * n)]
        want = PURE["text"](fields, "name")
        assert COMPILED["text"](fields, "name") == want and len(want) == min(n, summary.MAX_NAME)
        topic = Field("topic", None, children=fields)
        assert COMPILED["topic_label"](topic, Ctx(Options())) == PURE["topic_label"](topic, Ctx(Options())) == want
