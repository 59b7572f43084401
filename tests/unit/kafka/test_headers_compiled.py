"""The compiled header and length readers (kdissect/kafka/_headers.pyx) against the pure ones in
headers.py: the same length, header tuple, Field tree (every slot), reader position and
exceptions (type, message, offset), for the headers of every Kafka message of the captures, for
generated headers of every API key and version (client ids of every length, invalid UTF-8,
tagged sections clean and broken), their truncations, random bytes, readers over a window of a
larger buffer and buffers other than bytes.

Skipped when the extension is not built."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcapgen import uvarint
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as

from kdissect import accel
from kdissect.kafka import headers
from kdissect.kafka.apis import APIS
from kdissect.model import Field
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.wire.reader import WireReader

_twin = pytest.importorskip("kdissect.kafka._headers", reason="the compiled module kdissect.kafka._headers is not built")

NAMES = ("read_length", "read_request_header", "read_response_header")
PURE = {n: accel.pure("kdissect.kafka.headers", n) for n in NAMES}
COMPILED = {n: getattr(_twin, n) for n in NAMES}
SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dump(f: Any) -> Any:
    """Every slot of a Field tree, with the type of each value."""
    if not isinstance(f, Field):
        return ("not a Field", type(f).__name__, repr(f))
    return (f.name, type(f.value).__name__, f.value, f.offset, f.length, f.hint, f.display, f.label,
            None if f.children is None else [dump(c) for c in f.children])


def outcome(fn: Any, data: Any, window: tuple[int, int] | None, *args: int) -> tuple[Any, ...]:
    r = WireReader(data) if window is None else WireReader(data, *window)
    try:
        head, tree = fn(r, *args)
        result: Any = ("ok", type(head).__name__, tuple(head) if isinstance(head, tuple) else head, dump(tree))
    except Exception as e:  # noqa: BLE001 - any exception must be the same
        result = ("raised", type(e), str(e), getattr(e, "offset", None))
    return result, r.pos, r.end


def same(data: Any, window: tuple[int, int] | None = None) -> tuple[Any, ...]:
    """Both readers of both kinds of header, and of a length, agree on data; the pure request
    outcome."""
    length = outcome(PURE["read_length"], data, window)
    assert outcome(COMPILED["read_length"], data, window) == length, bytes(data)[:100]
    want = outcome(PURE["read_request_header"], data, window)
    assert outcome(COMPILED["read_request_header"], data, window) == want, bytes(data)[:100]
    for version in (0, 1):
        expect = outcome(PURE["read_response_header"], data, window, version)
        assert outcome(COMPILED["read_response_header"], data, window, version) == expect, bytes(data)[:100]
    return want


def test_the_twins_are_what_headers_binds_unless_pure() -> None:
    for n in NAMES:
        assert getattr(headers, n) is (PURE[n] if accel.PURE else COMPILED[n])


@cache
def captured() -> list[bytes]:
    """The bytes after the length prefix of every Kafka message of the captures."""
    paths = sorted((CAPTURES / "kafka").glob("*.pcap*"))
    if (SHARED_CAPTURES / "kafka").exists():
        paths += sorted((SHARED_CAPTURES / "kafka").glob("*.pcap*"))
    seen: set[bytes] = set()
    for path in paths:
        for m in dissect_file(str(path), DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))):
            if m.protocol == "kafka":
                seen.add(bytes(m.data[4:]))
    return sorted(seen)


def test_captured_headers_read_the_same() -> None:
    read = [same(data) for data in captured()]
    assert sum(r[0][0] == "ok" for r in read) > 100


def _header(api_key: int, version: int, client: bytes | None, tags: list[tuple[int, bytes]] | None) -> bytes:
    out = api_key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big", signed=True) + b"\0\0\0\x07"
    out += b"\xff\xff" if client is None else len(client).to_bytes(2, "big") + client
    if tags is not None:
        out += uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in tags)
    return out



def test_every_api_version_and_its_truncations() -> None:
    for key, api in sorted(APIS.items()):
        for version in range(api.newest + 2):
            tags = [] if headers.is_flexible(key, version) else None
            data = _header(key, version, b"client-1", tags) + b"\0\0\0\x04"
            for cut in range(len(data) + 1):
                same(data[:cut])


def test_tagged_sections_and_client_ids() -> None:
    clients = [None, b"", b"x", "é-ü".encode(), b"\xff\xfe bad utf-8", b"c" * 300]
    sections = [[], [(0, b"")], [(1, b"ab"), (3, b"")], [(2, b"a"), (2, b"bc")], [(300, b"v" * 200)],
                [(0xFFFFFFFF, b"x")], [(t, b"") for t in range(20)]]
    for key, version in ((0, 10), (3, 12), (18, 3), (7, 0), (7, 1), (999, 0), (1500, 2), (-1, 0)):
        for client in clients:
            for tags in sections:
                data = _header(key, version, client, tags)
                for cut in (len(data), len(data) - 1, 9):
                    same(data[:cut])
                same(data + b"tail", (0, len(data)))


def test_buffers_other_than_bytes_and_windows() -> None:
    data = _header(0, 10, b"client", [(1, b"ab")]) + b"body"
    for buf in (bytearray(data), memoryview(data)):
        same(buf)
    padded = b"\x01\x02\x03" + data + b"\x04"
    for window in ((3, 3 + len(data)), (3, 8), (3, 100), (2, 3 + len(data)), (len(padded), len(padded))):
        same(padded, window)


@st.composite
def crafted(draw: st.DrawFn) -> bytes:
    key = draw(st.one_of(st.sampled_from(sorted(APIS)), st.integers(-(1 << 15), (1 << 15) - 1)))
    version = draw(st.one_of(st.integers(-1, 20), st.integers(-(1 << 15), (1 << 15) - 1)))
    client = draw(st.one_of(st.none(), st.binary(max_size=40)))
    tags = draw(st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 1 << 33), st.binary(max_size=8)),
                                              max_size=20)))
    data = bytearray(_header(key, version, client, tags) + draw(st.binary(max_size=8)))
    for _ in range(draw(st.integers(0, 3))):  # mutate a byte
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data[:draw(st.integers(0, len(data)))])


@SETTINGS
@given(crafted())
def test_crafted_headers(data: bytes) -> None:
    same(data)


@SETTINGS
@given(st.binary(max_size=64), st.integers(0, 70), st.integers(0, 70))
def test_random_bytes_and_windows(data: bytes, pos: int, end: int) -> None:
    same(data)
    same(data, (pos, end))
