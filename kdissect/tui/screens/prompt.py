"""A one-line question (a frame number, a file name): Enter answers, Escape cancels."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class PromptScreen(ModalScreen[str | None]):
    AUTO_FOCUS = "#prompt-input"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", show=False)]
    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 70%; height: auto; border: round $accent; background: $surface;
                              padding: 0 1; }
    """

    def __init__(self, question: str, value: str = "", restrict: str | None = None) -> None:
        super().__init__()
        self.question = question
        self.value = value
        self.restrict = restrict

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Input(self.value, restrict=self.restrict, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)
