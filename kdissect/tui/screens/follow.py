"""Follow a conversation: its messages decoded, both directions, an arrow for each;
Enter goes back to the main list on the chosen one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from kdissect.tui.screens.help import CLOSE_KEYS
from kdissect.tui.widgets.message_list import FOLLOW_COLUMNS, IndexRows, MessageList, RowStore


class FollowScreen(ModalScreen[int | None]):
    """Dismissed with the store index of the message chosen, or None."""

    AUTO_FOCUS = "#follow-list"
    BINDINGS: ClassVar[list[BindingType]] = [*CLOSE_KEYS, Binding("f", "dismiss", show=False)]
    DEFAULT_CSS = """
    FollowScreen > Vertical { border: round $accent; background: $surface; }
    FollowScreen #follow-title { height: 1; text-style: bold; }
    """

    def __init__(self, store: RowStore, stream: int, indices: Sequence[int], start: int | None,
                 styles: Mapping[str, str], marked: Callable[[int], bool]) -> None:
        super().__init__()
        self.stream = stream
        self.start = start
        self.list = MessageList(store, IndexRows(indices), FOLLOW_COLUMNS, styles, marked, relative=True,
                                id="follow-list")
        first = store.row(indices[0]) if indices else None
        ends = f"{first.src} ⇄ {first.dst}" if first is not None else ""
        self.heading = f"Stream {stream}: {ends} — {len(indices)} messages (→ from {first.src if first else '?'})"

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Follow conversation (enter: go to the message, esc: close)"
            yield Static(self.heading, id="follow-title", markup=False)
            yield self.list

    def on_mount(self) -> None:
        self.list.sync()
        if self.start is not None:
            self.list.select_index(self.start)
        self.list.focus()

    def on_message_list_chosen(self, event: MessageList.Chosen) -> None:
        event.stop()
        self.dismiss(event.index)

    def on_message_list_highlighted(self, event: MessageList.Highlighted) -> None:
        event.stop()
