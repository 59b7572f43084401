"""The pipeline end to end on synthesized traffic: conversations, matching, ordering."""

from __future__ import annotations

import struct

from pcapgen import ACK, SYN, TcpConn, ethernet, kafka_request, kafka_response, tcp_ip
from tests_support_pipeline import run_packets

from kdissect.capture.pcapfile import RawFrame
from kdissect.dissect.base import Dissector
from kdissect.model import Message
from kdissect.pipeline import Pipeline
from kdissect.pipeline.detect import MAX_UNDECIDED_EVENTS
from kdissect.protocols import DissectorRegistry
from kdissect.stream.flow import PROBE_BYTES

API_VERSIONS_V0_RESPONSE = struct.pack(">hi", 0, 0)  # error 0, no api keys
PRODUCE_ACKS0 = struct.pack(">hii", 0, 1000, 0)  # acks=0, timeout, no topics


def run(pkts: list[bytes], registry: DissectorRegistry | None = None) -> list[Message]:
    return run_packets(pkts, registry)


def test_request_and_response_are_linked_with_the_response_time() -> None:
    c = TcpConn()
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(18, 0, 7, "app")))
    pkts.append(c.segment(False, kafka_response(7, API_VERSIONS_V0_RESPONSE)))
    req, resp = run(pkts)
    assert (req.kind, resp.kind) == ("request", "response")
    assert req.summary.startswith("ApiVersions v0 request corr=7 client=app")
    assert resp.match is not None and req.match is not None
    assert resp.match.frame == req.frame == 4 and req.match.frame == resp.frame == 5
    assert abs(resp.match.rtt - 0.01) < 1e-9
    assert (req.src, req.dst) == ("10.0.0.1:40000", "10.0.0.2:9092")
    assert (req.number, resp.number) == (1, 2)


def test_produce_acks0_does_not_wait_for_a_response() -> None:
    c = TcpConn()
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(0, 2, 1, "p", PRODUCE_ACKS0)))
    pipe = Pipeline()
    released: list[Message] = []
    for i, p in enumerate(pkts):
        released += pipe.feed(RawFrame(i + 1, float(i), 1, ethernet(p), 0))
    assert len(released) == 1 and released[0].expects_response is False
    assert released[0].info["acks"] == 0


def test_output_holds_requests_until_answered_in_capture_order() -> None:
    c = TcpConn()
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(18, 0, 1) + kafka_request(18, 0, 2)))
    pkts.append(c.segment(False, kafka_response(2, API_VERSIONS_V0_RESPONSE)))
    pkts.append(c.segment(False, kafka_response(1, API_VERSIONS_V0_RESPONSE)))
    msgs = run(pkts)
    assert [(m.kind, m.info["corr"]) for m in msgs] == [
        ("request", 1), ("request", 2), ("response", 2), ("response", 1)]
    assert all(m.match is not None for m in msgs)


def test_new_syn_after_fin_starts_a_new_conversation() -> None:
    pkts: list[bytes] = []
    for corr in (1, 2):
        c = TcpConn(isn_c=corr * 100000)
        pkts += c.handshake()
        pkts.append(c.segment(True, kafka_request(18, 0, corr)))
        pkts.append(c.segment(False, kafka_response(corr, API_VERSIONS_V0_RESPONSE)))
        pkts += [c.fin(True), c.fin(False)]
    msgs = run(pkts)
    assert [m.stream for m in msgs] == [0, 0, 1, 1]
    assert all(m.match is not None for m in msgs)


def test_capture_starting_mid_connection() -> None:
    c = TcpConn(isn_c=0xFFFFFFF0)
    c.handshake()  # not captured
    partial = kafka_request(3, 1, 40, "x", b"\x00" * 30)[-12:]
    pkts = [c.segment(True, partial), c.segment(True, kafka_request(3, 1, 41, "cid", b"\xff\xff\xff\xff")),
            c.segment(True, kafka_request(3, 1, 42, "cid", b"\xff\xff\xff\xff"))]
    msgs = run(pkts)
    assert [m.info.get("corr") for m in msgs if m.kind == "request"] == [41, 42]


def test_kafka_on_an_unknown_port_is_found_by_its_probe() -> None:
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    # ApiVersions v3: header tags, then compact strings client_software_name/version, body tags.
    body = b"\x00" + b"\x0blibrdkafka" + b"\x062.3.0" + b"\x00"
    pkts.append(c.segment(True, kafka_request(18, 3, 1, "rdkafka", body)))
    pkts.append(c.segment(False, kafka_response(1, b"\x00\x00\x00\x00")))
    msgs = run(pkts)
    assert [m.protocol for m in msgs] == ["kafka", "kafka"]


def test_decode_as_overrides_the_port_table() -> None:
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(18, 0, 1)))
    msgs = run(pkts, DissectorRegistry(decode_as={34567: "kafka"}))
    assert msgs[0].protocol == "kafka"


def test_header_lookalike_that_does_not_decode_is_not_kafka() -> None:
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    # A Kafka-shaped header (Produce v12, empty client id) followed by bytes no schema accepts.
    pkts.append(c.segment(True, kafka_request(0, 12, 0, "", b"\x00" * 40)))
    assert run(pkts) == []


def test_traffic_of_no_known_protocol_is_skipped() -> None:
    c = TcpConn(sport=8080)
    pkts = c.handshake()
    pkts.append(c.segment(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    pkts.append(c.segment(False, b"HTTP/1.1 200 OK\r\n\r\n"))
    assert run(pkts) == []


def test_midstream_request_with_bytes_after_its_body_is_kept_with_its_response() -> None:
    # Captured mid-connection (no SYN): an ApiVersions v0 request whose length prefix covers
    # four zero bytes after the (empty) body, as some clients send, and its response.
    c = TcpConn()
    req = kafka_request(18, 0, 168, "rdkafka", b"\x00" * 4)
    resp = kafka_response(168, struct.pack(">hi", 0, 1) + struct.pack(">hhh", 3, 0, 12))
    msgs = run([c.segment(True, req), c.segment(False, resp)])
    assert [m.summary for m in msgs] == [
        "ApiVersions v0 request corr=168 client=rdkafka",
        "ApiVersions v0 response corr=168 1 apis",
    ]
    assert [d.key for d in msgs[0].diagnostics] == ["kafka.trailing_bytes"]
    assert msgs[1].peer is msgs[0]
    assert not any(d.key == "framing.resync" for m in msgs for d in m.diagnostics)


def test_midstream_responses_without_requests_are_framed_from_the_first_segment() -> None:
    c = TcpConn()
    body = struct.pack(">hi", 0, 1) + struct.pack(">hhh", 3, 0, 12)
    pkts = [c.segment(False, kafka_response(140, body)), c.segment(False, kafka_response(141, body))]
    msgs = run(pkts)
    assert [(m.kind, m.info.get("corr")) for m in msgs] == [("response", 140), ("response", 141)]
    assert not any(d.key == "framing.resync" for m in msgs for d in m.diagnostics)


def test_counters_say_what_was_not_decoded() -> None:
    from kdissect.analysis.coverage import notes

    pipe = Pipeline()
    pkts: list[tuple[int, bytes]] = [(147, b"\x00" * 40), (147, b"\x00" * 40), (1, ethernet(b"\x60" + b"\x00" * 50))]
    tls = TcpConn(sport=9093, cport=40001)
    pkts += [(1, ethernet(p)) for p in tls.handshake() + [tls.segment(True, b"\x16\x03\x01\x00\x05hello")]]
    mid = TcpConn(sport=45000, cport=2888)  # no SYN: the lower port is taken as the server's
    pkts += [(1, ethernet(mid.segment(False, b"\x00\x01\x02\x03")))]
    kafka = TcpConn(sport=9092, cport=40002)
    pkts += [(1, ethernet(p)) for p in kafka.handshake()]
    for i, (lt, data) in enumerate(pkts):
        pipe.feed(RawFrame(i + 1, 1.0 + i, lt, data, len(data)))
    pipe.finish()
    c = pipe.counters
    assert (c.frames, c.tcp_segments, c.conversations, c.messages, c.recognised) == (11, 8, 3, 0, 0)
    assert c.unsupported_links == {147: 2}
    assert {k: (t.conversations, t.segments) for k, t in c.undecoded.items()} == {
        (9093, "TLS"): (1, 4), (2888, ""): (1, 1)}
    lines = notes(c, "x.pcap")
    assert lines[0] == "warning: x.pcap: link type 147 is not supported; 2 frames skipped"
    assert lines[1].startswith("note: x.pcap: 8 TCP segments in 3 conversations (and 1 frame that is not TCP), "
                               "none recognised; busiest server ports: 9093 TLS (1 conversation, 4 segments), "
                               "2888 (1 conversation, 1 segment); ")
    assert "port 9093 carries TLS: decrypt it with --tls-keylog FILE (an NSS key log)" in lines[1]
    assert "ZooKeeper quorum (ZAB)" in lines[1]


class CountingRegistry(DissectorRegistry):
    """The default registry, counting the heads it is asked to probe."""

    def __init__(self) -> None:
        super().__init__()
        self.probes: list[int] = []

    def probe(self, head: bytes) -> tuple[Dissector, float] | None:
        self.probes.append(len(head))
        return super().probe(head)


def test_detection_probes_a_head_again_only_once_it_has_grown() -> None:
    # A Kafka-shaped request no schema accepts fills the whole head (4 KiB) at once, then the
    # client sends a byte at a time on a port of no protocol: each probe of that head decodes
    # the request again, and it does not change, so it is probed once (14 s for 880 KB before).
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    request = kafka_request(0, 12, 0, "", b"\x00" * 3000)
    pkts.append(c.segment(True, request + b"\x00" * (PROBE_BYTES - len(request))))
    pkts += [c.segment(True, b"\x00") for _ in range(500)]
    registry = CountingRegistry()
    assert run(pkts, registry) == []
    assert registry.probes == [PROBE_BYTES]


def test_detection_probes_a_growing_head_again_once_it_grew_by_an_eighth() -> None:
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    pkts += [c.segment(True, b"\x00") for _ in range(40)]
    pkts += [c.segment(True, b"") for _ in range(10)]  # no data: nothing new to probe
    registry = CountingRegistry()
    assert run(pkts, registry) == []
    # every size below 16 bytes, then an eighth more each time, and what the end left (40)
    assert registry.probes == [*range(8, 17), 18, 20, 22, 24, 27, 30, 33, 37, 40]


def test_detection_decodes_a_whole_first_request_again_at_a_few_sizes_only() -> None:
    # A Kafka-shaped request no schema accepts (2 KB), then a byte a segment on a port of no
    # protocol: the Kafka probe decoded the request again at each of the 2,049 sizes the head
    # grew through to 4 KiB (4 connections of 150 KB each: 3.3 s of CPU for 0.6 MB).
    c = TcpConn(sport=34567)
    pkts = c.handshake()
    request = kafka_request(3, 0, 1, "cc", struct.pack(">i", 678) + b"\x00\x01t" * 676)  # 2 topics short
    assert len(request) == 2048
    pkts.append(c.segment(True, request))
    pkts += [c.segment(True, b"\x00") for _ in range(PROBE_BYTES - len(request) + 100)]
    registry = CountingRegistry()
    assert run(pkts, registry) == []
    assert registry.probes == [2048, 2304, 2592, 2916, 3280, 3690, 4096]


def test_a_conversation_that_ends_between_two_probes_is_probed_at_its_end() -> None:
    # A request that the probes take only whole (49 bytes), sent a byte at a time on a port of no
    # protocol: the head was last probed at 46 bytes; the end probes it whole.
    class WholeOnly(CountingRegistry):
        def probe(self, head: bytes) -> tuple[Dissector, float] | None:
            super().probe(head)
            return (self.dissectors[0], 1.0) if len(head) >= 49 else None

    request = kafka_request(18, 0, 1, "x" * 35)
    assert len(request) == 49
    c = TcpConn(sport=34567)
    pkts = c.handshake() + [c.segment(True, request[i : i + 1]) for i in range(len(request))]
    registry = WholeOnly()
    (msg,) = run(pkts, registry)
    assert registry.probes[-2:] == [46, 49]
    assert msg.summary.startswith("ApiVersions v0 request corr=1")


def test_detection_gives_up_on_a_conversation_of_gaps() -> None:
    # The server acknowledges a byte the client never showed in each of its segments: each is a
    # gap in the client's stream, no data, and was held for as long as the conversation lasted.
    c = TcpConn(sport=34567)
    pipe = Pipeline()
    pkts = [tcp_ip(c.c, c.s, c.cport, c.sport, 1000, 0, SYN)]
    pkts += [tcp_ip(c.s, c.c, c.sport, c.cport, 5000, 1002 + i, ACK) for i in range(MAX_UNDECIDED_EVENTS + 10)]
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        assert pipe.feed(RawFrame(i + 1, 1.0 + i * 0.001, 1, frame, len(frame))) == []
    (conv,) = pipe.tcp.open.values()
    assert conv.ignored and conv.held == [[], []]
    assert pipe.finish() == []


def test_a_conversation_whose_first_bytes_were_lost_is_decoded_from_its_backlog_at_its_end() -> None:
    # The SYN was seen, the first data segment lost and nothing acknowledged (a capture of one
    # direction): every later segment waited in the backlog, which the end delivered only to a
    # conversation already decoding, so none of its messages was output.
    c = TcpConn()
    pkts = c.handshake()[:1]
    c.seq[True] += 1
    reqs = [kafka_request(18, 0, corr, "app") for corr in range(4)]
    c.segment(True, reqs[0])  # lost
    pkts += [c.segment(True, r) for r in reqs[1:]]
    msgs = run(pkts)
    assert [m.summary.split(" corr=")[1][:1] for m in msgs[-3:]] == ["1", "2", "3"]
    assert any(d.key == "tcp.gap" for m in msgs for d in m.diagnostics)
