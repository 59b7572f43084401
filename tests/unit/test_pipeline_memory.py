"""What the pipeline holds: the decompressed bytes of messages held back or waiting for a
response are bounded capture-wide (the oldest lose their decoded bodies, with a diagnostic),
and closed conversations leave nothing behind."""

from __future__ import annotations

import gc
import struct
import weakref
import zlib

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from pcapgen import SYN, TcpConn, api_versions_with_tags, ethernet, kafka_request, kafka_response, tcp_ip

from kdissect.capture.pcapfile import RawFrame
from kdissect.dissect import matcher
from kdissect.model import Message, secret_ranges
from kdissect.pipeline import Pipeline, output
from kdissect.pipeline.output import KEPT_FIELDS
from kdissect.protocols import dissectors
from kdissect.rocketmq import encode as rocketmq
from kdissect.stream.flow import HELD_EVENT_COST, Conversation
from kdissect.stream.reassembly import MAX_BUFFERED, Buffered

VALUE = 100_000


def produce(corr: int, codec: int = 4, acks: int = 1) -> bytes:
    """Produce v3 of one zstd batch whose record inflates to VALUE bytes (a few hundred on the wire),
    or with `codec` 0 of VALUE bytes on the wire."""
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    b.append(0, 1700000000000, None, bytes(VALUE), [])
    records = bytes(b.build())
    body = struct.pack(">hhi", -1, acks, 30000) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 1)
    body += struct.pack(">ii", 0, len(records)) + records
    return kafka_request(0, 3, corr, "p", body)


PRODUCE_RESPONSE = struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iihqq", 1, 0, 0, 0, -1) + struct.pack(">i", 0)


@pytest.fixture(autouse=True)
def count_at_once(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests feed a few segments: a message held counts from the release after the next."""
    if "count_after" not in request.keywords:
        monkeypatch.setattr(output, "COUNT_AFTER", 1)


def feed(pipe: Pipeline, pkts: list[tuple[float, bytes]]) -> list[Message]:
    out: list[Message] = []
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))
    return out + pipe.finish()


def halves(ts: float, c: TcpConn, data: bytes) -> list[tuple[float, bytes]]:
    """data sent by the client in two segments."""
    half = len(data) // 2
    return [(ts, c.segment(True, data[:half])), (ts, c.segment(True, data[half:]))]


def dropped(m: Message) -> bool:
    return any(d.key == "pipeline.body_dropped" for d in m.diagnostics)


def five_unanswered() -> tuple[Pipeline, list[Message]]:
    """Five Produce requests that are never answered, through a pipeline that holds 250,000 bytes."""
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts += [(100.1 + i, c.segment(True, produce(i))) for i in range(5)]
    pipe = Pipeline()
    pipe.held.limit = 250_000
    return pipe, feed(pipe, pkts)


def test_oldest_held_bodies_are_dropped_past_the_budget() -> None:
    pipe, msgs = five_unanswered()
    assert [dropped(m) for m in msgs] == [True, True, True, False, False]
    assert [m.inflated > VALUE for m in msgs] == [False, False, False, True, True]  # gone with the bodies
    for m in msgs:
        assert m.summary == f"Produce v3 request corr={m.info['corr']} client=p acks=1 t[0:1 record]"
    topics = next(f for f in msgs[0].fields if f.name == "topic_data")
    assert topics.children == [] and topics.label == "topic_data (not kept)"
    kept = next(f for f in msgs[4].fields if f.name == "topic_data")
    assert kept.get("partition_data.records.records.value") == bytes(VALUE)
    d = next(d for d in msgs[0].diagnostics if d.key == "pipeline.body_dropped")
    assert "250000" in d.message


def test_answered_requests_do_not_count() -> None:
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    for i in range(5):
        pkts.append((100.1 + i, c.segment(True, produce(i))))
        pkts.append((100.2 + i, c.segment(False, kafka_response(i, PRODUCE_RESPONSE))))
    pipe = Pipeline()
    pipe.held.limit = 150_000
    msgs = feed(pipe, pkts)
    assert len(msgs) == 10 and not any(dropped(m) for m in msgs)
    assert all(m.match is not None for m in msgs)
    assert pipe.held.total == 0


def test_a_released_request_still_pending_counts_until_answered() -> None:
    c = TcpConn()
    pkts = [(0.0, p) for p in c.handshake()]
    # 200 s apart: each request is released unanswered when the next arrives, and stays pending
    pkts += [(200.0 * (i + 1), c.segment(True, produce(i))) for i in range(3)]
    pipe = Pipeline()
    pipe.held.limit = 250_000
    msgs = feed(pipe, pkts)
    assert [dropped(m) for m in msgs] == [True, False, False]


def test_requests_that_left_unanswered_count_with_their_bytes() -> None:
    # An acks=0 producer's requests leave the output at once and are never answered: the pending
    # table keeps up to thousands of them. Past the budget the oldest lose their bodies and bytes.
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    for i in range(6):
        data = produce(i, codec=0, acks=0)
        pkts += [(100.1 + i, c.segment(True, data[at:at + 50_000])) for at in range(0, len(data), 50_000)]
    pipe = Pipeline()
    pipe.held.limit = 250_000
    msgs: list[Message] = []
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        released = pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))
        assert all(len(m.data) > VALUE and not dropped(m) for m in released)  # whole when they leave
        msgs += released
    msgs += pipe.finish()
    assert [m.inflated for m in msgs] == [0] * 6 and all(not m.expects_response for m in msgs)
    assert [dropped(m) for m in msgs][:3] == [True] * 3 and not dropped(msgs[-1])
    assert all(len(m.data) == 0 for m in msgs if dropped(m)) and len(msgs[-1].data) > VALUE
    assert pipe.held.total <= pipe.held.limit


def test_a_request_never_answered_holds_back_a_bounded_number_of_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The messages behind a request waiting for its response are held back, in capture order, up
    # to HOLD_BYTES of them too: then the request leaves unanswered and the output goes on.
    monkeypatch.setattr(output, "HOLD_BYTES", 250_000)
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts.append((100.05, c.segment(True, kafka_request(18, 0, 99, "a"))))  # never answered
    for i in range(6):
        data = produce(i, codec=0, acks=0)
        pkts += [(100.1 + i, c.segment(True, data[at:at + 50_000])) for at in range(0, len(data), 50_000)]
    pipe = Pipeline()
    released: list[Message] = []
    most = 0
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        released += pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))
        most = max(most, sum(len(m.data) for m in pipe.output.queue))
    assert [m.info["op"] for m in released[:1]] == ["ApiVersions"] and released[0].match is None
    assert len(released) >= 5 and most <= 250_000 + len(released[-1].data)
    assert len(released + pipe.finish()) == 7


def test_held_trees_count_by_their_fields() -> None:
    # Requests held back (never answered) whose trees are far larger than their bytes: each
    # counts by its fields, and past the budget the oldest lose their bodies.
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts += [(100.1 + i, c.segment(True, api_versions_with_tags(i, 5_000))) for i in range(5)]
    pipe = Pipeline()
    pipe.held.limit = 2_500_000
    msgs = feed(pipe, pkts)
    assert all(len(m.data) < 20_000 for m in msgs)
    assert [dropped(m) for m in msgs][:2] == [True, True] and not dropped(msgs[-1])
    assert len(msgs[0].fields) == KEPT_FIELDS + 1 and len(msgs[-1].fields) > 5_000
    assert msgs[0].fields[-1].name == "more"


def test_messages_nothing_keeps_are_forgotten() -> None:
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts += [(100.1 + i, c.segment(True, produce(i))) for i in range(3)]
    pkts += [(104.0, c.fin(True)), (104.1, c.fin(False))]
    pipe = Pipeline()
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))  # the output is not kept
    pipe.finish()
    assert pipe.held.total == 0


@pytest.mark.count_after
def test_requests_waiting_for_nothing_are_not_kept_after_they_leave() -> None:
    # Raw SASL tokens are requests no pending table keeps: the output kept each of them for
    # COUNT_AFTER releases after it left, and 1 MB of one-byte tokens in 60 KB segments held
    # about 200,000 decoded messages at once (338 MB).
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts.append((100.1, c.segment(True, kafka_request(17, 0, 1, "c", struct.pack(">h", 5) + b"PLAIN"))))
    pkts.append((100.2, c.segment(False, kafka_response(1, struct.pack(">hih", 0, 1, 5) + b"PLAIN"))))
    pkts.append((100.3, c.segment(True, (struct.pack(">i", 1) + b"x") * 500)))
    pipe = Pipeline()
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        left = pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))  # the output is not kept
    assert len(left) == 500 and left[0].summary == "SASL token request (1 byte)"
    refs = [weakref.ref(m) for m in left]
    del left
    assert sum(r() is not None for r in refs) == 0


def test_closed_conversations_are_freed_without_the_cycle_collector() -> None:
    pkts: list[tuple[float, bytes]] = []
    for i in range(20):
        c = TcpConn(cport=30000 + i)
        pkts += [(100.0, p) for p in c.handshake()]
        pkts.append((100.1, c.segment(True, kafka_request(18, 0, 1, "a"))))
        pkts.append((100.2, c.segment(False, kafka_response(1, struct.pack(">hi", 0, 0)))))
        pkts += [(100.3, c.fin(True)), (100.4, c.fin(False))]
    gc.collect()
    gc.disable()
    try:
        pipe = Pipeline()
        msgs = feed(pipe, pkts)
        alive = sum(isinstance(o, Conversation) for o in gc.get_objects())
    finally:
        gc.enable()
    assert len(msgs) == 40 and alive == 0
    assert not pipe.output.closed_streams


def test_the_bytes_values_of_held_fields_count() -> None:
    # A body is a copy of its slice of the message's data: each of these requests keeps twice
    # its VALUE bytes, where only its data counted.
    c = TcpConn(sport=10911)
    pkts = [(100.0, p) for p in c.handshake()]
    for i in range(3):
        frame = rocketmq.frame(10, opaque=i, ext={"topic": "t"}, body=bytes(VALUE))
        pkts += [(100.1 + i, c.segment(True, frame[:50_000])), (100.1 + i, c.segment(True, frame[50_000:]))]
    pipe = Pipeline()
    pipe.held.limit = 5 * VALUE
    msgs = feed(pipe, pkts)
    assert [len(m.fields[-1].value or b"") if m.fields[-1].name == "body" else None for m in msgs][1:] == [VALUE] * 2
    assert [dropped(m) for m in msgs] == [True, False, False]


def test_redacted_values_stay_masked_when_a_body_is_dropped() -> None:
    c = TcpConn(sport=10911)
    pkts = [(100.0, p) for p in c.handshake()]
    ext = {"topic": "t", "sysFlag": "1", "Signature": "c2lnbmF0dXJl"}  # sysFlag: COMPRESSED, zlib
    for i in range(3):
        frame = rocketmq.frame(10, opaque=i, ext=ext, body=zlib.compress(bytes(VALUE)))
        pkts.append((100.1 + i, c.segment(True, frame)))
    pipe = Pipeline()
    pipe.held.limit = 150_000
    msgs = feed(pipe, pkts)
    assert [dropped(m) for m in msgs] == [True, True, False]
    for m in msgs:  # (a request that has left the output and lost its body loses its bytes too)
        assert [m.data[at:at + n] for at, n in secret_ranges(m)] == [b"c2lnbmF0dXJl" if m.data else b""]
    assert msgs[-1].data


def test_the_conversations_of_a_capture_share_one_bound_on_pending_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    # Thousands of conversations full of unanswered requests would each keep 1,024 of them (a
    # couple of KB apiece): past the capture's pool each keeps only as many as it holds, its
    # oldest dropped for each new one. The first conversation, which filled the pool, keeps all.
    monkeypatch.setattr(matcher, "MAX_POOLED", 50)
    conns = [TcpConn(cport=41000 + k) for k in range(20)]
    pkts = [(0.0, p) for c in conns for p in c.handshake()]
    pkts += [(1.0, c.segment(True, kafka_request(3, 0, corr, "p", struct.pack(">i", 0)))) for c in conns
             for corr in range(30)]
    answer = struct.pack(">iih", 1, 1, 9) + b"localhost" + struct.pack(">ii", 9092, 0)
    pkts += [(2.0, c.segment(False, kafka_response(corr, answer))) for c in (conns[0], conns[-1]) for corr in range(30)]
    pipe = Pipeline()
    pool = pipe.shared.get(matcher.Pool)
    out: list[Message] = []
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))
        assert pool.held <= 50 + len(conns)
    out += pipe.finish()
    assert (pool.held, pool.noted) == (0, 0)  # given back as the conversations ended
    first = [m for m in out if m.kind == "response" and m.stream == 0]
    last = [m for m in out if m.kind == "response" and m.stream == len(conns) - 1]
    assert len(first) == len(last) == 30
    assert all(m.peer is not None and m.info["op"] == "Metadata" for m in first)
    assert sum(m.peer is not None for m in last) < 30


def zookeeper_multi(xid: int, ops: int) -> bytes:
    """A ZooKeeper multi request of `ops` deletes of the empty path (17 bytes, 6 fields each)."""
    op = struct.pack(">iBi", 2, 0, -1) + struct.pack(">ii", 0, -1)
    body = struct.pack(">ii", xid, 14) + op * ops + struct.pack(">iBi", -1, 1, -1)
    return struct.pack(">i", len(body)) + body


def test_decoded_fields_count_as_well_as_decompressed_bytes() -> None:
    # Nothing is compressed, but each request decodes into 6,000 fields: 60 such requests of a
    # megabyte (60,000 operations) took 2.9 GB and ended in a MemoryError.
    c = TcpConn(sport=2181)
    pkts = [(100.0, p) for p in c.handshake()]
    connect = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + bytes(16)
    pkts.append((100.05, c.segment(True, struct.pack(">i", len(connect)) + connect)))
    pkts += [(100.1 + i, c.segment(True, zookeeper_multi(i + 1, 1000))) for i in range(3)]  # never answered
    pipe = Pipeline()
    pipe.held.limit = 2_000_000
    msgs = feed(pipe, pkts)[1:]
    assert [m.summary for m in msgs] == ["multi delete, delete, delete +997 more"] * 3
    assert [dropped(m) for m in msgs] == [True, False, False]
    assert next(f for f in msgs[0].fields if f.name == "ops").label == "ops (not kept)"
    assert len(next(f for f in msgs[2].fields if f.name == "ops").children or ()) == 1000


def test_conversations_ending_while_a_request_waits_are_not_all_remembered() -> None:
    # A request no response answers holds the output back; meanwhile 1,000,000 conversations
    # (the same ports reused by SYN after SYN, at one capture time) ended, and the output kept
    # the number of each (102 MB for 70 MB).
    c = TcpConn()
    pkts = [(1.0, p) for p in c.handshake()]
    pkts.append((1.0, c.segment(True, kafka_request(3, 1, 7, "x", b"\xff\xff\xff\xff"))))
    pkts += [(1.0, tcp_ip("10.0.0.9", "10.0.0.8", 5555, 6666, 1000 + 7 * i, 0, SYN)) for i in range(5000)]
    pipe = Pipeline()
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        assert pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame))) == []
    assert pipe.tcp.opened == 5001 and len(pipe.output.queue) == 1
    assert len(pipe.output.closed_streams) <= 66
    (msg,) = pipe.finish()
    assert msg.summary.startswith("Metadata v1 request corr=7")


def pulsar_ping(unknown: int) -> bytes:
    """A Pulsar PING with `unknown` fields unknown to the schema (field 100, 3 bytes each) at its root."""
    cmd = b"\x08\x12" + b"\xa0\x06\x01" * unknown
    return struct.pack(">II", 4 + len(cmd), len(cmd)) + cmd


def test_a_dropped_body_keeps_few_fields_at_its_root() -> None:
    # PINGs of 100,000 unknown fields each, at the root of the message, waiting for their PONG:
    # dropping their bodies freed nothing (30 of them, 9 MB, took 1.3 GB).
    c = TcpConn(sport=6650)
    pkts = [(100.0, p) for p in c.handshake()]
    pkts += [(100.1 + i, c.segment(True, pulsar_ping(5000))) for i in range(3)]
    pipe = Pipeline()
    pipe.held.limit = 1_500_000
    msgs = feed(pipe, pkts)
    assert [dropped(m) for m in msgs] == [True, False, False]
    assert len(msgs[0].fields) == KEPT_FIELDS + 1 and len(msgs[1].fields) == 5003
    more = msgs[0].fields[-1]
    assert (more.name, more.label, more.children) == ("more", f"{5003 - KEPT_FIELDS} more fields (not kept)", [])
    assert msgs[0].summary == msgs[1].summary == "PING"


@pytest.mark.count_after
def test_a_request_counts_only_once_held_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    # A request answered within COUNT_AFTER segments never counts (nor walks its tree); one
    # still waiting after them does.
    counted: list[Message] = []
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    pkts += halves(100.1, c, produce(1, codec=0))  # uncompressed: one that decompressed counts at once
    pkts += [(100.2 + i, c.segment(True, kafka_request(18, 0, 100 + i, "a"))) for i in range(output.COUNT_AFTER - 2)]
    pkts.append((100.9, c.segment(False, kafka_response(1, PRODUCE_RESPONSE))))
    pkts += halves(101.0, c, produce(2, codec=0))
    pkts += [(101.1 + i, c.segment(True, kafka_request(18, 0, 200 + i, "a"))) for i in range(output.COUNT_AFTER + 1)]
    pipe = Pipeline()
    add = pipe.held.add
    monkeypatch.setattr(pipe.held, "add", lambda m: (counted.append(m), add(m)))
    feed(pipe, pkts)
    assert [m.info["corr"] for m in counted if m.info.get("op") == "Produce" and m.kind == "request"] == [2]


@pytest.mark.count_after
def test_a_request_that_decompressed_counts_at_once() -> None:
    # Its tree is not bounded by the bytes of the last segments: 30 Produce requests of five
    # gzip message sets of 200,000 empty messages (3 MB) took 810 MB to export while those of
    # the last COUNT_AFTER segments went uncounted, 290 MB now.
    pipe, msgs = five_unanswered()
    assert [dropped(m) for m in msgs] == [True, True, True, False, False]
    assert pipe.held.total <= pipe.held.limit


def metadata_request(corr: int, topics: int, length: int) -> bytes:
    """Metadata v1 naming `topics` distinct topics of `length` characters."""
    names = [(f"{corr:04d}{t:05d}".encode() * length)[:length] for t in range(topics)]
    return kafka_request(3, 1, corr, "m", struct.pack(">i", topics) + b"".join(
        struct.pack(">h", len(n)) + n for n in names))


def test_a_dropped_body_keeps_short_facts_and_summary() -> None:
    # Requests never answered naming many long topics: the summary and the facts (msg.info's
    # topics) stayed whole when the body was dropped, so 300 requests of 100,000 topics (360 MB)
    # took 2.8 GB, and 1,000 naming one topic of 2 MB ended in a MemoryError under 3 GB.
    c = TcpConn()
    pkts = [(100.0, p) for p in c.handshake()]
    for i in range(4):
        data = metadata_request(i, 200, 2_000)
        pkts += [(100.1 + i, c.segment(True, data[at:at + 50_000])) for at in range(0, len(data), 50_000)]
    pipe = Pipeline()
    pipe.held.limit = 1_000_000
    msgs = feed(pipe, pkts)
    assert [dropped(m) for m in msgs] == [True, True, False, False]
    for m in msgs[:2]:
        assert len(m.info["topics"]) == KEPT_FIELDS and m.info["topic"] == m.info["topics"][0]
        assert len(m.info["topic"]) == output.KEPT_TEXT + 1 and m.info["topic"].endswith("…")
        assert len(m.summary) == output.KEPT_TEXT + 1 and m.summary.startswith(f"Metadata v1 request corr={m.info['corr']}")
        assert m.info["op"] == "Metadata" and m.info["client_id"] == "m"
    whole = msgs[-1]
    assert len(whole.info["topics"]) == 200 and len(whole.info["topic"]) == 2_000
    assert len(whole.summary) > output.KEPT_TEXT


def test_what_the_conversations_keep_below_their_messages_is_bounded_capture_wide() -> None:
    # Reassemblers and framers each kept their own out-of-order backlog, delivered bytes and
    # unfinished message: 20 Kafka connections each 50 MB into a 100 MB request (1.7 MB of gzip)
    # took 2.3 GB. They share one pool (Buffered, of the capture's CaptureState), which
    # holds nothing once the conversations ended.
    pipe = Pipeline()
    pool = pipe.shared.get(Buffered)
    pool.limit = 100_000
    pkts: list[tuple[float, bytes]] = []
    conns = [TcpConn(cport=41000 + i, sport=9092 if i % 3 else 5555) for i in range(12)]
    for c in conns:
        pkts += [(1.0, p) for p in c.handshake()]
        pkts.append((1.0, c.segment(True, kafka_request(18, 0, 1, "p", bytes(60_000))[:5_000])))
    for _ in range(6):
        for c in conns:
            pkts.append((2.0, c.segment(True, bytes(5_000))))
            pkts.append((2.0, c.segment(True, bytes(5_000), seq=c.seq[True] + 20_000, advance=False)))
    out: list[Message] = []
    for i, (ts, p) in enumerate(pkts):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, ts, 1, frame, len(frame)))
        assert pool.used <= pool.limit + 5_000
    out += pipe.finish()
    assert pool.used == 0
    assert any(d.key == "framing.unbuffered" for m in out for d in m.diagnostics)



def test_the_events_detection_holds_count_in_the_pool() -> None:
    # Conversations on a port of no protocol hold what they send while the probes find nothing,
    # and what they held did not count in the pool: 10,000 of them sending 16,000 bytes of zeros
    # in four segments (0.7 MB of gzip) kept 438 MB. Past the pool, a conversation that holds
    # more is given up; nothing stays counted once they ended.
    pipe = Pipeline()
    pool = pipe.shared.get(Buffered)
    pool.limit = 50_000
    conns = [TcpConn(cport=41000 + i, sport=5555) for i in range(10)]
    pkts = [p for c in conns for p in c.handshake()]
    for _ in range(4):
        pkts += [c.segment(True, bytes(4_000)) for c in conns]
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        assert pipe.feed(RawFrame(i + 1, 1.0, 1, frame, len(frame))) == []
        assert pool.used <= pool.limit + 4_000 + HELD_EVENT_COST
    ignored = [c.ignored for c in pipe.tcp.open.values()]
    assert any(ignored) and not all(ignored)
    pipe.finish()
    assert pool.used == 0

def test_the_pool_below_the_messages_fits_the_largest_message_and_less_than_the_output_holds() -> None:
    # What the framers keep below the messages comes on top of the messages the output holds:
    # at 256 MiB each, 12 Kafka connections 30 MB into 100 MB requests (1 MB of gzip) took 563 MB
    # to read, at 128 MiB 484 MB.
    largest = max(d.max_frame for d in dissectors())
    assert largest <= MAX_BUFFERED < output.HELD_BYTES
