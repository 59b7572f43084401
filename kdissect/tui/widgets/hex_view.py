"""The bytes of the selected message as a hex dump, the selected field's bytes highlighted."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kdissect.tui.details import HexLine, HexLines, hex_lines
from kdissect.tui.keys import HEX, keys_of
from kdissect.tui.widgets.lines import strip_of

if TYPE_CHECKING:
    from kdissect.model import Message

OFFSET_STYLE = Style(dim=True)
HIGHLIGHT = Style(reverse=True, bold=True)
WIDTH = 16  # bytes a line
LINE_CELLS = 6 + 3 * WIDTH + 1 + WIDTH  # "0000  " hex cells, a space, the ascii column


class HexView(ScrollView, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [Binding(k.keys, k.action, k.help, show=False) for k in keys_of(HEX)]
    DEFAULT_CSS = """
    HexView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.message: Message | None = None
        self.span: tuple[int, int] | None = None
        self.lines: HexLines | list[HexLine] = []

    def show(self, m: Message | None, span: tuple[int, int] | None) -> None:
        """Show the bytes of `m` (its secrets masked) with those of `span` (offset, length)
        highlighted, scrolled to them."""
        if m is self.message and span == self.span:
            return
        self.message, self.span = m, span
        self.lines = [] if m is None else hex_lines(m, span, WIDTH)
        self.virtual_size = Size(LINE_CELLS, len(self.lines))
        if span is not None:
            first, last = span[0] // WIDTH, (span[0] + max(span[1], 1) - 1) // WIDTH
            top, height = round(self.scroll_y), max(self.size.height, 1)
            if first < top or last >= top + height:
                self.scroll_to(y=max(first - 1, 0), animate=False, immediate=True)
        else:
            self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = round(self.scroll_y) + y
        if not 0 <= i < len(self.lines):
            return Strip.blank(width)
        return draw(self.lines[i], width, round(self.scroll_x))


def draw(line: HexLine, width: int, x: int = 0) -> Strip:
    """One hex dump line: offset, the hex cells and the ascii column, highlighted cells reversed."""
    lit = set(line.highlighted)
    parts: list[tuple[str, Style | None]] = [(f"{line.offset:04x}  ", OFFSET_STYLE)]
    for n, cell in enumerate(line.cells):
        style = HIGHLIGHT if n in lit else None
        parts.append((cell, style))
        parts.append((" ", HIGHLIGHT if n in lit and n + 1 in lit else None))
    parts.append((" " * (3 * (WIDTH - len(line.cells))) + " ", None))
    for n, ch in enumerate(line.ascii):
        parts.append((ch, HIGHLIGHT if n in lit else None))
    full = strip_of(parts, max(LINE_CELLS, width))
    return full.crop(x, x + width)
