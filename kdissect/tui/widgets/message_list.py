"""The message list: `kdissect read`'s columns, one line per message, on Textual's line API.

Only the visible rows are read from the store (a ScrollView whose render_line asks for one row),
so a million messages scroll as smoothly as ten. The first line is the column header. Columns
that do not fit a narrow terminal are dropped, the lowest priority first; Info takes the rest.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message as TextualMessage
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kdissect.tui.keys import LIST, keys_of
from kdissect.tui.widgets.lines import CURSOR, CURSOR_UNFOCUSED, fit, parse_style, strip_of

if TYPE_CHECKING:
    from kdissect.tui.store import ListRow


class RowSource(Protocol):
    """The rows a list shows: positions 0..len-1, each a store index."""

    def __len__(self) -> int: ...
    def index(self, pos: int) -> int: ...
    def position(self, index: int) -> int | None: ...
    def nearest(self, index: int) -> int | None: ...


class RowStore(Protocol):
    @property
    def first_ts(self) -> float | None: ...
    def row(self, i: int) -> ListRow: ...


class IndexRows:
    """A fixed list of store indices (a conversation's messages)."""

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = list(indices)
        self._pos = {i: p for p, i in enumerate(self.indices)}

    def __len__(self) -> int:
        return len(self.indices)

    def index(self, pos: int) -> int:
        return self.indices[pos]

    def position(self, index: int) -> int | None:
        return self._pos.get(index)

    def nearest(self, index: int) -> int | None:
        pos = bisect_right(self.indices, index) - 1
        return pos if pos >= 0 else None


@dataclass(frozen=True, slots=True)
class Cells:
    """What a row's cells are computed from besides the row itself."""

    origin: float  # the time the Time column counts from
    first_src: str  # the conversation's client side (for the direction arrow)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    width: int  # 0: takes the rest of the line
    priority: int | None  # dropped first when lowest; None: always shown
    cell: Callable[[ListRow, Cells], str]
    right: bool = False


def _arrow(r: ListRow, c: Cells) -> str:
    return "→" if r.src == c.first_src else "←"


NUMBER = Column("No.", 7, None, lambda r, c: str(r.frame), right=True)
TIME = Column("Time", 11, 1, lambda r, c: f"{r.ts - c.origin:.6f}", right=True)
SOURCE = Column("Source", 21, 0, lambda r, c: r.src, right=True)
DESTINATION = Column("Destination", 21, 0, lambda r, c: r.dst)
PROTOCOL = Column("Protocol", 9, 2, lambda r, c: r.protocol.upper())
INFO = Column("Info", 0, None, lambda r, c: r.summary)
DIRECTION = Column("", 1, None, _arrow)
READ_COLUMNS = (NUMBER, TIME, SOURCE, DESTINATION, PROTOCOL, INFO)
FOLLOW_COLUMNS = (NUMBER, TIME, DIRECTION, PROTOCOL, INFO)
INFO_MIN = 30  # columns are dropped rather than leave Info narrower than this
GUTTER = 2  # the mark and the matched-message sign before each row
MARK_SIGN = "●"
PEER_SIGN = "⇄"
SEVERITY_STYLES = {"error": Style(color="red", bold=True), "warning": Style(color="yellow")}
ERROR_STYLE = Style(color="red")
MARKED_STYLE = Style(bold=True)
HEADER_STYLE = Style(bold=True, underline=True)


def fit_columns(columns: Sequence[Column], width: int) -> list[tuple[Column, int]]:
    """The columns that fit `width` cells and their widths, Info taking what is left. Columns of
    the same priority go together (Source and Destination)."""
    kept = list(columns)

    def rest() -> int:
        return width - GUTTER - sum(c.width + 1 for c in kept if c.width)

    for level in sorted({c.priority for c in columns if c.priority is not None}):
        if rest() >= INFO_MIN:
            break
        kept = [c for c in kept if c.priority != level]
    return [(c, c.width or max(rest(), 1)) for c in kept]


def row_style(r: ListRow) -> Style | None:
    if r.severity in SEVERITY_STYLES:
        return SEVERITY_STYLES[r.severity]
    return ERROR_STYLE if r.error else None


class MessageList(ScrollView, can_focus=True):
    """The packet list. `source` gives the rows (the store, or a filter's view); `cursor` is a
    position in it. Posts Highlighted when the selected message changes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding(k.keys, k.action, k.help, show=False) for k in keys_of(LIST)]
    DEFAULT_CSS = """
    MessageList { height: 1fr; overflow-x: hidden; }
    """
    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class Highlighted(TextualMessage):
        def __init__(self, sender: MessageList, index: int | None) -> None:
            super().__init__()
            self.list = sender
            self.index = index

    class Chosen(TextualMessage):
        def __init__(self, sender: MessageList, index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

    def __init__(self, store: RowStore, source: RowSource, columns: Sequence[Column] = READ_COLUMNS,
                 styles: Mapping[str, str] | None = None, marked: Callable[[int], bool] | None = None,
                 *, relative: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.relative = relative  # time from the first of these rows, not the capture's first
        self.store = store
        self.source = source
        self.columns = tuple(columns)
        self.proto_styles = {name: parse_style(s) for name, s in (styles or {}).items()}
        self.is_marked = marked or (lambda i: False)
        self.following = False  # keep the cursor on the last row as rows arrive
        self.unseen = 0  # rows arrived below while not following
        self.peer: int | None = None  # store index of the selected row's matched message
        self._count = 0
        self._cells = Cells(0.0, "")

    # -- the rows ---------------------------------------------------------------------------

    def set_source(self, source: RowSource, keep: int | None = None) -> None:
        """Show other rows, the cursor on store index `keep` or the last row before it."""
        self.source = source
        self._count = -1
        self.sync()
        pos = source.nearest(keep) if keep is not None else None
        self.cursor = pos if pos is not None else 0

    def sync(self) -> None:
        """Take in rows that arrived since (called periodically while decoding)."""
        n = len(self.source)
        if n == self._count:
            return
        grew = n - max(self._count, 0)
        was_empty = self._count <= 0
        self._count = n
        self._cells = self._origin()
        self.virtual_size = Size(self.size.width, n + 1)
        if self.following and n:
            self.cursor = n - 1
        elif was_empty and n:
            self.cursor = 0
        elif grew > 0:
            self.unseen += grew
        self.refresh()

    def _origin(self) -> Cells:
        if not len(self.source):
            return Cells(0.0, "")
        first = self.store.row(self.source.index(0))
        start = self.store.first_ts
        origin = first.ts if self.relative or start is None else start
        return Cells(origin, first.src)

    @property
    def count(self) -> int:
        return max(self._count, 0)

    @property
    def selected(self) -> int | None:
        """The store index of the row under the cursor."""
        if not 0 <= self.cursor < self.count:
            return None
        return self.source.index(self.cursor)

    def select_index(self, index: int) -> bool:
        """Put the cursor on store index `index`; False when these rows do not hold it."""
        pos = self.source.position(index)
        if pos is None:
            return False
        self.following = False
        self.cursor = pos
        return True

    def toggle_follow(self, on: bool) -> None:
        self.following = on
        if on:
            self.unseen = 0
            if self.count:
                self.cursor = self.count - 1

    # -- the cursor -------------------------------------------------------------------------

    @property
    def page_size(self) -> int:
        return max(self.size.height - 1, 1)

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.count - 1)) if self.count else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top = round(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + self.page_size:
            self.scroll_to(y=new - self.page_size + 1, animate=False, immediate=True)
        if new >= self.count - 1:
            self.unseen = 0
        self.refresh()
        self.post_message(self.Highlighted(self, self.selected))

    def _user_moved(self, to: int) -> None:
        self.following = False
        self.cursor = to

    def action_cursor(self, step: int) -> None:
        self._user_moved(self.cursor + step)

    def action_page(self, step: int) -> None:
        self._user_moved(self.cursor + step * self.page_size)

    def action_first(self) -> None:
        self._user_moved(0)

    def action_last(self) -> None:
        self.toggle_follow(True)

    def action_open(self) -> None:
        if self.selected is not None:
            self.post_message(self.Chosen(self, self.selected))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._user_moved(round(self.scroll_y) + event.y - 1)
        if event.chain >= 2 and self.selected is not None:
            self.post_message(self.Chosen(self, self.selected))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.following = False

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, self.count + 1)

    # -- drawing ----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        layout = fit_columns(self.columns, width)
        if y == 0:
            return self._header(layout, width)
        pos = round(self.scroll_y) + y - 1
        if not 0 <= pos < self.count:
            return Strip.blank(width)
        return self._row(pos, layout, width)

    def _header(self, layout: list[tuple[Column, int]], width: int) -> Strip:
        parts: list[tuple[str, Style | None]] = [(" " * GUTTER, None)]
        for c, w in layout:
            parts.append((fit(c.name, w, c.right) + " ", None))
        return strip_of(parts, width, HEADER_STYLE)

    def _row(self, pos: int, layout: list[tuple[Column, int]], width: int) -> Strip:
        index = self.source.index(pos)
        r = self.store.row(index)
        marked = self.is_marked(index)
        sign = (MARK_SIGN if marked else " ") + (PEER_SIGN if index == self.peer else " ")
        parts: list[tuple[str, Style | None]] = [(sign, None)]
        for c, w in layout:
            style = self.proto_styles.get(r.protocol) if c is PROTOCOL else None
            parts.append((fit(c.cell(r, self._cells), w, c.right) + " ", style))
        line = row_style(r)
        if marked:
            line = MARKED_STYLE + line if line else MARKED_STYLE
        if pos == self.cursor:
            cursor = CURSOR if self.has_focus else CURSOR_UNFOCUSED
            line = line + cursor if line else cursor
        return strip_of(parts, width, line)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
