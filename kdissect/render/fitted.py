"""Tables that fit the console's width: the columns always shown, then the others from the
highest priority down, each if it still fits at a readable width; the rest are left out rather
than every column squeezed to a letter a line.

A column's narrowest readable width: a number column, its widest cell and the longest word of its
header (the header wraps at spaces); a text column (left-aligned, wraps), its natural width up to
TEXT_MIN. Space beyond the minimums goes to text columns first, then to headers. Off a terminal
the console is as wide as the content needs (cliutil.make_console), so nothing is dropped.
A column may set its own least width (`least`: addresses are not cut below ADDRESS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from kdissect.text import shown

TEXT_MIN = 12  # a wrapped text column is at least this wide (or its natural width, if less)
ADDRESS = 21  # an IPv4 address and port ("255.255.255.255:65535") is not wrapped
SEPARATOR = 3  # " │ " between columns (no edge, no outer padding)


@dataclass(frozen=True, slots=True)
class Col:
    name: str
    priority: int | None = None  # dropped first when lowest; None: always shown
    text: bool = False  # left-aligned and wraps; else a right-aligned number
    least: int = TEXT_MIN  # a text column is not wrapped narrower than this (or its natural width)


@dataclass(slots=True)
class Fitted:
    table: Table
    dropped: list[str]


def _natural(col: Col, longest: int) -> int:
    return max(len(col.name), longest)


def _minimum(col: Col, longest: int) -> int:
    word = max(len(w) for w in col.name.split())
    if col.text:
        return max(word, min(_natural(col, longest), col.least))
    return max(word, longest)


def _total(widths: list[int]) -> int:
    return sum(widths) + SEPARATOR * (len(widths) - 1)


def choose(cols: list[Col], rows: list[list[str]], width: int) -> tuple[list[int], list[int] | None]:
    """The indexes of the columns kept and their widths (None: natural widths fit)."""
    return choose_by_longest(cols, [max((len(r[i]) for r in rows), default=0) for i in range(len(cols))], width)


def choose_by_longest(cols: list[Col], longest: list[int], width: int) -> tuple[list[int], list[int] | None]:
    """choose() from the length of each column's longest cell, all it needs of the cells."""
    keep = list(range(len(cols)))
    natural = [_natural(cols[i], longest[i]) for i in keep]
    if _total(natural) <= width:
        return keep, None
    least = [_minimum(c, longest[i]) for i, c in enumerate(cols)]
    keep = [i for i, c in enumerate(cols) if c.priority is None]
    for _, i in sorted(((c.priority, i) for i, c in enumerate(cols) if c.priority is not None), reverse=True):
        if _total([least[j] for j in [*keep, i]]) <= width:
            keep.append(i)
    keep.sort()
    widths = [least[i] for i in keep]
    spare = width - _total(widths)
    for text_first in (True, False):
        for j, i in enumerate(keep):
            if spare <= 0 or cols[i].text != text_first:
                continue
            grow = min(spare, _natural(cols[i], longest[i]) - widths[j])
            widths[j] += grow
            spare -= grow
    return keep, widths


def plain_lines(cols: list[Col], rows: Callable[[], Iterable[list[str]]], width: int) -> Iterator[str] | None:
    """The lines rich writes for fitted_table(cols, list(rows()), width) (no options) on a
    console without colours, made without rich, when every column keeps its natural width and
    no cell wraps; None otherwise (rich lays the table out then). Rich measures every cell of a
    table it prints and keeps the rendered lines of all of them in memory at once, which for a
    table of 100 000 rows takes a minute and a gigabyte. The rows are made twice, once to size
    the columns and once as the lines are read, and never kept."""
    longest = [0] * len(cols)
    widths = [cell_len(c.name) for c in cols]
    count = 0
    for r in rows():
        count += 1
        for i, cell in enumerate(r):
            text = shown(cell)
            longest[i] = max(longest[i], len(text))
            widths[i] = max(widths[i], cell_len(text))
    if not count or choose_by_longest(cols, longest, width)[1] is not None or _total(widths) > width:
        return None
    return _plain(cols, rows, widths)


def _plain(cols: list[Col], rows: Callable[[], Iterable[list[str]]], widths: list[int]) -> Iterator[str]:
    last = len(cols) - 1

    def line(cells: list[str], bar: str) -> str:
        return bar.join(_pad(shown(t), w, c.text) for c, t, w in zip(cols, cells, widths, strict=True))

    yield line([c.name for c in cols], " ┃ ")
    # under the header: each column's width and the spaces beside it (none at the edges)
    yield "╇".join("━" * (w + (i > 0) + (i < last)) for i, w in enumerate(widths))
    for r in rows():
        yield line(r, " │ ")


def _pad(text: str, width: int, left: bool) -> str:
    """A cell as rich justifies it: left as it is, right without its trailing spaces."""
    if not left:
        text = text.rstrip()
    gap = " " * (width - cell_len(text))
    return text + gap if left else gap + text


def fitted_table(cols: list[Col], rows: list[list[str]], width: int, **options: Any) -> Fitted:
    """A rich Table of the columns that fit `width`, and the names of those left out. Cells are
    text as it is, never rich markup (a topic or client id may hold brackets), with control
    characters escaped."""
    rows = [[shown(cell) for cell in r] for r in rows]
    keep, widths = choose(cols, rows, width)
    t = Table(show_edge=False, pad_edge=False, **options)
    for j, i in enumerate(keep):
        c = cols[i]
        t.add_column(c.name, justify="left" if c.text else "right", overflow="fold",
                     width=None if widths is None else widths[j])
    for r in rows:
        t.add_row(*(Text(r[i]) for i in keep))
    return Fitted(t, [cols[i].name for i in range(len(cols)) if i not in keep])
