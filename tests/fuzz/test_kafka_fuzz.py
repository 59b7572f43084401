"""Hypothesis fuzzing of the Kafka dissector: random bytes and mutations of real messages give
diagnostics only, never another exception, in bounded time."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import SHARED_CAPTURES

from kdissect.dissect.base import Options, run_dissector
from kdissect.kafka.apis import APIS
from kdissect.kafka.dissector import DISSECTOR
from kdissect.model import Message, Pdu
from kdissect.protocols import DissectorRegistry

CAPTURES = SHARED_CAPTURES / "kafka"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _real_messages() -> list[tuple[bytes, bool, int, int]]:
    """(bytes, to_server, api_key, version) of real messages from a few captures."""
    from kdissect.pipeline import dissect_file

    out: list[tuple[bytes, bool, int, int]] = []
    for name in ("gen__mock_ck_consumer_group.pcap", "gen__mock_kp_api_0_8_2.pcap",
                 "deepflowio__deepflow__01-fetch-v12-ok.pcap", "gen__mock_ck_admin.pcap"):
        path = CAPTURES / name
        if not path.exists():
            continue
        side = path.with_suffix(".json")
        ports = json.loads(side.read_text())["ports"] if side.exists() else []
        reg = DissectorRegistry(decode_as={int(p): "kafka" for p in ports})
        for m in dissect_file(str(path), reg):
            if m.protocol == "kafka" and "op_code" in m.info:
                out.append((m.data, m.to_server, m.info["op_code"], m.info["version"]))
    return out[:400]


REAL = _real_messages()


def run(data: bytes, to_server: bool, api_key: int = 0, version: int = 0) -> Message:
    state = DISSECTOR.new_state()
    if not to_server:  # a pending request so that the body is decoded
        req = Message(Pdu(b"", [0], 0.0, 0.0, True), 0, "c", "s", "kafka")
        corr = int.from_bytes(data[4:8], "big", signed=True) if len(data) >= 8 else 0
        req.info.update(op_code=api_key, version=version, corr=corr)
        state.pending.add(corr, req)
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "kafka")
    start = time.perf_counter()
    run_dissector(DISSECTOR, msg, state, Options(max_decompressed=1 << 20))
    assert time.perf_counter() - start < 2.0
    return msg


@SETTINGS
@given(st.binary(max_size=300), st.booleans(), st.sampled_from(sorted(APIS)), st.integers(0, 20))
def test_random_bytes(data: bytes, to_server: bool, api_key: int, version: int) -> None:
    run(len(data).to_bytes(4, "big") + data, to_server, api_key, version)


@SETTINGS
@given(st.sampled_from(sorted(APIS)), st.integers(0, 20), st.binary(max_size=200))
def test_random_bodies_behind_valid_headers(api_key: int, version: int, body: bytes) -> None:
    head = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x07\x00\x01c"
    run(len(head + body).to_bytes(4, "big") + head + body, True)
    run(len(body) .to_bytes(4, "big") + b"\x00\x00\x00\x07" + body, False, api_key, version)


@pytest.mark.skipif(not REAL, reason="shared captures not available")
@SETTINGS
@given(st.data())
def test_mutations_of_real_messages(data: st.DataObject) -> None:
    raw, to_server, api_key, version = data.draw(st.sampled_from(REAL))
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(4, max(4, len(buf) - 1)))
        if i < len(buf):
            buf[i] = data.draw(st.integers(0, 255))
    run(bytes(buf), to_server, api_key, version)
