"""Output on its own: messages leave in the order they came, a request waiting for its response
holds back those behind it until it is answered or has waited too long (HOLD_MESSAGES messages
or HOLD_BYTES behind it, HOLD_SECONDS of capture time, its conversation closed), and they are
numbered as they leave."""

from __future__ import annotations

import pytest

from kdissect.model import Match, Message, Pdu
from kdissect.pipeline import output
from kdissect.pipeline.counters import Counters
from kdissect.pipeline.output import HELD_BYTES, HeldBytes, Output


def _msg(request: bool, ts: float, stream: int = 0, expects: bool = True) -> Message:
    m = Message(Pdu(b"x" * 10, [1], ts, ts, request), stream, "a", "b", "kafka")
    m.expects_response = request and expects
    return m


def _numbers(msgs: list[Message]) -> list[int]:
    return [m.number for m in msgs]


def test_a_waiting_request_holds_back_the_rest_until_answered() -> None:
    out = Output(True, HeldBytes(HELD_BYTES), Counters())
    req, other, oneway = _msg(True, 1.0), _msg(True, 1.1, stream=1, expects=False), _msg(False, 1.2, stream=1)
    for m in (req, other, oneway):
        out.add(m)
    assert out.release(False) == [] and out.release(False) == []
    req.match = Match(9, "response", 0.5)
    assert out.release(False) == [req, other, oneway] and _numbers([req, other, oneway]) == [1, 2, 3]
    assert out.release(False) == [] and not out.queue


def test_without_hold_everything_leaves_at_once() -> None:
    out = Output(False, HeldBytes(HELD_BYTES), Counters())
    msgs = [_msg(True, 1.0), _msg(True, 1.1)]
    for m in msgs:
        out.add(m)
    assert out.release(False) == msgs and _numbers(msgs) == [1, 2]


@pytest.mark.parametrize("why", ["messages", "bytes", "seconds", "closed", "final"])
def test_a_request_that_waited_too_long_leaves_unanswered(why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "HOLD_MESSAGES", 3)
    monkeypatch.setattr(output, "HOLD_BYTES", 45)
    monkeypatch.setattr(output, "HOLD_SECONDS", 5.0)
    out = Output(True, HeldBytes(HELD_BYTES), Counters())
    req = _msg(True, 1.0)
    behind = [_msg(False, 1.5, stream=1), _msg(False, 1.6, stream=1)]
    for m in (req, *behind):
        out.add(m)
    out.now = 6.0  # exactly HOLD_SECONDS after the request: not yet too long
    assert out.release(False) == []
    if why == "messages":
        behind.append(_msg(False, 1.7, stream=1))
        out.add(behind[-1])  # four queued: more than HOLD_MESSAGES
        left = out.release(False)
    elif why == "bytes":
        for ts in (1.7, 1.8):  # 50 bytes queued: more than HOLD_BYTES (30 were not)
            behind.append(_msg(False, ts, stream=1))
            out.add(behind[-1])
        monkeypatch.setattr(output, "HOLD_MESSAGES", 10)
        left = out.release(False)
    elif why == "seconds":
        out.now = 6.001
        left = out.release(False)
    elif why == "closed":
        out.stream_closed(0)
        left = out.release(False)
    else:
        left = out.release(True)
    assert left == [req, *behind] and _numbers(left) == list(range(1, len(left) + 1))
    assert req.match is None and (why == "final" or [w for w, _ in out.left] == [out.releases - 1])


def test_a_waiting_request_behind_one_that_left_holds_back_the_rest() -> None:
    out = Output(True, HeldBytes(HELD_BYTES), Counters())
    first, second, resp = _msg(True, 1.0), _msg(True, 1.1), _msg(False, 1.2)
    for m in (first, second, resp):
        out.add(m)
    first.match = Match(3, "response", 0.2)
    assert out.release(False) == [first]
    second.match = Match(4, "response", 0.2)
    assert out.release(False) == [second, resp] and _numbers([first, second, resp]) == [1, 2, 3]
