"""The detail panes' data: tree rows worded as `read -V`, their filters matching the message,
spans, hex lines masked as `read -x`, on the project's real captures."""

from __future__ import annotations

import functools
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect.dissect.base import Options
from kdissect.filter import compile_filter
from kdissect.model import ARRAY, RAW, SECRET, Field, Message, Pdu, Row, secret_ranges, struct
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.render.text import hexdump, tree_lines
from kdissect.tui.details import ancestors, filter_literal, find_in_tree, hex_lines, tree_rows

PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq")
ALL = sorted(p for proto in PROTOCOLS for p in (CAPTURES / proto).glob("*.pcap"))
SASL = CAPTURES / "kafka" / "scripted_ck_sasl.pcap"


@functools.cache
def decoded(path: Path) -> tuple[Message, ...]:
    reg = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
    return tuple(dissect_file(str(path), reg, Options(tls_keylog=sidecar_keylog(path))))


@functools.lru_cache(maxsize=100_000)
def compiled(expr: str) -> Callable[[Message], bool]:
    return compile_filter(expr)


def field_rows(m: Message) -> list:
    return [r for r in tree_rows(m, None) if r.id[0].isdigit()]


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_labels_are_read_verbose_lines(path: Path) -> None:
    for m in decoded(path):
        lines = ["    " * (r.depth + 1) + r.label for r in field_rows(m)]
        assert lines == tree_lines(m.fields, 256), m


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_row_filter_compiles_and_matches_its_message(path: Path) -> None:
    rows = 0
    for m in decoded(path):
        for r in tree_rows(m, None):
            assert r.filter is not None, (m, r)
            assert compiled(r.filter)(m), (m, r.filter)
            rows += 1
    assert rows >= 50


def test_filters_quote_each_type() -> None:
    m = decoded(SASL)[0]  # ApiVersions v3 request of client kd-sasl
    by_key = {r.key: r for r in tree_rows(m, None)}
    assert by_key["kafka.header.api_key"].filter == "kafka.header.api_key == 18"
    assert by_key["kafka.header.client_id"].filter == 'kafka.header.client_id == "kd-sasl"'
    assert by_key["kafka.header"].filter == "kafka.header"  # a structure: exists
    assert by_key["kafka.header.client_id"].span == (12, 9)  # int16 length and "kd-sasl"
    assert by_key["kafka.header.api_key"].label == "api_key: ApiVersions (18)"
    assert by_key["kafka.header.api_key"].value_text == "18"
    assert filter_literal(True) == "true" and filter_literal(-3) == "-3" and filter_literal(2.5) == "2.5"
    assert filter_literal(b"\x00\xff") == "00:ff" and filter_literal(b"ab") == '"ab"' and filter_literal(b"") == '""'
    assert filter_literal('a "q"\n') == '"a \\"q\\"\\n"'
    assert filter_literal(float("nan")) is None and filter_literal(b"x" * 5000) is None


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=40), st.binary(max_size=40), st.integers(-(2**63), 2**64),
                 st.booleans(), st.floats(allow_nan=False, allow_infinity=False)))
def test_filter_literal_matches_its_value(value: object) -> None:
    """Any scalar a tree may hold, as `kafka.header.client_id == <literal>`, matches it."""
    m = Message(Pdu(b"", [1], 0.0, 0.0, True), 0, "a:1", "b:2", "kafka")
    m.fields = [struct("header", [Field("client_id", value, 0, 1)])]
    row = next(r for r in tree_rows(m, None) if r.key == "kafka.header.client_id")
    assert row.filter is not None
    assert compile_filter(row.filter)(m), row.filter


def test_spans_of_row_fields_are_their_columns() -> None:
    rows = 0
    for path in ALL:
        for m in decoded(path):
            stack = list(m.fields)
            while stack:
                f = stack.pop()
                if type(f) is Row and f.spans is not None:
                    kids = f.children
                    for n, k in enumerate(kids):
                        if not isinstance(f.values[n], Field):
                            assert (k.offset, k.length) == (f.spans[2 * n], f.spans[2 * n + 1])
                            rows += 1
                stack.extend(f.children or [])
            by_id = {r.id: r for r in tree_rows(m, None)}
            for r in by_id.values():
                if r.span is not None and r.id[0].isdigit():
                    assert r.span[0] >= 0 and r.span[1] >= 0
    assert rows > 0


def test_only_expanded_rows_show() -> None:
    m = max(decoded(CAPTURES / "kafka" / "mock_ck_transactions.pcap"), key=lambda m: len(field_rows(m)))
    top = tree_rows(m, set())
    assert all(r.depth == 0 for r in top)
    parent = next(r for r in top if r.has_children)
    opened = tree_rows(m, {parent.id})
    kids = [r for r in opened if r.id.startswith(parent.id + ".")]
    assert kids and all(r.depth == 1 and r.id.count(".") == parent.id.count(".") + 1 for r in kids)
    assert len(opened) == len(top) + len(kids)


def test_find_in_tree_gives_ids_whose_ancestors_open_them() -> None:
    m = decoded(SASL)[0]
    ids = find_in_tree(m, "KD-SASL")
    assert "1.3" in ids
    assert ancestors("1.3") == ["1"]
    assert any(r.id == "1.3" for r in tree_rows(m, set(ancestors("1.3"))))
    assert find_in_tree(m, "") == []


def test_hex_lines_are_read_x_lines_secrets_masked() -> None:
    masked = 0
    for m in decoded(SASL):
        lines = hex_lines(m, None)
        assert ["    " + ln.text for ln in lines] == list(hexdump(m.data, hidden=secret_ranges(m)))
        masked += sum(c == "**" for ln in lines for c in ln.cells)
    assert masked > 0  # the SASL password is not shown


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.integers(-5, 120), st.integers(-5, 120), st.integers(1, 32),
       st.lists(st.tuples(st.integers(-5, 110), st.integers(0, 40)), max_size=3))
def test_hex_lines_highlight_and_mask(data: bytes, start: int, n: int, width: int,
                                      hidden: list[tuple[int, int]]) -> None:
    lines = hex_lines(data, (start, n), width, hidden)
    lit = [ln.offset + c for ln in lines for c in ln.highlighted]
    assert lit == list(range(max(start, 0), min(start + max(n, 0), len(data))))
    cells = [c for ln in lines for c in ln.cells]
    assert len(cells) == len(data)
    hid = {i for a, k in hidden for i in range(max(a, 0), min(a + k, len(data)))}
    assert [i for i, c in enumerate(cells) if c == "**"] == sorted(hid)
    if width == 16:
        assert ["    " + ln.text for ln in lines] == list(hexdump(data, hidden=hidden))


def test_hex_lines_of_a_large_message_are_made_as_they_are_read() -> None:
    """A message of 16 MB (RocketMQ's largest; Kafka's is 100 MB) was a million lines made at
    once when selected: 85 s and 1.1 GB (1 MB: 5.6 s and 68 MB)."""
    data = bytes(range(256)) * 4096
    tracemalloc.start()
    try:
        lines = hex_lines(data, (1_000_000, 3), 16, [(16, 2)])
        assert len(lines) == 65_536 and lines[-1].offset == len(data) - 16
        assert lines[1].cells[:3] == ("**", "**", "12") and lines[62_500].highlighted == (0, 1, 2)
        assert [ln.offset for ln in lines[2:4]] == [32, 48] and lines[-65_536].offset == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    with pytest.raises(IndexError):
        lines[65_536]


def test_hostile_trees_do_not_break_rows() -> None:
    deep = Field("leaf", 1)
    for _ in range(2000):
        deep = struct("s", [deep])
    odd = [Field("weird", {"a": 1}), Field("neg", 5, -7, -1), Field("arr", None, children="xx", hint=ARRAY),  # type: ignore[arg-type]
           Field("raw", b"\x00" * 3, 0, 3, hint=RAW), Field("pw", "<redacted 3 bytes>", 1, 3, hint=SECRET),
           Field("nan", float("nan")), deep]
    m = Message(Pdu(b"\x00\x01\x02\x03", [1], 0.0, 0.0, True), 0, "a:1", "b:2", "kafka")
    m.fields = odd
    rows = tree_rows(m, None)
    assert max(r.depth for r in rows) <= 256
    by_label = {r.label.split(":")[0]: r for r in rows}
    assert by_label["pw"].filter is None  # not a key the filter compiler knows
    assert by_label["pw"].value_text == "pw: '<redacted 3 bytes>'"  # a secret copies as shown
    assert by_label["neg"].span is None
    assert hex_lines(m, (2, 9))[0].highlighted == (2, 3)
    assert hex_lines(m, None)[0].cells == ("**",) * 4  # a tree too broken to find its secrets: all hidden
    m.fields = odd[3:5]
    assert hex_lines(m, None)[0].cells == ("00", "**", "**", "**")
