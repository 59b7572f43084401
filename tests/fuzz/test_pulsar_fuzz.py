"""Hypothesis fuzzing of the Pulsar dissector: random frames, truncations, mutations of real
messages, random metadata and batches. Only diagnostics may come out, never an exception."""

from __future__ import annotations

import contextlib
import struct
import zlib
from functools import cache
from pathlib import Path

import crc32c
import lz4.block
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import SHARED_CAPTURES

from kdissect.dissect.base import Options, run_dissector
from kdissect.errors import DecodeError
from kdissect.model import Message, Pdu
from kdissect.pulsar.dissector import DISSECTOR
from kdissect.pulsar.protowire import WalkContext, walk
from kdissect.pulsar.schema_table import MESSAGES

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = [ROOT / "captures" / "pulsar", SHARED_CAPTURES / "pulsar"]
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPTS = Options(max_decompressed=1 << 20)


def _dissect(data: bytes, to_server: bool = True) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "pulsar")
    run_dissector(DISSECTOR, msg, DISSECTOR.new_state(), OPTS)  # anything but a DecodeError propagates
    return msg


def _key(num: int, wire: int) -> bytes:
    n, out = num << 3 | wire, bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(num: int, raw: bytes) -> bytes:
    return _key(num, 2) + _varint(len(raw)) + raw


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _frame(ctype: int, body: bytes, section: bytes = b"") -> bytes:
    cmd = _key(1, 0) + _varint(ctype) + _ld(ctype, body)
    return struct.pack(">II", 4 + len(cmd) + len(section), len(cmd)) + cmd + section


def _section(metadata: bytes, payload: bytes) -> bytes:
    after = struct.pack(">I", len(metadata)) + metadata + payload
    return struct.pack(">HI", 0x0E01, crc32c.crc32c(after)) + after


@cache
def seeds() -> tuple[bytes, ...]:
    """PDUs from the captures when present, plus a few built here."""
    from kdissect.pipeline import dissect_file

    found: list[bytes] = []
    for d in CAPTURES:
        for path in sorted(d.glob("*.pcap")) if d.exists() else []:
            found += [m.data for m in dissect_file(str(path)) if m.protocol == "pulsar"][:40]
    meta = _ld(1, b"p") + _key(2, 0) + b"\x01" + _key(3, 0) + b"\x02" + _key(11, 0) + b"\x02"
    batch = b"".join(struct.pack(">I", 2) + _key(3, 0) + b"\x01" + b"x" for _ in range(2))
    found.append(_frame(6, _key(1, 0) + b"\x01" + _key(2, 0) + b"\x02", _section(meta, batch)))
    found.append(_frame(2, _ld(1, b"client") + _key(4, 0) + b"\x15"))
    return tuple(found)


@FAST
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes(data: bytes, to_server: bool) -> None:
    _dissect(data, to_server)
    DISSECTOR.probe(data)
    DISSECTOR.probe_boundary(data, to_server, DISSECTOR.new_state())


@FAST
@given(st.integers(0, 80), st.binary(max_size=120))
def test_random_command_bodies(ctype: int, body: bytes) -> None:
    _dissect(_frame(ctype, body))
    _dissect(_frame(ctype, body, body))


def test_truncation_at_every_offset() -> None:
    for pdu in seeds():
        for cut in range(len(pdu)):
            _dissect(pdu[:cut])


@FAST
@given(st.data())
def test_mutations_of_real_messages(data: st.DataObject) -> None:
    pdu = bytearray(data.draw(st.sampled_from(seeds())))
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(pdu) - 1))
        pdu[pos] = data.draw(st.integers(0, 255))
    _dissect(bytes(pdu), data.draw(st.booleans()))


@FAST
@given(st.sampled_from(sorted(MESSAGES)), st.binary(max_size=100))
def test_walker_on_every_message(message: str, data: bytes) -> None:
    with contextlib.suppress(DecodeError):  # any other exception fails the test
        walk(data, 0, len(data), message, WalkContext(), 0)


@FAST
@given(st.binary(max_size=120), st.binary(max_size=120))
def test_random_metadata_with_valid_checksum(metadata: bytes, payload: bytes) -> None:
    _dissect(_frame(6, _key(1, 0) + b"\x00" + _key(2, 0) + b"\x00", _section(metadata, payload)))


COMPRESS = {
    0: lambda b: b,
    1: lambda b: lz4.block.compress(b, store_size=False),
    2: zlib.compress,
    3: lambda b: zstandard.ZstdCompressor().compress(b),
    4: snappy.compress,
}


@FAST
@given(st.lists(st.tuples(st.binary(max_size=30), st.binary(max_size=30)), max_size=5),
       st.integers(0, 8), st.sampled_from(sorted(COMPRESS)), st.integers(-5, 5))
def test_random_batches(entries: list[tuple[bytes, bytes]], count: int, codec: int, size_error: int) -> None:
    raw = b"".join(struct.pack(">I", len(m)) + m + p for m, p in entries)
    body = COMPRESS[codec](raw)
    size = max(0, len(raw) + size_error)
    meta = (_ld(1, b"p") + _key(2, 0) + b"\x00" + _key(3, 0) + b"\x00" + _key(8, 0) + bytes([codec])
            + _key(9, 0) + _varint(size) + _key(11, 0) + _varint(count))
    msg = _dissect(_frame(9, _key(1, 0) + b"\x00" + _ld(2, b"\x08\x01\x10\x02"), _section(meta, body)), False)
    assert msg.summary.startswith("MESSAGE consumer=0")
