"""Reading the chart data of a report safely: every value comes from a capture, so a wrong
type reads as empty, a number that is not finite as a gap, and every list and dict is capped."""

from __future__ import annotations

import html
import math
from typing import Any

MAX_SERIES = 40  # traces of one chart; more are counted, not drawn
MAX_VALUES = 4096  # values of one series (the analyzers send at most 2000 points, 512 bins)
MAX_TEXT = 200  # characters of one label or table cell


def as_dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def num(x: Any) -> float | None:
    """A finite number (an int stays an int), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return x


def short(x: Any, digits: int = 6) -> float | None:
    """A finite number to `digits` significant digits, as a chart shows it (an integer when it
    is one: JSON writes it shorter), else None."""
    n = num(x)
    if n is None or isinstance(n, int):
        return n
    v = float(f"{n:.{digits}g}")
    return int(v) if v.is_integer() and abs(v) < 1e15 else v


def nums(x: Any) -> list[float | None]:
    return [short(v) for v in as_list(x)[:MAX_VALUES]]


def text(x: Any, limit: int = MAX_TEXT) -> str:
    """A value as one line of at most `limit` characters."""
    s = x if isinstance(x, str) else "" if x is None else str(x)
    s = " ".join(s[:limit * 4].split())
    return s if len(s) <= limit else s[:limit - 1] + "…"


def label(x: Any) -> str:
    """A value as Plotly text: Plotly reads <b>, <a href> and the like in labels, so the markup
    characters go in as entities, which it shows as themselves."""
    return html.escape(text(x), quote=False)


def entries(x: Any, cap: int = MAX_SERIES) -> list[tuple[str, Any]]:
    """The first `cap` items of a dict, keys as text."""
    return [(text(k), v) for k, v in list(as_dict(x).items())[:cap]]


def rate(values: list[float | None], bin_s: float) -> list[float | None]:
    """Counts per bin as counts per second, to 4 significant digits (what a chart shows)."""
    return [None if v is None else short(v / bin_s, 4) for v in values]
