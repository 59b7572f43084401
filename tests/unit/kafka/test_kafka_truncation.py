"""Truncating real Kafka messages at every offset yields diagnostics, never another exception."""

from __future__ import annotations

import pytest
from kafka_captures import messages

from kdissect.dissect.base import Options, run_dissector
from kdissect.kafka.dissector import DISSECTOR
from kdissect.model import Message, Pdu

SAMPLES = [
    ("deepflowio__deepflow__00-produce-v9.pcap", ("Produce",)),
    ("deepflowio__deepflow__01-fetch-v12-ok.pcap", ("Fetch",)),
    ("deepflowio__deepflow__11-join-group-v7.pcap", ("JoinGroup",)),
    ("gen__mock_ck_consumer_group.pcap", ("SyncGroup", "Metadata")),
    ("gen__mock_kp_api_0_8_2.pcap", ("Produce", "OffsetCommit")),
]


def dissect(data: bytes, to_server: bool, request: Message | None) -> Message:
    state = DISSECTOR.new_state()
    if request is not None:
        state.pending.add(request.info["corr"], request)
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "kafka")
    run_dissector(DISSECTOR, msg, state, Options())
    return msg


@pytest.mark.parametrize(("name", "ops"), SAMPLES)
def test_truncation_at_every_offset(name: str, ops: tuple[str, ...]) -> None:
    picked: dict[tuple[str, str], Message] = {}
    for m in messages(name):
        if m.info.get("op") in ops:
            picked.setdefault((m.info["op"], m.kind), m)
    assert picked
    for m in picked.values():
        req = m.peer if m.kind == "response" else None
        full = dissect(m.data, m.kind == "request", req)
        assert not [d for d in full.diagnostics if d.severity.value == "error"]
        for n in range(len(m.data)):
            cut = dissect(m.data[:n], m.kind == "request", req)
            assert cut.diagnostics, (name, m.kind, n)
