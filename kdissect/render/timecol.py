"""The packet list's time column, in tshark's `-t` formats.

`r` (the default): seconds since the capture's first packet, of any kind, so that a display
filter does not move it; `a` and `ad`: local time of day, with the date for `ad`; `u` and `ud`:
the same in UTC; `e`: seconds since the epoch; `d`: seconds since the previous message decoded,
shown or not (tshark's "previous captured packet": the packet list lists messages); `dd`:
seconds since the previous message shown. Always six decimals, as tshark writes microsecond
timestamps (a nanosecond timestamp is rounded to the microsecond).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kdissect import accel
from kdissect.model import Message

TIME_FORMATS = ("ad", "a", "r", "d", "dd", "e", "u", "ud")
# each format's width in the column, so that the columns after it line up
_WIDTH = {"ad": 26, "ud": 26, "a": 15, "u": 15, "e": 17, "r": 11, "d": 11, "dd": 11}


class TimeColumn:
    """`first()` gives the capture's first packet time once a packet was read (None before, and
    when it is unknown: then the first message shown is the origin). `seen(m)` must be told of
    every message decoded, shown or not, for `d` (`needs_every_message`)."""

    def __init__(self, fmt: str = "r", first: Callable[[], float | None] | None = None) -> None:
        if fmt not in _WIDTH:
            raise ValueError(f"unknown time format {fmt!r}")
        self.fmt = fmt
        self.first = first
        self.width = _WIDTH[fmt]
        self.needs_every_message = fmt == "d"
        self._origin: float | None = None
        self._shown: float | None = None  # the previous message shown
        self._seen: float | None = None  # the previous message decoded
        self._last: tuple[Message | None, float] = (None, 0.0)  # the last message seen, its delta

    def seen(self, m: Message) -> None:
        """A message decoded, whether or not it is shown."""
        self._last = (m, 0.0 if self._seen is None else m.ts - self._seen)
        self._seen = m.ts

    def text(self, m: Message) -> str:
        """The column for a message shown (in the order shown), right-aligned to its width."""
        return column_text(self, m)

    def _value(self, m: Message) -> str:
        fmt = self.fmt
        if fmt == "r":
            return seconds(m.ts - self._start(m))
        if fmt == "dd":
            delta = 0.0 if self._shown is None else m.ts - self._shown
            self._shown = m.ts
            return seconds(delta)
        if fmt == "d":
            last, delta = self._last
            return seconds(delta if last is m else 0.0)
        return stamp(m.ts, fmt)

    def _start(self, m: Message) -> float:
        if self._origin is None:
            first = self.first() if self.first is not None else None
            self._origin = first if first is not None else m.ts
        return self._origin


def column_text(clock: TimeColumn, m: Message) -> str:
    """TimeColumn.text (a function, for its compiled twin)."""
    return clock._value(m).rjust(clock.width)


def seconds(s: float) -> str:
    """A time difference with six decimals (`-0.000012` when negative, as tshark writes it)."""
    us = round(s * 1_000_000)
    whole, frac = divmod(abs(us), 1_000_000)
    return f"{'-' if us < 0 else ''}{whole}.{frac:06d}"


def stamp(ts: float, fmt: str) -> str:
    """An absolute time: `e` epoch seconds, `a`/`u` time of day (local, UTC), `ad`/`ud` with the
    date. A time the calendar functions cannot take is written as epoch seconds."""
    if fmt == "e":
        return seconds(ts)
    whole, frac = divmod(round(ts * 1_000_000), 1_000_000)
    pattern = "%Y-%m-%d %H:%M:%S" if fmt in ("ad", "ud") else "%H:%M:%S"
    try:
        parts = time.gmtime(whole) if fmt in ("u", "ud") else time.localtime(whole)
        return f"{time.strftime(pattern, parts)}.{frac:06d}"
    except (OverflowError, OSError, ValueError):
        return seconds(ts)


accel.bind(globals(), "kdissect.render._timecol", ("seconds", "column_text"))
