from __future__ import annotations

import struct

from pulsar_testlib import CONNECT, FLOW, PING, SEND, keys, payload_frame, pb, run, simple, value

from kdissect.model import Group, Severity
from kdissect.pulsar.dissector import DISSECTOR, MAX_FRAME


def test_identity() -> None:
    assert DISSECTOR.name == "pulsar" and DISSECTOR.ports == (6650, 6651)
    assert 5 * 1024 * 1024 <= DISSECTOR.max_frame == MAX_FRAME < 6 * 1024 * 1024


def test_probe_scores() -> None:
    connect = simple(CONNECT, pb((1, "Pulsar-CPP"), (4, 21)))
    assert DISSECTOR.probe(connect) >= 0.9
    assert DISSECTOR.probe(simple(PING)) >= 0.9
    assert DISSECTOR.probe(simple(CONNECT, None)) == 0.6  # type known, body tag absent
    assert DISSECTOR.probe(b"") == 0.0
    assert DISSECTOR.probe(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == 0.0
    assert DISSECTOR.probe(struct.pack(">II", 10, 20) + b"\x08\x02" * 4) == 0.0  # commandSize > totalSize
    assert DISSECTOR.probe(struct.pack(">II", 10, 6) + b"\x08\x63" + b"\x00" * 4) == 0.0  # type 99 unknown
    assert DISSECTOR.probe(struct.pack(">II", 10, 6) + b"\x10\x02" + b"\x00" * 4) == 0.0  # not field 1
    assert DISSECTOR.probe(struct.pack(">II", MAX_FRAME + 1, 6) + b"\x08\x02\x12\x00") == 0.0
    for cut in range(len(connect)):
        assert 0.0 <= DISSECTOR.probe(connect[:cut]) <= 1.0


def test_probe_boundary() -> None:
    st = DISSECTOR.new_state()
    assert DISSECTOR.probe_boundary(simple(FLOW, pb((1, 0), (2, 10))), True, st)
    assert not DISSECTOR.probe_boundary(b"\x00\x00\x00\x05hello", True, st)


def test_framer_splits_frames() -> None:
    framer = DISSECTOR.new_framer(True)
    a, b = simple(PING), simple(FLOW, pb((1, 0), (2, 5)))
    stream = a + b
    pdus = framer.feed(stream[:7], 1, 0.0) + framer.feed(stream[7:], 2, 0.1)
    assert [p.data for p in pdus] == [a, b]


def test_command_size_larger_than_total_is_malformed() -> None:
    msg = run(struct.pack(">II", 6, 9) + b"\x08\x12")
    assert msg.diagnostics[-1].key == "pulsar.badlength" and msg.diagnostics[-1].severity == Severity.ERROR
    assert value(msg, "total_size") == 6


def test_unknown_type_and_missing_body() -> None:
    msg = run(simple(99, None))
    assert "pulsar.unknown_command" in keys(msg)
    assert msg.summary == "UNKNOWN(99)" and msg.info["op_code"] == 99
    flow = run(simple(FLOW, None))
    assert "pulsar.missing_body" in keys(flow)
    assert flow.summary == "FLOW"


def test_trailing_bytes_after_a_simple_command() -> None:
    frame = simple(FLOW, pb((1, 0), (2, 5)))
    data = struct.pack(">I", int.from_bytes(frame[:4], "big") + 3) + frame[4:] + b"xyz"
    msg = run(data)
    assert value(msg, "trailing") == b"xyz"
    d = next(d for d in msg.diagnostics if d.key == "pulsar.trailing")
    assert d.group == Group.UNDECODED


def test_truncated_payload_keeps_the_command() -> None:
    frame = payload_frame(SEND, pb((1, 1), (2, 2)), pb((1, "p"), (2, 2), (3, 3)), b"payload")
    msg = run(frame[:-10])
    assert msg.summary.startswith("SEND producer=1 seq=2")
    assert any(d.severity == Severity.ERROR for d in msg.diagnostics)
    assert value(msg, "send.producer_id") == 1


def test_info_facts() -> None:
    msg = run(simple(CONNECT, pb((1, "c"), (4, 21))))
    assert msg.info["op"] == "CONNECT" and msg.info["op_code"] == 2 and msg.info["version"] == 21
    assert msg.info["error"] is None and msg.info["error_code"] is None
