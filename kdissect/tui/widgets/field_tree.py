"""The field tree of the selected message, as `read -V` prints it, with expand/collapse.

The rows come from details.tree_rows (only the visible ones, given the expanded ids), so a
Fetch response with thousands of records costs only what is open. Expanded ids are kept from one
message to the next, as Wireshark keeps the subtrees it had open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message as TextualMessage
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kdissect.cliutil import TEXT_MAX_BYTES
from kdissect.tui.details import ancestors, find_in_tree, tree_rows
from kdissect.tui.keys import TREE, keys_of
from kdissect.tui.widgets.lines import CURSOR, CURSOR_UNFOCUSED, strip_of

if TYPE_CHECKING:
    from kdissect.model import Message
    from kdissect.tui.details import TreeRow

SEVERITY_STYLES = {"error": Style(color="red", bold=True), "warning": Style(color="yellow"),
                   "note": Style(color="blue"), "chat": Style(dim=True)}
HIT_STYLE = Style(underline=True, color="bright_yellow")
OPEN, CLOSED, LEAF = "▾ ", "▸ ", "  "
MAX_WIDTH = 4096  # how far the pane scrolls sideways


def row_text(r: TreeRow, open_ids: set[str]) -> str:
    """The row as drawn: indented, a sign for open or closed subtrees, the label."""
    sign = (OPEN if r.id in open_ids else CLOSED) if r.has_children else LEAF
    return "  " * r.depth + sign + r.label


class FieldTree(ScrollView, can_focus=True):
    """Posts RowHighlighted (the TreeRow under the cursor, or None) when the cursor moves."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding(k.keys, k.action, k.help, show=False) for k in keys_of(TREE)]
    DEFAULT_CSS = """
    FieldTree { height: 1fr; }
    """
    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class RowHighlighted(TextualMessage):
        def __init__(self, sender: FieldTree, row: TreeRow | None) -> None:
            super().__init__()
            self.tree = sender
            self.row = row

    class FilterRequested(TextualMessage):
        """Apply (or, with apply False, prepare) the row's filter expression."""

        def __init__(self, sender: FieldTree, expr: str, apply: bool) -> None:
            super().__init__()
            self.tree = sender
            self.expr = expr
            self.apply = apply

    def __init__(self, max_bytes: int = TEXT_MAX_BYTES, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_bytes = max_bytes  # values longer than this are cut in labels, as `read -V`
        self.message: Message | None = None
        self.expanded: set[str] | None = None  # None: not set yet (the top level opens)
        self.rows: list[TreeRow] = []
        self.hits: list[str] = []  # ids of the rows the last search found
        self.hit = -1

    # -- content ----------------------------------------------------------------------------

    def show(self, m: Message | None) -> None:
        """Show the tree of `m` (None: nothing), the cursor on the first row."""
        self.message = m
        self.hits, self.hit = [], -1
        self._rebuild(None)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.cursor = 0

    def _rebuild(self, keep: str | None) -> None:
        m = self.message
        if m is None:
            self.rows = []
        else:
            if self.expanded is None:
                self.expanded = {r.id for r in tree_rows(m, set(), self.max_bytes) if r.has_children}
            self.rows = tree_rows(m, self.expanded, self.max_bytes)
        width = min(max((len(row_text(r, self._open())) for r in self.rows), default=0) + 4, MAX_WIDTH)
        self.virtual_size = Size(width, len(self.rows))
        if keep is not None:
            self.cursor = next((i for i, r in enumerate(self.rows) if r.id == keep), self.cursor)
        self.refresh()

    @property
    def current(self) -> TreeRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    # -- cursor -----------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top, height = round(self.scroll_y), max(self.size.height, 1)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + height:
            self.scroll_to(y=new - height + 1, animate=False, immediate=True)
        self.refresh()
        self.post_message(self.RowHighlighted(self, self.current))

    def action_cursor(self, step: int) -> None:
        self.cursor += step

    def action_page(self, step: int) -> None:
        self.cursor += step * max(self.size.height, 1)

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = len(self.rows) - 1

    # -- expand / collapse -----------------------------------------------------------------

    def _open(self) -> set[str]:
        if self.expanded is None:
            self.expanded = set()
        return self.expanded

    def action_toggle_open(self) -> None:
        r = self.current
        if r is None or not r.has_children:
            return
        self._open().symmetric_difference_update({r.id})
        self._rebuild(r.id)

    def action_expand(self) -> None:
        r = self.current
        if r is not None and r.has_children and r.id not in self._open():
            self._open().add(r.id)
            self._rebuild(r.id)

    def action_collapse(self) -> None:
        r = self.current
        if r is None:
            return
        if r.has_children and r.id in self._open():
            self._open().discard(r.id)
            self._rebuild(r.id)
        elif r.depth > 0:
            parent = ancestors(r.id)[-1]
            self.cursor = next((i for i, x in enumerate(self.rows) if x.id == parent), self.cursor)

    def action_expand_all(self) -> None:
        if self.message is not None:
            self.expanded = {r.id for r in tree_rows(self.message, None, self.max_bytes) if r.has_children}
            self._rebuild(self.current.id if self.current else None)

    def action_collapse_all(self) -> None:
        self.expanded = set()
        keep = self.current.id.split(".")[0] if self.current else None
        self._rebuild(keep)

    def on_click(self, event: events.Click) -> None:
        self.cursor = round(self.scroll_y) + event.y
        r = self.current
        if r is not None and r.has_children and (event.chain >= 2 or event.x - round(self.scroll_x) <= 2 * r.depth + 1):
            self.action_toggle_open()

    # -- filters --------------------------------------------------------------------------

    def action_apply_filter(self) -> None:
        self._filter(apply=True)

    def action_prepare_filter(self) -> None:
        self._filter(apply=False)

    def _filter(self, apply: bool) -> None:
        r = self.current
        if r is None or not r.filter:
            self.notify("This field cannot be filtered on.", severity="warning")
            return
        self.post_message(self.FilterRequested(self, r.filter, apply))

    def action_copy_value(self) -> None:
        r = self.current
        if r is not None:
            self.app.copy_to_clipboard(r.value_text)
            self.notify(f"Copied the value of {r.key}.")

    def action_copy_filter(self) -> None:
        r = self.current
        if r is None or not r.filter:
            self.notify("This field has no filter expression.", severity="warning")
            return
        self.app.copy_to_clipboard(r.filter)
        self.notify(f"Copied {r.filter}")

    # -- search -----------------------------------------------------------------------------

    def search(self, text: str) -> int:
        """Find rows whose label holds `text`; go to the first. Returns the number of hits."""
        self.hits = [] if self.message is None or not text else find_in_tree(self.message, text, self.max_bytes)
        self.hit = -1
        if self.hits:
            self.next_hit(1)
        else:
            self.refresh()
        return len(self.hits)

    def next_hit(self, step: int) -> bool:
        """Go to the next (step 1) or previous (-1) hit, opening the rows above it."""
        if not self.hits:
            return False
        self.hit = (self.hit + step) % len(self.hits)
        target = self.hits[self.hit]
        missing = [a for a in ancestors(target) if a not in self._open()]
        if missing:
            self._open().update(missing)
            self._rebuild(target)
        self.cursor = next((i for i, r in enumerate(self.rows) if r.id == target), self.cursor)
        return True

    # -- drawing ----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = round(self.scroll_y) + y
        if not 0 <= i < len(self.rows):
            return Strip.blank(width)
        r = self.rows[i]
        style = SEVERITY_STYLES.get(r.style or "")
        if r.id in self.hits:
            style = style + HIT_STYLE if style else HIT_STYLE
        if i == self.cursor:
            cursor = CURSOR if self.has_focus else CURSOR_UNFOCUSED
            style = style + cursor if style else cursor
        x = round(self.scroll_x)
        full = strip_of([(row_text(r, self._open()), None)], max(self.virtual_size.width, width), style)
        return full.crop(x, x + width)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
