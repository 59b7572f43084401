"""The help screen, generated from the key table."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kdissect.tui.keys import PANES, POPUP, keys_of

CLOSE_KEYS: list[BindingType] = [Binding(k.keys, "dismiss", k.help, show=False)
                                 for k in keys_of(POPUP) if k.action == "close"]


def help_table() -> Table:
    """Every key, pane by pane."""
    t = Table(show_header=False, show_edge=False, box=None, pad_edge=False, expand=True)
    t.add_column("keys", style="bold", no_wrap=True)
    t.add_column("what")
    for pane in PANES:
        t.add_row(f"[underline]{pane}[/]", "")
        for k in keys_of(pane):
            t.add_row(k.label, k.help)
        t.add_row("", "")
    return t


class HelpScreen(ModalScreen[None]):
    AUTO_FOCUS = "*"
    BINDINGS: ClassVar[list[BindingType]] = [*CLOSE_KEYS, Binding("question_mark", "dismiss", show=False)]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "kdissect tui — keys (esc closes)"
            yield Static(help_table(), id="help-text")
