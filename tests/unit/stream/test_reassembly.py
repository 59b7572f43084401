"""Reassembly under hypothesis: a real client stream cut into random segments, reordered,
duplicated and overlapped, frames into exactly the same messages; a dropped segment gives a gap
diagnostic and decoding resumes at the next whole message."""

from __future__ import annotations

import random
import time

import dpkt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcapgen import ACK, PSH, TcpConn, ethernet
from support import CAPTURES

from kdissect.capture.pcapfile import RawFrame
from kdissect.pipeline import Pipeline
from kdissect.stream.reassembly import Buffered, Data, Gap, Overlap, Reassembler, seq_diff

REAL = CAPTURES / "kafka" / "mock_ck_transactions.pcap"


def _client_stream() -> bytes:
    """The longest client->server byte stream of a real capture in the repository (dpkt, not
    kdissect, reads it)."""
    streams: dict[tuple[int, int], dict[int, bytes]] = {}
    clients: set[tuple[int, int]] = set()
    with open(REAL, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            ip = _ip(buf)
            if ip is None or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK:
                clients.add((tcp.sport, tcp.dport))
            if tcp.data:
                streams.setdefault((tcp.sport, tcp.dport), {})[tcp.seq] = bytes(tcp.data)
    best = b""
    for key, segs in streams.items():
        data = b"".join(segs[s] for s in sorted(segs))
        if key in clients and len(data) > len(best):
            best = data
    return best


def _ip(buf: bytes) -> dpkt.ip.IP | None:
    eth = dpkt.ethernet.Ethernet(buf)
    return eth.data if isinstance(eth.data, dpkt.ip.IP) else None


STREAM = _client_stream()


def _frames(pieces: list[tuple[int, bytes]], conn: TcpConn) -> list[RawFrame]:
    pkts = conn.handshake()
    base = conn.seq[True]
    for off, data in pieces:
        pkts.append(conn.segment(True, data, PSH | ACK, seq=base + off))
    conn.seq[True] = base + len(STREAM)
    pkts.append(conn.fin(True))
    pkts.append(conn.fin(False))
    return [RawFrame(i + 1, 1000.0 + i * 0.001, 1, ethernet(p), len(ethernet(p))) for i, p in enumerate(pkts)]


def _messages(frames: list[RawFrame]) -> list:
    pipe = Pipeline()
    out = []
    for f in frames:
        out += pipe.feed(f)
    return out + pipe.finish()


def _baseline() -> list[bytes]:
    return [m.data for m in _messages(_frames([(0, STREAM)], TcpConn(sport=9092, isn_c=0xFFFFFF00)))]


BASELINE = _baseline()


def _cuts(draw: st.DrawFn) -> list[tuple[int, bytes]]:
    n = len(STREAM)
    points = sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=40))))
    bounds = [0, *points, n]
    pieces = [(a, STREAM[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    extra: list[tuple[int, bytes]] = []
    for a, data in pieces:
        if draw(st.booleans()) and draw(st.booleans()):
            extra.append((a, data))  # an exact retransmission
        if draw(st.booleans()) and draw(st.booleans()):
            grow = draw(st.integers(1, 300))
            extra.append((a, STREAM[a : a + len(data) + grow]))  # overlaps the next segment
    return pieces + extra


@st.composite
def shuffled(draw: st.DrawFn) -> list[tuple[int, bytes]]:
    pieces = _cuts(draw)
    seed = draw(st.integers(0, 2**32))
    random.Random(seed).shuffle(pieces)
    return pieces


def test_baseline_is_a_real_stream() -> None:
    assert len(BASELINE) >= 5
    assert b"".join(BASELINE) == STREAM


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shuffled(), st.sampled_from([1000, 0xFFFFFF00, 0xFFFFFFFF]))
def test_reordered_duplicated_overlapped_segments_give_the_same_messages(
        pieces: list[tuple[int, bytes]], isn: int) -> None:
    msgs = _messages(_frames(pieces, TcpConn(isn_c=isn)))
    assert [m.data for m in msgs] == BASELINE
    assert not any(d.severity.value == "error" for m in msgs for d in m.diagnostics)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_dropped_segment_gives_a_gap_and_decoding_resumes(data: st.DataObject) -> None:
    n = len(STREAM)
    points = sorted(set(data.draw(st.lists(st.integers(1, n - 1), min_size=3, max_size=30, unique=True))))
    bounds = [0, *points, n]
    pieces = [(a, STREAM[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    drop = data.draw(st.integers(1, len(pieces) - 2))
    lost_start, lost_data = pieces[drop]
    lost_end = lost_start + len(lost_data)
    kept = pieces[:drop] + pieces[drop + 1 :]
    msgs = _messages(_frames(kept, TcpConn()))
    assert any(d.key == "tcp.gap" for m in msgs for d in m.diagnostics)
    # Every baseline message that starts at or after the hole's end comes out whole.
    offsets, pos = [], 0
    for b in BASELINE:
        offsets.append(pos)
        pos += len(b)
    after = [b for off, b in zip(offsets, BASELINE, strict=True) if off >= lost_end]
    got = [m.data for m in msgs]
    if after:
        assert got[-len(after):] == after


def test_sequence_wraps() -> None:
    r = Reassembler()
    r.syn(0xFFFFFFFD)
    ev = r.segment(0xFFFFFFFE, b"ab", 1, 0.0) + r.segment(0, b"cd", 2, 0.0)
    assert b"".join(e.data for e in ev if isinstance(e, Data)) == b"abcd"
    assert seq_diff(1, 0xFFFFFFFF) == 2


def test_overlap_with_different_bytes_is_reported() -> None:
    r = Reassembler()
    r.syn(0)
    r.segment(1, b"hello world", 1, 0.0)
    ev = r.segment(7, b"WORLD!", 2, 0.0)
    assert any(isinstance(e, Overlap) for e in ev)
    assert b"".join(e.data for e in ev if isinstance(e, Data)) == b"!"


def test_acknowledged_bytes_are_not_kept() -> None:
    # Every open conversation kept the last 64-128 KB of each side's stream: 2,000 conversations
    # each answered after a 130 KB request kept 280 MB.
    r = Reassembler()
    r.syn(0)
    r.segment(1, bytes(100_000), 1, 0.0)
    assert r.acked(1 + 60_000) == [] and len(r.history) == 40_000
    ev = r.segment(60_001 + 10, b"x" * 20, 2, 0.0)  # bytes not acknowledged yet: compared
    assert [e.length for e in ev if isinstance(e, Overlap)] == [20]
    assert r.acked(1) == [] and len(r.history) == 40_000  # an old acknowledgement changes nothing
    assert r.acked(1 + 100_000) == [] and len(r.history) == 0
    r.segment(100_001, b"abc", 3, 0.0)
    assert len(r.history) == 3


def test_peer_ack_beyond_data_declares_a_gap() -> None:
    r = Reassembler()
    r.syn(0)
    r.segment(1, b"abc", 1, 0.0)
    ev = r.acked(1 + 3 + 100)
    assert [e.lost for e in ev if isinstance(e, Gap)] == [100]


def test_keepalive_is_absorbed() -> None:
    r = Reassembler()
    r.syn(0)
    r.segment(1, b"abc", 1, 0.0)
    assert r.segment(3, b"c", 2, 0.0) == []  # keep-alive: one old byte


def test_a_full_backlog_costs_log_n_per_segment() -> None:
    # Every segment is followed by a hole: once the backlog is full, each new segment forces a
    # gap to the earliest one. 60,000 such segments take well under a second when finding the
    # earliest costs O(log n) (minutes when it scans the backlog).
    r = Reassembler()
    r.syn(0)
    start = time.process_time()
    gaps = 0
    for i in range(60_000):
        gaps += sum(isinstance(e, Gap) for e in r.segment(10 + 3 * i, b"x", i + 1, 0.0))
    gaps += sum(isinstance(e, Gap) for e in r.flush())
    assert time.process_time() - start < 15
    assert gaps == 60_000


def test_backlog_across_a_sequence_wrap_is_delivered_in_order() -> None:
    r = Reassembler()
    r.syn(0xFFFFFFF0)
    out = r.segment(0xFFFFFFF1 + 20, b"3" * 10, 3, 0.0)  # wraps past 0
    out += r.segment(0xFFFFFFF1 + 10, b"2" * 10, 2, 0.0)
    out += r.segment(0xFFFFFFF1, b"1" * 10, 1, 0.0)
    assert b"".join(e.data for e in out if isinstance(e, Data)) == b"1" * 10 + b"2" * 10 + b"3" * 10
    assert not r.backlog and not r.flush()


def test_the_reassemblers_of_a_capture_keep_a_bounded_number_of_bytes_in_all() -> None:
    # Each reassembler kept its own out-of-order backlog (up to 4 MB) and delivered bytes (up to
    # 128 KB): 200 connections of 4 MB backlogs (1.3 MB of gzip) took 809 MB, 8,000 connections
    # sending 128 KB each way (3.3 MB of gzip) 2.1 GB. Past the pool's limit the one that grows
    # lets go of what it keeps: its backlog is delivered across its holes.
    pool = Buffered(50_000)
    rs = [Reassembler(pool) for _ in range(20)]
    for r in rs:
        r.syn(0)
    events: list[list] = [[] for _ in rs]
    for k in range(10):
        for r, ev in zip(rs, events, strict=True):
            ev += r.segment(2 + k * 1000, bytes(1000), k + 2, 0.0)  # the first byte is never seen
            assert pool.used <= pool.limit + 1000
    assert pool.used == sum(r.counted for r in rs) == sum(r.backlog_bytes + len(r.history) for r in rs)
    cut = [ev for ev in events if ev]
    assert cut and all(isinstance(ev[0], Gap) and ev[0].lost == 1 for ev in cut)
    for r in rs:
        r.flush()
        r.release()
    assert pool.used == 0


def test_delivered_bytes_are_let_go_past_the_pool_limit() -> None:
    pool = Buffered(100_000)
    rs = [Reassembler(pool) for _ in range(10)]
    for k in range(3):
        for r in rs:
            assert [type(e) for e in r.segment(k * 60_000, bytes(60_000), 1, 0.0)] == [Data]
            assert pool.used <= 100_000 + 60_000
    assert pool.used == sum(len(r.history) for r in rs)
