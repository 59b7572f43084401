"""The compiled sequence analysis (kdissect/stream/_tracker.pyx) against the pure one
(tracker._first_seq and tracker._analyse): after every segment the same sequence state, RTT and
trouble, value for value and type for type, for the conversations of the own captures, for
generated conversations (handshakes, retransmissions, keep-alives, duplicate ACKs, zero
windows, resets, sequence numbers that wrap) and for segments outside the compiled path."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kdissect import accel
from kdissect.capture.l2l4 import ACK, FIN, RST, SYN, TcpSegment, decode
from kdissect.capture.pcapfile import CaptureFile
from kdissect.stream.flow import Conversation, Tally

twin = pytest.importorskip("kdissect.stream._tracker", reason="the compiled twin of tracker is not built")
PURE = (accel.pure("kdissect.stream.tracker", "_first_seq"), accel.pure("kdissect.stream.tracker", "_analyse"))
COMPILED = (twin._first_seq, twin._analyse)

REPO = Path(__file__).resolve().parents[3]
CAPTURES = sorted(p for p in (REPO / "captures").rglob("*") if p.is_file()
                  and p.name.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")))
A, B = (b"\x0a\0\0\x01", 40000), (b"\x0a\0\0\x02", 9092)
SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _typed(v: Any) -> Any:
    return (type(v).__name__, v)


def _tally(t: Tally) -> Any:
    return (list(t.count), list(t.frames), _typed(t.first_ts), _typed(t.last_ts))


def _state(conv: Conversation[None]) -> Any:
    trouble = conv.trouble
    return ([_typed(v) for v in conv.first_seq],
            [tuple(_typed(getattr(s, f)) for f in ("high", "high_ts", "ack", "ack_ts", "window", "dupacks"))
             for s in conv.seqs],
            _typed(conv.syn_ts), _typed(conv.first_rtt),
            None if trouble is None else (_tally(trouble.retransmissions), _tally(trouble.zero_windows),
                                          _tally(trouble.resets), trouble.reset_after_fin))


def _run(segs: list[Any], fns: tuple[Callable[..., None], Callable[..., None]]) -> list[Any]:
    """The state after each segment (or the exception it raised), the segments analysed as one
    conversation's."""
    first_seq, analyse = fns
    conv: Conversation[None] = Conversation(0, A, B)
    out = []
    for seg in segs:
        side = conv.side_of(seg.src, seg.sport)
        try:
            first_seq(conv, side, seg)
            analyse(conv, side, seg)
        except Exception as e:  # noqa: BLE001 - compared, with its type
            out.append(("raised", type(e).__name__, str(e)))
            conv = Conversation(0, A, B)
            continue
        if seg.flags & FIN:
            conv.fin[side] = True
        out.append(_state(conv))
    return out


def same(segs: list[Any]) -> None:
    assert _run(segs, COMPILED) == _run(segs, PURE)


def test_the_twin_is_in_place() -> None:
    from kdissect.stream import tracker
    if accel.PURE:
        assert tracker._analyse is PURE[1] and tracker._first_seq is PURE[0]
    else:
        assert (tracker._first_seq, tracker._analyse) == COMPILED


@cache
def conversations() -> list[list[TcpSegment]]:
    """The segments of each conversation of the own captures, with their endpoints as A and B."""
    convs: dict[tuple[Any, Any], list[TcpSegment]] = {}
    for path in CAPTURES:
        with CaptureFile(str(path)) as cap:
            for frame in cap:
                seg = decode(frame)
                if seg is None:
                    continue
                a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
                key = (path, min(a, b), max(a, b))
                mine = (a, b) == (min(a, b), max(a, b))
                convs.setdefault(key, []).append(_moved(seg, mine))
    return list(convs.values())


def _moved(seg: TcpSegment, client: bool, **changes: Any) -> TcpSegment:
    (src, sport), (dst, dport) = (A, B) if client else (B, A)
    f = {name: getattr(seg, name) for name in TcpSegment.__slots__}
    f.update(src=src, sport=sport, dst=dst, dport=dport)
    f.update(changes)
    return TcpSegment(**f)


def test_the_own_captures() -> None:
    convs = conversations()
    assert len(convs) > 20
    for segs in convs:
        same(segs)


def _segment(client: bool, seq: int, ack: int, flags: int, window: int, length: int, missing: int, ts: float,
             frame: int) -> TcpSegment:
    (src, sport), (dst, dport) = (A, B) if client else (B, A)
    return TcpSegment(frame, ts, src, sport, dst, dport, seq, ack, flags, window, b"x" * length, missing)


BASES = (0, 1000, 0xFFFFFFF0, 0x7FFFFFF8)
FLAGS = (ACK, ACK, ACK, ACK, ACK, ACK, SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, 0, FIN)


@st.composite
def conversation(draw: st.DrawFn) -> list[TcpSegment]:
    """Segments of both sides around one sequence number per side: in order, repeated, out of
    order, with duplicate ACKs, zero windows and the flags of a handshake, a close or a reset."""
    base = [draw(st.sampled_from(BASES)), draw(st.sampled_from(BASES))]
    pos = [0, 0]
    ts = 1.0
    segs = []
    for frame in range(1, draw(st.integers(1, 40)) + 1):
        side = draw(st.integers(0, 1))
        step = draw(st.sampled_from((0, 0, 0, 0, 1, -1, 2, -2, -3, 5)))
        length = draw(st.sampled_from((0, 0, 0, 1, 2, 3, 10)))
        seq = (base[side] + pos[side] + step) & 0xFFFFFFFF
        ack = (base[1 - side] + pos[1 - side] + draw(st.sampled_from((0, 0, 0, 0, 1, -1, 4)))) & 0xFFFFFFFF
        ts += draw(st.sampled_from((0.0, 0.0005, 0.001, 0.001, 0.004, 0.01, 0.03)))
        window = draw(st.sampled_from((512, 512, 512, 0, 1)))
        missing = draw(st.sampled_from((0, 0, 0, 0, 0, 1, 7)))
        segs.append(_segment(side == 0, seq, ack, draw(st.sampled_from(FLAGS)), window, length, missing, ts, frame))
        if draw(st.booleans()):
            pos[side] += length
    return segs


@SETTINGS
@given(conversation())
def test_generated_conversations(segs: list[TcpSegment]) -> None:
    same(segs)


def test_retransmissions_keep_alives_and_duplicate_acks() -> None:
    """The cases of the analysis, one by one: a fast retransmission after one, two or three
    duplicate ACKs, soon or late; keep-alives of 0, 1 and 2 bytes; out of order within and past
    the RTT; a zero-window probe; bytes already acknowledged."""
    for dupacks in (1, 2, 3):
        for delay in (0.001, 0.05):
            segs = [_segment(True, 100, 0, SYN, 512, 0, 0, 1.0, 1), _segment(False, 500, 101, SYN | ACK, 512, 0, 0, 1.01, 2),
                    _segment(True, 101, 501, ACK, 512, 10, 0, 1.02, 3), _segment(True, 121, 501, ACK, 512, 10, 0, 1.03, 4)]
            segs += [_segment(False, 501, 111, ACK, 512, 0, 0, 1.04 + i * 0.001, 5 + i) for i in range(dupacks + 1)]
            segs.append(_segment(True, 111, 501, ACK, 512, 10, 0, 1.045 + delay, 10))
            same(segs)
    for length in (0, 1, 2):
        for back in (1, 0, 5):
            segs = [_segment(True, 100, 0, ACK, 512, 10, 0, 1.0, 1), _segment(False, 500, 100, ACK, 512, 0, 0, 1.001, 2),
                    _segment(True, 110 - back, 500, ACK, 512, length, 0, 1.002, 3),
                    _segment(True, 110 - back, 500, ACK, 512, length, 0, 1.2, 4)]
            same(segs)
    for window in (0, 512):
        segs = [_segment(True, 100, 0, ACK, 512, 10, 0, 1.0, 1), _segment(False, 500, 110, ACK, window, 0, 0, 1.001, 2),
                _segment(True, 110, 500, ACK, 512, 1, 0, 1.5, 3), _segment(True, 110, 500, ACK, 512, 1, 0, 2.5, 4),
                _segment(True, 100, 500, ACK, 512, 10, 0, 2.6, 5)]
        same(segs)


def test_segments_outside_the_compiled_path() -> None:
    """Numbers that are not ints or beyond 32 bits, a payload that is not bytes, a time that is
    not a float, an object that is not a TcpSegment: the pure functions' answer or exception."""
    first = _segment(True, 100, 0, SYN, 512, 0, 0, 1.0, 1)
    normal = _segment(False, 500, 101, SYN | ACK, 512, 0, 0, 1.001, 2)
    odd: list[dict[str, Any]] = [
        {"seq": 2**32}, {"seq": -1}, {"seq": True}, {"ack": 2**40}, {"ack": 3.0}, {"flags": 2**33},
        {"flags": None}, {"window": -1}, {"window": "0"}, {"missing": 2**62}, {"missing": -1},
        {"missing": 1.5}, {"payload": bytearray(b"ab")}, {"payload": memoryview(b"ab")}, {"ts": 2},
        {"ts": None}, {"frame": "f"},
    ]
    for changes in odd:
        same([first, normal, _moved(normal, True, **{"seq": 101, "ack": 501, "flags": ACK, **changes})])
        same([_moved(first, True, **changes), normal])

    class Other:
        def __init__(self, seg: TcpSegment) -> None:
            for name in TcpSegment.__slots__:
                setattr(self, name, getattr(seg, name))

    same([first, Other(normal), Other(_moved(normal, True, seq=101, ack=501, flags=ACK))])


def test_a_state_the_tracker_never_stores_goes_to_the_pure_functions() -> None:
    segs = [_segment(True, 100, 0, SYN, 512, 0, 0, 1.0, 1), _segment(False, 500, 101, SYN | ACK, 512, 0, 0, 1.001, 2),
            _segment(True, 101, 501, ACK, 512, 3, 0, 1.002, 3)]
    for field, value in (("high", 2**33), ("high", 1.0), ("ack", -5), ("high_ts", 1), ("ack_ts", None),
                         ("window", 2**40), ("window", True), ("dupacks", -1), ("dupacks", 2**63)):
        results = []
        for fns in (COMPILED, PURE):
            conv: Conversation[None] = Conversation(0, A, B)
            for s in (conv.seqs[0], conv.seqs[1]):
                s.high, s.ack = 99, 499
                setattr(s, field, value)
            out = []
            for seg in segs:
                side = conv.side_of(seg.src, seg.sport)
                try:
                    fns[0](conv, side, seg)
                    fns[1](conv, side, seg)
                    out.append(_state(conv))
                except Exception as e:  # noqa: BLE001 - compared, with its type
                    out.append(("raised", type(e).__name__))
            results.append(out)
        assert results[0] == results[1], (field, value)
