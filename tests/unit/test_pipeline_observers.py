"""Observers of the pipeline are told of each conversation's end, with what was decoded."""

from __future__ import annotations

import struct

from pcapgen import TcpConn, ethernet, kafka_request, kafka_response

from kdissect.analysis.conversations import describe
from kdissect.capture.pcapfile import RawFrame
from kdissect.pipeline import Decoding, FlowFilter, Pipeline
from kdissect.stream.flow import Conversation


class Ended:
    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        self.rows.append(describe(conv))


def _pkts() -> list[bytes]:
    kafka = TcpConn(cport=40000)
    pkts = kafka.handshake()
    pkts += [kafka.segment(True, kafka_request(18, 0, 1, "a")),
             kafka.segment(False, kafka_response(1, struct.pack(">hi", 0, 0))),
             kafka.fin(True), kafka.fin(False)]
    other = TcpConn(cport=40001, sport=8080)
    return pkts + [*other.handshake(), other.segment(True, b"GET / HTTP/1.1\r\n\r\n")]


def _run(flow_filter: FlowFilter | None = None) -> tuple[int, list[dict[str, object]]]:
    ended = Ended()
    pipe = Pipeline(flow_filter=flow_filter, observers=[ended])
    out = []
    for i, p in enumerate(_pkts()):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, 1.0 + i, 1, frame, len(frame)))
    return len(out + pipe.finish()), ended.rows


def test_each_conversation_end_is_observed() -> None:
    n, rows = _run()
    assert n == 2
    assert [(r["stream"], r["protocol"], r["messages"], r["packets"]) for r in rows] == [
        (0, "kafka", 2, 7), (1, None, 0, 4)]
    assert rows[0]["client"] == "10.0.0.1:40000" and rows[0]["server"] == "10.0.0.2:9092"


def test_conversations_the_flow_filter_leaves_to_others_are_not_observed() -> None:
    n, rows = _run(flow_filter=lambda a, b: 8080 in (a[1], b[1]))
    assert n == 0 and [r["stream"] for r in rows] == [1]
