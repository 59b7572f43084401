"""tshark's `-t` for the commands that print the packet list (`read`, `follow`, `sniff`): the
option, and the time column it makes (kdissect/render/timecol.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kdissect.model import Message
from kdissect.render.timecol import TIME_FORMATS, TimeColumn

if TYPE_CHECKING:
    from kdissect.pipeline.counters import Counters

F = TypeVar("F", bound=Callable[..., Any])


def time_option(f: F) -> F:
    return click.option(
        "-t", "time_format", type=click.Choice(TIME_FORMATS), default="r", show_default=True,
        help="The time column, as tshark's -t: r seconds since the first packet of the capture, "
             "a/ad local time (with the date), u/ud UTC (with the date), e epoch seconds, "
             "d since the previous message decoded, dd since the previous message shown.")(f)


def time_column(fmt: str, counters: Counters) -> TimeColumn:
    """The column of a run whose pipeline counts into `counters` (it knows the first packet)."""
    return TimeColumn(fmt, lambda: counters.first_ts)


def observed(clock: TimeColumn, keep: Callable[[Message], bool] | None) -> Callable[[Message], bool] | None:
    """The display filter `keep`, also telling the column of every message decoded when it
    needs them (`-t d`)."""
    if not clock.needs_every_message:
        return keep

    def keep_seen(m: Message) -> bool:
        clock.seen(m)
        return keep is None or keep(m)

    return keep_seen
