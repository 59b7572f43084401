"""The TCP layer on its own: the Tracker reports conversations and their in-order stream events
to whatever layer sits above it, and imports nothing of the layers above."""

from __future__ import annotations

import subprocess
import sys

from pcapgen import TcpConn, ethernet

from kdissect.capture.l2l4 import ACK, RST, decode
from kdissect.capture.pcapfile import RawFrame
from kdissect.stream.flow import PROBE_BYTES, Conversation
from kdissect.stream.reassembly import Data, Event, Gap
from kdissect.stream.tracker import Tracker


class Recorder:
    def __init__(self) -> None:
        self.log: list[tuple[str, int, object]] = []

    def opened(self, conv: Conversation[str]) -> None:
        self.log.append(("opened", conv.index, None))

    def events(self, conv: Conversation[str], side: int, events: list[Event]) -> None:
        data = b"".join(e.data for e in events if isinstance(e, Data))
        self.log.append(("data", conv.index, (side == conv.client, data)))

    def closed(self, conv: Conversation[str]) -> None:
        self.log.append(("closed", conv.index, (conv.packets, conv.bytes[0] + conv.bytes[1])))


def _track(pkts: list[bytes], upper: Recorder, limit: int = 10) -> None:
    tracker: Tracker[str] = Tracker(upper, limit)
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        seg = decode(RawFrame(i + 1, 1.0 + i, 1, frame, len(frame)))
        assert seg is not None
        tracker.segment(seg)
    tracker.finish()


def test_events_in_stream_order_and_the_end() -> None:
    c = TcpConn()
    pkts = c.handshake()
    late = c.segment(True, b"world", seq=c.seq[True] + 6, advance=False)
    pkts += [late, c.segment(True, b"hello "), c.segment(False, b"ok")]
    c.seq[True] += 5
    pkts += [c.fin(True), c.fin(False)]
    rec = Recorder()
    _track(pkts, rec)
    assert rec.log == [("opened", 0, None), ("data", 0, (True, b"hello world")), ("data", 0, (False, b"ok")),
                       ("closed", 0, (8, 13))]


def test_passive_and_ignored_conversations_are_not_reassembled() -> None:
    class Passive(Recorder):
        def opened(self, conv: Conversation[str]) -> None:
            super().opened(conv)
            (conv.make_passive if conv.index == 0 else conv.ignore)()

    pkts: list[bytes] = []
    for cport in (40000, 40001):
        c = TcpConn(cport=cport)
        pkts += [*c.handshake(), c.segment(True, b"abc"), c.fin(True), c.fin(False)]
    rec = Passive()
    _track(pkts, rec)
    # the passive one ends at its FINs with its bytes counted; the ignored one only at the end
    assert rec.log == [("opened", 0, None), ("closed", 0, (6, 3)), ("opened", 1, None), ("closed", 1, (6, 0))]


def test_the_least_recently_active_is_closed_past_the_limit() -> None:
    pkts = [TcpConn(cport=40000 + i).handshake()[0] for i in range(3)]
    rec = Recorder()
    _track(pkts, rec, limit=2)
    assert [(what, i) for what, i, _ in rec.log] == [("opened", 0), ("opened", 1), ("opened", 2), ("closed", 0),
                                                     ("closed", 1), ("closed", 2)]


def test_the_least_recently_active_is_closed_whatever_the_order_of_segments() -> None:
    """Recency follows every segment, however many in a row a conversation sends, and whichever
    conversations were opened or closed meanwhile."""
    c = [TcpConn(cport=40000 + i) for i in range(4)]
    hs = [conn.handshake() for conn in c]
    pkts = [hs[0][0], hs[1][0], hs[0][1], hs[0][2], hs[2][0], hs[1][1], hs[1][2], hs[1][2], hs[3][0], hs[2][1]]
    rec = Recorder()
    _track(pkts, rec, limit=2)
    # 2 opens with 0 (just active) and 1 open: 1 closes, and goes on at its SYN-ACK (same stream)
    # with 0 the least recently active; 3 opens with 2 and 1 (three segments in a row) open: 2
    # closes, and goes on with 1 the least recently active
    assert [(what, i) for what, i, _ in rec.log] == [
        ("opened", 0), ("opened", 1), ("opened", 2), ("closed", 1), ("opened", 1), ("closed", 0), ("opened", 3),
        ("closed", 2), ("opened", 2), ("closed", 1), ("closed", 3), ("closed", 2)]
    # 0 active, then 1 opens, then 0 again: 1 is the least recently active when 2 opens
    rec = Recorder()
    _track([hs[0][0], hs[0][1], hs[1][0], hs[0][2], hs[2][0]], rec, limit=2)
    assert [(what, i) for what, i, _ in rec.log] == [("opened", 0), ("opened", 1), ("opened", 2), ("closed", 1),
                                                     ("closed", 0), ("closed", 2)]


def _streams(pkts: list[bytes], limit: int = 10, remembered: int = 10) -> list[int]:
    """Each packet's stream number."""
    out: list[int] = []
    tracker: Tracker[str] = Tracker(Recorder(), limit, remembered)
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        seg = decode(RawFrame(i + 1, 1.0 + i, 1, frame, len(frame)))
        assert seg is not None
        out.append(tracker.segment(seg).index)
    return out


def _closed_connection(isn_c: int = 1000) -> tuple[TcpConn, list[bytes]]:
    c = TcpConn(isn_c=isn_c)
    pkts = [*c.handshake(), c.segment(True, b"hello"), c.fin(True), c.fin(False)]
    return c, pkts


def test_packets_after_the_end_stay_in_their_stream() -> None:
    c, pkts = _closed_connection()
    last_ack = c.segment(True, b"", ACK)
    retransmitted = c.segment(False, b"late", seq=c.seq[False] - 5)
    rst = c.segment(False, b"", RST)
    rec = Recorder()
    _track([*pkts, last_ack, retransmitted, rst], rec)
    # one conversation, ended at the FINs; what follows is counted in it, not decoded
    assert rec.log == [("opened", 0, None), ("data", 0, (True, b"hello")), ("closed", 0, (6, 5))]
    assert _streams([*pkts, last_ack, retransmitted, rst]) == [0] * 9


def test_new_bytes_after_a_reset_are_decoded_in_the_same_stream() -> None:
    # A client that writes after its connection was reset (a ZooKeeper ping sent into a dead
    # session, say): the bytes are real traffic, dissected as Wireshark does, in stream 0.
    c = TcpConn()
    pkts = [*c.handshake(), c.segment(True, b"hello"), c.segment(True, b"", RST, advance=False),
            c.segment(True, b"again"), c.segment(True, b"again", seq=c.seq[True] - 5)]
    rec = Recorder()
    _track(pkts, rec)
    assert [e for e in rec.log if e[0] == "data"] == [("data", 0, (True, b"hello")), ("data", 0, (False, b"again"))]
    assert [e[:2] for e in rec.log if e[0] != "data"] == [("opened", 0), ("closed", 0), ("opened", 0), ("closed", 0)]
    assert _streams(pkts) == [0] * len(pkts)


def test_a_syn_with_another_sequence_number_reuses_the_ports() -> None:
    _, first = _closed_connection(isn_c=1000)
    _, again = _closed_connection(isn_c=9000)
    _, same_isn = _closed_connection(isn_c=9000)
    # a new initial sequence number starts a new stream; the same one is a retransmission
    assert _streams(first + again + same_isn) == [0] * 6 + [1] * 12
    # a SYN retransmitted before the answer stays in its stream, a SYN-ACK never starts one
    c = TcpConn()
    syn = c.handshake()[0]
    assert _streams([syn, syn, *TcpConn().handshake()[1:]]) == [0, 0, 0, 0]


def test_a_syn_after_a_capture_started_mid_connection() -> None:
    c = TcpConn(isn_c=1000)
    c.handshake()
    data = c.segment(True, b"abc")  # seq 1001: its side started at 1000 as far as anyone knows
    assert _streams([data, TcpConn(isn_c=1000).handshake()[0]]) == [0, 0]
    assert _streams([data, TcpConn(isn_c=1001).handshake()[0]]) == [0, 1]
    # the server's side is known from the client's first acknowledgement (5000 + 1 - 1)
    assert _streams([data, TcpConn(isn_s=5000).handshake()[1]]) == [0, 0]


def test_a_conversation_closed_past_the_limit_keeps_its_number() -> None:
    conns = [TcpConn(cport=40000 + i) for i in range(3)]
    pkts = [p for c in conns for p in c.handshake()]
    pkts.append(conns[0].segment(True, b"more"))
    rec = Recorder()
    _track(pkts, rec, limit=2)
    # the first was closed when the third opened; its next packet continues it as stream 0
    assert [(what, i) for what, i, _ in rec.log] == [
        ("opened", 0), ("opened", 1), ("opened", 2), ("closed", 0), ("opened", 0), ("closed", 1), ("data", 0),
        ("closed", 2), ("closed", 0)]
    assert _streams(pkts, limit=2) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 0]
    # forgotten past the remembered ones, it is numbered anew
    assert _streams(pkts, limit=1, remembered=1) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]


def test_the_tcp_layer_imports_nothing_above_it() -> None:
    code = ("import sys, kdissect.stream.tracker; "
            "print(sorted(m for m in sys.modules if m.startswith(('kdissect.dissect', 'kdissect.framing', "
            "'kdissect.pipeline', 'kdissect.protocols'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_conversations_head_is_kept_as_its_events_are_held() -> None:
    # The head a probe sees is built as events are held, not by walking them again on each
    # segment (16,000 one-byte segments took 2.3 s, 17 s without the compiled core).
    conv: Conversation[str] = Conversation(0, (b"\x0a\x00\x00\x01", 1), (b"\x0a\x00\x00\x02", 2))
    for i in range(5000):
        conv.hold(0, [Data(bytes([i % 256]), i + 1, 0.0)])
    conv.held[0] = NotIterable()
    assert conv.head(0) == bytes(i % 256 for i in range(PROBE_BYTES))
    assert conv.head_size(0) == PROBE_BYTES


def test_a_conversations_head_ends_at_its_first_gap() -> None:
    conv: Conversation[str] = Conversation(0, (b"\x0a\x00\x00\x01", 1), (b"\x0a\x00\x00\x02", 2))
    conv.hold(1, [Data(b"abc", 1, 0.0), Gap(10, 1, 2), Data(b"def", 2, 0.0)])
    conv.hold(1, [Data(b"ghi", 3, 0.0)])
    assert (conv.head(0), conv.head(1)) == (b"", b"abc")
    assert [side for side, _ in conv.take_held()] == [1]
    assert conv.head(1) == b""


class NotIterable(list[Event]):
    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the held events were walked")
