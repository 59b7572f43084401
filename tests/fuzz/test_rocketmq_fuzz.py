"""Hypothesis fuzzing of the RocketMQ dissector: random bytes, every truncation and random
mutations of real-looking frames yield diagnostics, never another exception."""

from __future__ import annotations

import contextlib
import struct
import zlib

import lz4.frame
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kdissect.dissect.base import Options, run_dissector
from kdissect.errors import DecodeError
from kdissect.model import Message, Pdu
from kdissect.rocketmq import encode as enc
from kdissect.rocketmq.dissector import DISSECTOR
from kdissect.rocketmq.ljson import parse

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPTS = Options(max_decompressed=1 << 16)


def _samples() -> list[tuple[bytes, bool]]:
    v2 = {"a": "PG", "b": "orders", "e": "3", "f": "0", "g": "1700000000000", "i": enc.properties({"KEYS": "k"})}
    stored = enc.stored_message("orders", zlib.compress(b"abc" * 20), sysflag=0x301, props={"TAGS": "t"})
    stored += enc.stored_message("orders", enc.batch([(b"x", {"A": "1"})]), sysflag=0xC0, born=("::1", 1))
    packed = enc.stored_message("o", lz4.frame.compress(b"l" * 64), sysflag=0x101, magic_v2=True)
    packed += enc.stored_message("o", zstandard.ZstdCompressor().compress(b"z" * 64), sysflag=0x201, store=("::2", 9))
    route = b'{"brokerDatas":[{"brokerAddrs":{0:"h:1"}}],"t":{{"a":1}:2}}'
    return [
        (enc.frame(310, opaque=1, ext=v2, body=b"hello"), True),
        (enc.frame(310, opaque=1, ext=v2, body=b"hello", serialize=enc.SERIALIZE_JSON), True),
        (enc.frame(320, opaque=2, ext=v2, body=enc.batch([(b"a", {"K": "v"}), (b"b", {})])), True),
        (enc.frame(11, opaque=3, ext={"topic": "orders", "queueId": "1"}), True),
        (enc.frame(0, opaque=3, flag=1, ext={"nextBeginOffset": "2"}, body=stored), False),
        (enc.frame(0, opaque=4, flag=1, body=route, serialize=enc.SERIALIZE_JSON), False),
        (enc.frame(309, opaque=5, body=stored), False),
        (enc.frame(0, opaque=3, flag=1, body=packed, serialize=enc.SERIALIZE_JSON), False),
    ]


SAMPLES = _samples()


def _dissect(data: bytes, to_server: bool, state: object | None = None) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "rocketmq")
    st_ = state if state is not None else DISSECTOR.new_state()
    run_dissector(DISSECTOR, msg, st_, OPTS)  # type: ignore[arg-type]
    return msg


def _primed(data: bytes, to_server: bool) -> Message:
    """Dissect with every sample request pending, so responses are decoded by request code."""
    state = DISSECTOR.new_state()
    for sample, side in SAMPLES:
        if side:
            _dissect(sample, True, state)
    return _dissect(data, to_server, state)


@FAST
@given(st.binary(max_size=512), st.booleans())
def test_random_bytes(data: bytes, to_server: bool) -> None:
    _dissect(data, to_server)
    DISSECTOR.probe(data)
    DISSECTOR.probe_boundary(data, to_server, DISSECTOR.new_state())


@FAST
@given(st.binary(max_size=300), st.sampled_from([0, 1]), st.booleans())
def test_random_headers_with_valid_framing(header: bytes, serialize: int, to_server: bool) -> None:
    data = struct.pack(">II", 4 + len(header), (serialize << 24) | len(header)) + header
    _primed(data, to_server)


def test_every_truncation() -> None:
    for data, to_server in SAMPLES:
        for cut in range(len(data)):
            part = data[:cut]
            msg = _primed(part, to_server)
            assert cut < 8 or msg.diagnostics or not part[8:], (cut, msg.summary)


@FAST
@given(st.sampled_from(range(len(SAMPLES))), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8))
def test_mutations(index: int, edits: list[tuple[int, int]]) -> None:
    data, to_server = SAMPLES[index]
    buf = bytearray(data)
    for pos, value in edits:
        buf[pos % len(buf)] = value
    _primed(bytes(buf), to_server)


@FAST
@given(st.binary(max_size=200))
def test_lenient_json_raises_only_decode_errors(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        parse(data)


@FAST
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
                    max_leaves=20))
def test_lenient_json_reads_strict_json(value: object) -> None:
    import json

    node, trailing = parse(json.dumps(value).encode())
    assert trailing == 0
    assert node.plain() == value
