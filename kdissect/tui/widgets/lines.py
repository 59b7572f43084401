"""Building the one-line strips of the line-API panes: cells cut or padded to a cell width."""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len, set_cell_size
from rich.errors import StyleSyntaxError
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from kdissect.text import shown

CURSOR = Style(reverse=True)
CURSOR_UNFOCUSED = Style(underline=True, bold=True)


def fit(text: str, width: int, right: bool = False) -> str:
    """`text` in exactly `width` cells: cut with "…" when longer, padded when shorter (its
    control characters escaped first, as strip_of writes them)."""
    if width <= 0:
        return ""
    text = shown(text)
    n = cell_len(text)
    if n > width:
        return set_cell_size(text, width - 1) + "…" if width > 1 else "…"
    pad = " " * (width - n)
    return pad + text if right else text + pad


def strip_of(parts: Iterable[tuple[str, Style | None]], width: int, line_style: Style | None = None) -> Strip:
    """A strip of (text, style) parts, exactly `width` cells, `line_style` under every part;
    control characters (from a capture's names) escaped, never sent to the terminal."""
    base = line_style or Style()
    segments = [Segment(shown(text), base + style if style is not None else base) for text, style in parts if text]
    return Strip(segments).adjust_cell_length(width, base)


def parse_style(name: str | None) -> Style | None:
    """A rich style from its name; None for no name or an unknown one."""
    if not name:
        return None
    try:
        return Style.parse(name)
    except StyleSyntaxError:
        return None
