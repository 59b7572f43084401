"""The TCP layer on its own: the Tracker reports conversations and their in-order stream events
to whatever layer sits above it, and imports nothing of the layers above."""

from __future__ import annotations

import subprocess
import sys

from pcapgen import TcpConn, ethernet

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import RawFrame
from kdissect.stream.flow import Conversation
from kdissect.stream.reassembly import Data, Event
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


def test_the_tcp_layer_imports_nothing_above_it() -> None:
    code = ("import sys, kdissect.stream.tracker; "
            "print(sorted(m for m in sys.modules if m.startswith(('kdissect.dissect', 'kdissect.framing', "
            "'kdissect.pipeline', 'kdissect.protocols'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
