"""The packet-list line: the compiled twins (kdissect/render/_text.pyx, `summary_plain` and
`rtt_text`; kdissect/render/_timecol.pyx, `seconds`) against the pure functions of text.py and
timecol.py. The same text, or the same exception, for every message of every capture under
captures/ (each time column, several address widths), for messages with odd values (control
characters, non-ASCII text, TLS, frame numbers and round trips of every kind, widths that are
not plain ints) and for times around the rounding ties. Skipped, saying so, when the
extensions are not built."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import CAPTURES, decode_capture, own_captures

from kdissect import accel
from kdissect.model import Match, Message, Pdu
from kdissect.render import text, timecol
from kdissect.render.timecol import TIME_FORMATS, TimeColumn


def _twin(name: str) -> Any:
    """The compiled module, or None when it is not built or cannot load (KDISSECT_PURE=1 loads
    timecol's TimeColumn from its source, not the extension type _timecol reads)."""
    try:
        return importlib.import_module(name)
    except (ImportError, ValueError):
        return None


_text = _twin("kdissect.render._text")
_timecol = _twin("kdissect.render._timecol")
pytestmark = pytest.mark.skipif(
    _text is None or _timecol is None,
    reason="the compiled twins kdissect.render._text and _timecol are not built, or KDISSECT_PURE=1 "
           "(cythonize them or pip install the project with a C compiler)")
PURE_LINE = accel.pure(text.__name__, "summary_plain")
PURE_RTT = accel.pure(text.__name__, "rtt_text")
PURE_SECONDS = accel.pure(timecol.__name__, "seconds")
PURE_COLUMN = accel.pure(timecol.__name__, "column_text")


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        value = fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return ("raised", type(e), str(e))
    return ("ok", type(value), value)


def assert_line(m: Any, when: Any, width: Any = 21) -> None:
    assert outcome(_text.summary_plain, m, when, width) == outcome(PURE_LINE, m, when, width)
    assert outcome(_text.rtt_text, m) == outcome(PURE_RTT, m)


def test_the_twins_are_bound_unless_pure() -> None:
    assert (text.summary_plain is _text.summary_plain) != accel.PURE
    assert (text.rtt_text is _text.rtt_text) != accel.PURE
    assert (timecol.seconds is _timecol.seconds) != accel.PURE
    assert (timecol.column_text is _timecol.column_text) != accel.PURE


capture_messages = cache(decode_capture)  # (each module its own: some tests change the messages)


@pytest.mark.parametrize("path", own_captures(), ids=lambda p: str(p.relative_to(CAPTURES)))
def test_capture_messages_give_the_same_lines(path: Path) -> None:
    messages = capture_messages(path)
    first = messages[0].ts if messages else None
    for fmt in TIME_FORMATS:
        pure_clock, twin_clock = TimeColumn(fmt, lambda: first), TimeColumn(fmt, lambda: first)
        for m in messages:
            pure_clock.seen(m)
            twin_clock.seen(m)
            with accel.pure_functions(timecol.__name__):
                want = pure_clock.text(m)
            when = twin_clock.text(m)
            assert when == want
            assert _timecol.seconds(m.ts - first) == PURE_SECONDS(m.ts - first)
            for width in (21, 0, 5, 40):
                assert_line(m, when, width)


def message(**attrs: Any) -> Message:
    m = Message(Pdu(b"\0\0\0\0", [7], 1.0, 1.5, False), 3, "10.0.0.1:9092", "10.0.0.2:51000", "kafka")
    m.summary = "Produce v9 response corr=1"
    m.match = Match(6, "request", 0.000123)
    for name, value in attrs.items():
        setattr(m, name, value)
    return m


class Frame(int):
    pass


ODD: list[dict[str, Any]] = [
    {},
    {"summary": "a\x1b[31m\nb\tc\x7f"},
    {"summary": "topic\x7f"},
    {"summary": "topic\x1f"},
    {"summary": " ~"},
    {"summary": "naïve topic ✓"},
    {"summary": "café\x85"},
    {"summary": ""},
    {"tls": object()},
    {"protocol": "zookeeper"},
    {"protocol": "ß"},
    {"protocol": "x" * 200},
    {"src": "é" * 30, "dst": ""},
    {"src": 5},
    {"dst": None},
    {"summary": None},
    {"protocol": b"kafka"},
    {"frame": 0},
    {"frame": 123456789},
    {"frame": 2**62},
    {"frame": 2**70},
    {"frame": -4},
    {"frame": True},
    {"frame": Frame(12)},
    {"frame": 1.5},
    {"kind": "request"},
    {"match": None},
    {"match": Match(6, "request", None)},
    {"match": Match(6, "request", 0.0)},
    {"match": Match(6, "request", -0.25)},
    {"match": Match(6, "request", 0.0001)},
    {"match": Match(6, "request", 0.00009995)},
    {"match": Match(6, "request", 0.00005)},
    {"match": Match(6, "request", 12345.678)},
    {"match": Match(6, "request", 1e300)},
    {"match": Match(6, "request", math.inf)},
    {"match": Match(6, "request", -math.inf)},
    {"match": Match(6, "request", math.nan)},
    {"match": Match(6, "request", 2)},
    {"match": Match(6, "request", "0.1")},
    {"match": object()},
]


@pytest.mark.parametrize("attrs", ODD, ids=[repr(a)[:40] for a in ODD])
@pytest.mark.parametrize("width", [21, 0, 3, 4096, 4097, -1, True, 21.0, None])
def test_odd_messages_give_the_same_lines(attrs: dict[str, Any], width: Any) -> None:
    m = message(**attrs)
    for when in ("   0.000123", "", "é", 5):
        assert_line(m, when, width)


def test_what_is_not_a_message_gives_the_same_error() -> None:
    assert_line(None, "0.0")
    assert_line(object(), "0.0")


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.floats(), st.floats(-1e7, 1e7), st.integers(-10**7, 10**7).map(lambda us: us / 1e6),
                 st.integers(-10**9, 10**9).map(lambda us: (us + 0.5) / 1e6), st.integers(), st.booleans()))
def test_seconds_are_written_as_in_python(s: Any) -> None:
    assert outcome(_timecol.seconds, s) == outcome(PURE_SECONDS, s)


@pytest.mark.parametrize("s", [0.0, -0.0, 5e-7, 1.5e-6, 2.5e-6, -5e-7, -2.5e-6, 4e12, -4e12, 3.999e12, 4.001e12,
                               1e300, math.inf, -math.inf, math.nan, 1.0000005, 0.0000015])
def test_seconds_at_ties_and_limits(s: float) -> None:
    assert outcome(_timecol.seconds, s) == outcome(PURE_SECONDS, s)


class Clock(TimeColumn):
    pass


@pytest.mark.parametrize("fmt", TIME_FORMATS)
@pytest.mark.parametrize("origin", [None, 0.5, 2.0**40, 7, -1e300, math.nan])
@pytest.mark.parametrize("ts", [1.0, 0.5000005, 0.4999995, 1e15, 5, math.inf])
def test_time_columns_give_the_same_text(fmt: str, origin: Any, ts: Any) -> None:
    def clocks() -> list[Any]:
        out = []
        for cls, width in ((TimeColumn, None), (Clock, None), (TimeColumn, 0), (TimeColumn, 64), (TimeColumn, 65),
                           (TimeColumn, True)):
            c = cls(fmt, lambda: origin)
            if width is not None:
                c.width = width
            c._origin = origin
            out.append(c)
        return out

    for m in (message(ts=ts), None):
        for pure_clock, twin_clock in zip(clocks(), clocks(), strict=True):
            if m is not None:
                pure_clock.seen(m)
                twin_clock.seen(m)
            assert outcome(_timecol.column_text, twin_clock, m) == outcome(PURE_COLUMN, pure_clock, m)
