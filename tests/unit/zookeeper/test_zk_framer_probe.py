"""The ZooKeeper framer (binary packets, four-letter-word text mode) and the probes."""

from __future__ import annotations

from zkutil import buf, frame, i32, i64, reply, request, started, ustr

from kdissect.stream.reassembly import Buffered
from kdissect.zookeeper.dissector import DISSECTOR
from kdissect.zookeeper.framer import TextLink, ZkFramer

MAX = DISSECTOR.max_frame


def pair(synced: bool = True) -> tuple[ZkFramer, ZkFramer]:
    link = TextLink()
    c, s = ZkFramer(MAX, True, link), ZkFramer(MAX, False, link)
    for f in (c, s):
        f.set_probe(None, synced)
    return c, s


def test_binary_packets_split_across_chunks() -> None:
    c, _ = pair()
    first, ping = request(1, 4, ustr("/a") + b"\0"), request(-2, 11)
    data = first + ping
    out = c.feed(data[:3], 1, 0.1) + c.feed(data[3:20], 2, 0.2) + c.feed(data[20:], 3, 0.3)
    assert [p.data for p in out] == [first, ping]
    assert out[0].frames == [1, 2] and out[1].frames == [2, 3]
    assert c.flush() == []


def test_four_letter_word_switches_both_directions_to_text() -> None:
    c, s = pair()
    [req] = c.feed(b"stat\n", 4, 1.0)
    assert req.data == b"stat\n"
    assert s.feed(b"Zookeeper version: 3.8.0\n", 7, 1.1) == []
    assert s.feed(b"Clients:\n", 8, 1.2) == []
    [resp] = s.flush()
    assert resp.data == b"Zookeeper version: 3.8.0\nClients:\n"
    assert resp.frames == [7, 8] and (resp.ts, resp.ts_end) == (1.1, 1.2)


def test_a_text_reply_counts_in_the_pool_and_goes_out_past_it() -> None:
    # A reply to a four-letter word is kept whole until the connection ends (or 4 MB), and it
    # counted nowhere: 150 connections each answered 4 MB of text and left open (1.9 MB of gzip)
    # took 1.23 GB to export. Past the capture's pool, what a reply has is sent on, with a note.
    c, s = pair()
    pool = Buffered(limit=100)
    for f in (c, s):
        f.set_pool(pool)
    c.feed(b"stat", 1, 1.0)
    assert s.feed(b"x" * 60, 2, 1.1) == [] and pool.used == 60
    [cut] = s.feed(b"y" * 60, 3, 1.2)
    assert cut.data == b"x" * 60 + b"y" * 60 and pool.used == 0
    assert [d.key for d in cut.diagnostics] == ["framing.unbuffered"]
    assert "reply cut after 120 bytes" in cut.diagnostics[0].message
    assert s.feed(b"z" * 10, 4, 1.3) == [] and pool.used == 10
    [rest] = s.flush()
    assert rest.data == b"z" * 10 and rest.diagnostics == [] and pool.used == 0

def test_server_text_recognised_without_the_client_side() -> None:
    _, s = pair()
    assert s.feed(b"imok", 2, 0.0) == []
    assert [p.data for p in s.flush()] == [b"imok"]


def test_mid_stream_server_bytes_are_not_taken_for_text() -> None:
    _, s = pair(synced=False)
    s.set_probe(lambda head: head[4:8] == i32(-2), False)
    data = b"xt data" + reply(-2, 5, 0)
    out = s.feed(data, 1, 0.0)
    assert [p.data for p in out] == [reply(-2, 5, 0)]


def test_word_split_over_two_chunks() -> None:
    c, _ = pair()
    assert c.feed(b"ru", 1, 0.0) == []
    assert [p.data for p in c.feed(b"ok", 2, 0.0)] == [b"ruok"]


def test_gap_in_text_reply_is_reported() -> None:
    c, s = pair()
    c.feed(b"mntr", 1, 0.0)
    s.feed(b"zk_version\t3.8\n", 2, 0.0)
    assert s.gap(100, 2, 4) == []
    s.feed(b"zk_avg_latency\t0\n", 4, 0.0)
    [resp] = s.flush()
    assert [d.key for d in resp.diagnostics] == ["tcp.gap"]


def test_gaps_and_retransmissions_in_a_text_reply_are_one_diagnostic_a_run() -> None:
    # The reply waits for its end: a gap or a retransmission in each of its segments kept a
    # diagnostic each until then.
    c, s = pair()
    c.feed(b"mntr", 1, 0.0)
    s.feed(b"zk_version\t3.8\n", 2, 0.0)
    for i in range(1000):
        assert s.gap(1, 2 + i, 3 + i) == []
    s.feed(b"zk_avg_latency\t0\n", 1002, 0.0)
    assert s.gap(5, 1002, 1003) == []  # text came between: another gap
    for i in range(1000):
        s.overlap(2, 1003 + i)
    [resp] = s.flush()
    assert [d.message for d in resp.diagnostics] == [
        "1000 bytes missing from the capture between frames 2 and 1002",
        "5 bytes missing from the capture between frames 1002 and 1003",
        "frames 1003-2002: 1000 retransmissions of 2000 bytes in all that differ from those first captured "
        "(the first-seen bytes are used)",
    ]


def test_probe_scores() -> None:
    connect = frame(i32(0) + i64(0) + i32(30000) + i64(0) + buf(b"\0" * 16) + b"\0")
    assert DISSECTOR.probe(connect) == 0.9
    assert DISSECTOR.probe(request(-2, 11)) == 0.9
    assert DISSECTOR.probe(request(12, 4, ustr("/app") + b"\1")) == 0.8
    assert DISSECTOR.probe(b"ruok") == 0.6
    # Longer than the head: only the path start is checked.
    long_create = request(1, 1, ustr("/" + "x" * 100) + buf(b"") + i32(0) + i32(0))
    assert DISSECTOR.probe(long_create[:64]) == 0.65


def test_probe_rejects_other_protocols() -> None:
    kafka_api_versions = bytes.fromhex("0000001f00120003000000010007726466") + b"kafka" * 3
    assert DISSECTOR.probe(kafka_api_versions) == 0.0
    zab = bytes.fromhex("000000050000000100000000ffffffffffffffff")
    assert DISSECTOR.probe(zab) == 0.0
    assert DISSECTOR.probe(request(1, 4, ustr("app") + b"\0")) == 0.0  # no leading slash
    assert DISSECTOR.probe(request(1, 0, b"")) == 0.0  # opcode 0 is not a client request
    assert DISSECTOR.probe(b"GET / HTTP/1.1\r\n") == 0.0
    assert DISSECTOR.probe(b"") == 0.0


def test_probe_boundary_for_replies_uses_pending_xids() -> None:
    st = started()
    assert DISSECTOR.probe_boundary(reply(-2, 1, 0), False, st)
    assert not DISSECTOR.probe_boundary(reply(44, 1, 0), False, st)
    st.pending.add(44, object())
    assert DISSECTOR.probe_boundary(reply(44, 1, 0), False, st)
    event = reply(-1, 1, 0, i32(3) + i32(3) + ustr("/a"))
    assert DISSECTOR.probe_boundary(event, False, st)
    assert not DISSECTOR.probe_boundary(b"\xff" * 3, False, st)
