"""The display-filter bar: the -Y language, checked as it is typed (the bad part red, a caret and
the reason under it), a history walked with up/down, applied on Enter."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message as TextualMessage
from textual.widgets import Input, Label, Static

from kdissect.tui.keys import FILTER, keys_of

PROMPT = "Filter: "
HISTORY_MAX = 100


class ErrorHighlighter(Highlighter):
    """Paints the expression red from the position of its error (the last character when the
    error is at the end)."""

    def __init__(self) -> None:
        self.pos: int | None = None

    def highlight(self, text: Text) -> None:
        if self.pos is None or not text.plain:
            return
        start = min(self.pos, len(text.plain) - 1)
        text.stylize("bold red underline", start, len(text.plain))


class FilterInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding(k.keys, k.action, k.help, show=False)
                                             for k in keys_of(FILTER) if k.action != "apply"]

    class Leave(TextualMessage):
        """Escape: back to the panes."""

    def __init__(self, check: Callable[[str], tuple[str, int] | None]) -> None:
        self.marker = ErrorHighlighter()
        super().__init__(placeholder="display filter, e.g. kafka.api_key == 1 && kafka.error_code != 0",
                         highlighter=self.marker, compact=True, select_on_focus=False, id="filter-input")
        self.check = check  # the reason and position of what is wrong with an expression, if anything
        self.history: list[str] = []
        self.at = 0  # position in the history while walking it (len: the line being typed)
        self.draft = ""
        self.problem: tuple[str, int] | None = None

    def remember(self, expr: str) -> None:
        if expr and (not self.history or self.history[-1] != expr):
            self.history.append(expr)
            del self.history[:-HISTORY_MAX]
        self.at = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self.at == len(self.history):
            self.draft = self.value
        self.at = max(0, min(self.at + step, len(self.history)))
        self.value = self.history[self.at] if self.at < len(self.history) else self.draft
        self.cursor_position = len(self.value)

    def action_leave(self) -> None:
        self.post_message(self.Leave())

    def validate_now(self) -> tuple[str, int] | None:
        self.problem = self.check(self.value) if self.value.strip() else None
        self.marker.pos = None if self.problem is None else self.problem[1]
        self.set_class(self.problem is not None, "-bad")
        self.refresh()
        return self.problem


class FilterBar(Vertical):
    """The prompt, the input and (only while the expression is bad) the line that says why."""

    DEFAULT_CSS = """
    FilterBar { height: auto; }
    FilterBar > Horizontal { height: 1; }
    FilterBar Label { width: auto; }
    FilterBar #filter-input { width: 1fr; }
    FilterBar #filter-input.-bad { background: $error 20%; }
    FilterBar #filter-error { color: $text-error; display: none; height: 1; }
    FilterBar.-bad #filter-error { display: block; }
    """

    def __init__(self, check: Callable[[str], tuple[str, int] | None]) -> None:
        super().__init__(id="filter-bar")
        self.input = FilterInput(check)

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label(PROMPT)
            yield self.input
        yield Static("", id="filter-error", markup=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show_problem(self.input.validate_now())

    def show_problem(self, problem: tuple[str, int] | None) -> None:
        """Show why the expression is bad, a caret under its position (None: it is fine)."""
        self.set_class(problem is not None, "-bad")
        if problem is None:
            return
        reason, pos = problem
        caret = max(len(PROMPT) + pos - round(self.input.scroll_x), 0)
        self.query_one("#filter-error", Static).update(f"{' ' * caret}^ {reason} (column {pos + 1})")
