"""`kdissect stats`'s tables and the response-time histogram, each in its own screen, computed
in a worker thread over the messages shown."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kdissect.analysis.sketch import QuantileSketch
from kdissect.tui.screens.help import CLOSE_KEYS

TOP = 20  # rows per table, as `kdissect stats`' default --top


def stats_text(data: dict[str, Any], sketches: dict[str, QuantileSketch], title: str, width: int,
               histogram_only: bool) -> Text:
    """What `kdissect stats` prints (or its histograms alone), as styled text `width` wide."""
    from kdissect.analysis.statstext import StatsView

    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="standard", highlight=False)
    view = StatsView(console, TOP)
    if not histogram_only:
        view.show(data, title, sketches)
    else:
        for proto, sketch in sorted(sketches.items()):
            polls = sum(r["long_polls"] for r in data.get("operations", []) if r["protocol"] == proto)
            view.histogram(f"{proto} response time", sketch, polls)
        if not any(s.count for s in sketches.values()):
            console.print("No response times: no request was answered in these messages.")
    return Text.from_ansi(out.getvalue())


class StatsScreen(ModalScreen[None]):
    AUTO_FOCUS = "*"
    BINDINGS: ClassVar[list[BindingType]] = [*CLOSE_KEYS, Binding("s,r", "dismiss", show=False)]
    DEFAULT_CSS = """
    StatsScreen > VerticalScroll { border: round $accent; background: $surface; }
    """

    def __init__(self, heading: str, compute: Callable[[], tuple[dict[str, Any], dict[str, QuantileSketch]]],
                 title: str, histogram_only: bool) -> None:
        super().__init__()
        self.heading = heading
        self.compute = compute  # the statistics and the response-time sketches, from the store
        self.title_text = title
        self.histogram_only = histogram_only
        self.body = Static("Computing…", id="stats-body")

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = f"{self.heading} (esc closes)"
            yield self.body

    def on_mount(self) -> None:
        width = max(self.app.size.width - 4, 40)
        self.run_worker(lambda: self._work(width), thread=True, exclusive=True)

    def _work(self, width: int) -> None:
        data, sketches = self.compute()
        text = stats_text(data, sketches, self.title_text, width, self.histogram_only)
        self.app.call_from_thread(self.body.update, text)
