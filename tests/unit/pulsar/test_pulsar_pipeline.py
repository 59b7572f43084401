"""Pulsar through the whole pipeline on synthesized TCP: detection, resynchronisation."""

from __future__ import annotations

from pcapgen import TcpConn, ethernet
from pulsar_testlib import CONNECT, CONNECTED, FLOW, LOOKUP, LOOKUP_RESPONSE, PING, PONG, pb, simple

from kdissect.capture.pcapfile import RawFrame
from kdissect.model import Message
from kdissect.pipeline import Pipeline

TOPIC = "persistent://public/default/t"


def _run(pkts: list[bytes]) -> list[Message]:
    pipe = Pipeline()
    out: list[Message] = []
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, 100.0 + i * 0.01, 1, frame, len(frame)))
    return out + pipe.finish()


def test_found_by_probe_on_another_port() -> None:
    c = TcpConn(sport=16650)
    pkts = c.handshake()
    pkts.append(c.segment(True, simple(CONNECT, pb((1, "cli"), (4, 21)))))
    pkts.append(c.segment(False, simple(CONNECTED, pb((1, "srv"), (2, 21)))))
    msgs = _run(pkts)
    assert [(m.protocol, m.info.get("op")) for m in msgs] == [("pulsar", "CONNECT"), ("pulsar", "CONNECTED")]
    assert msgs[1].match is not None and msgs[1].match.frame == msgs[0].frame


def test_capture_starting_mid_connection_resynchronises() -> None:
    c = TcpConn(sport=6650)
    c.handshake()  # not captured
    tail = simple(LOOKUP, pb((1, TOPIC), (2, 1)))[-9:]
    pkts = [
        c.segment(True, tail + simple(FLOW, pb((1, 0), (2, 10)))),
        c.segment(True, simple(LOOKUP, pb((1, TOPIC), (2, 2)))),
        c.segment(False, simple(LOOKUP_RESPONSE, pb((1, "pulsar://b:6650"), (3, 1), (4, 2)))),
        c.segment(False, simple(PING)),
        c.segment(True, simple(PONG)),
    ]
    msgs = [m for m in _run(pkts) if m.protocol == "pulsar"]
    ops = [m.info.get("op") for m in msgs]
    assert ops == ["FLOW", "LOOKUP", "LOOKUP_RESPONSE", "PING", "PONG"]
    assert msgs[2].summary == f"LOOKUP {TOPIC} → broker pulsar://b:6650"
    assert msgs[4].match is not None and msgs[4].match.frame == msgs[3].frame
