"""The Textual app of `kdissect tui`: the message list, the field tree and the bytes of the
selected message, as Wireshark and termshark show them, over a Store decoding in the background.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Static

from kdissect.errors import KdissectError
from kdissect.text import plural, size_text
from kdissect.tui.keys import GLOBAL, keys_of
from kdissect.tui.screens.follow import FollowScreen
from kdissect.tui.screens.help import HelpScreen
from kdissect.tui.screens.prompt import PromptScreen
from kdissect.tui.screens.stats import StatsScreen
from kdissect.tui.widgets.field_tree import FieldTree
from kdissect.tui.widgets.filter_bar import FilterBar, FilterInput
from kdissect.tui.widgets.hex_view import HexView
from kdissect.tui.widgets.message_list import READ_COLUMNS, MessageList

if TYPE_CHECKING:
    from kdissect.model import Message
    from kdissect.tui.store import Progress, Store, View

FIELDS, BYTES = "Fields", "Bytes"  # the titles of the tree and hex panes
POLL_SECONDS = 0.2  # how often new messages and the progress are taken in
ALWAYS = frozenset({"quit", "help"})  # the app actions still bound while a pop-up screen is open
PANE_CSS = """
Screen { layout: vertical; }
#list { height: 2fr; }
#tree, #hex { height: 1fr; border-top: solid $panel-lighten-2; border-title-align: left; }
#tree:focus, #hex:focus { border-top: solid $accent; }
#status { height: 1; background: $panel; color: $text; }
#status.-error { color: $text-error; }
"""


class AllRows:
    """Every message of the store, in order."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __len__(self) -> int:
        return len(self.store)

    def index(self, pos: int) -> int:
        return pos

    def position(self, index: int) -> int | None:
        return index if 0 <= index < len(self.store) else None

    def nearest(self, index: int) -> int | None:
        return min(index, len(self.store) - 1) if len(self.store) else None


class ViewRows:
    """The messages a display filter passes."""

    def __init__(self, view: View) -> None:
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def index(self, pos: int) -> int:
        return self.view.index(pos)

    def position(self, index: int) -> int | None:
        return self.view.position(index)

    def nearest(self, index: int) -> int | None:
        return self.view.nearest(index)


def progress_text(p: Progress) -> str:
    """`1234 messages · 3.2 MiB of 10.0 MiB · decoding…` (done, or the reason it stopped); no
    bytes when none are counted (a live capture)."""
    parts = [plural(p.messages, "message")]
    if p.bytes_read or p.bytes_total:
        parts.append(size_text(p.bytes_read) + (f" of {size_text(p.bytes_total)}" if p.bytes_total else ""))
    parts.append(f"stopped: {p.error}" if p.error else "done" if p.done else "decoding…")
    return " · ".join(parts)


class KdissectApp(App[None]):
    """`store` is started on mount and stopped on exit; `display_filter` is applied first;
    `live` keeps the list on its newest message until the user moves away."""

    TITLE = "kdissect"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = "#list"
    CSS = PANE_CSS
    BINDINGS: ClassVar[list[BindingType]] = [Binding(k.keys, k.action, k.help, show=k.footer)
                                             for k in keys_of(GLOBAL)]

    def __init__(self, store: Store, name: str, display_filter: str | None = None, live: bool = False,
                 styles: Mapping[str, str] | None = None, poll: float = POLL_SECONDS) -> None:
        super().__init__()
        self.store = store
        self.capture_name = name
        self.initial_filter = display_filter
        self.live = live
        self.poll = poll
        self.view: View | None = None
        self.marks: set[int] = set()
        self.proto_styles = dict(styles if styles is not None else protocol_styles())
        self.msg_list = MessageList(store, AllRows(store), READ_COLUMNS, self.proto_styles, self.is_marked,
                                    id="list")
        self.field_tree = FieldTree(store.opts.max_bytes, id="tree")
        self.hex_view = HexView(id="hex")
        self.bar = FilterBar(self.check_filter)
        self.status_line = Static("", id="status", markup=False)
        self.shown: int | None = None  # the store index the tree and bytes show
        self.told = False  # the notes of a finished capture were shown
        self.status_shown = ""

    def compose(self) -> ComposeResult:
        yield self.bar
        yield self.msg_list
        yield self.field_tree
        yield self.hex_view
        yield self.status_line
        yield Footer()

    def on_mount(self) -> None:
        self.field_tree.border_title = FIELDS
        self.hex_view.border_title = BYTES
        self.msg_list.following = self.live
        self.store.start()
        if self.initial_filter:
            self.bar.input.value = self.initial_filter
            self.apply_filter(self.initial_filter)
        self.msg_list.focus()
        self.tick()
        self.set_interval(self.poll, self.tick)

    def on_unmount(self) -> None:
        self.store.stop()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return len(self.screen_stack) <= 1 or action in ALWAYS

    # -- periodic ---------------------------------------------------------------------------

    def tick(self) -> None:
        """Take in new messages; refresh the status line."""
        self.msg_list.sync()
        if self.shown is None and self.msg_list.selected is not None:
            self.show_message(self.msg_list.selected)
        text = self.status_text()
        if text != self.status_shown:
            self.status_shown = text
            self.status_line.update(text)
        self.status_line.set_class(self.store.progress.error is not None, "-error")
        progress = self.store.progress
        if progress.done and not self.told:
            self.told = True
            if progress.error:
                self.notify(f"Decoding stopped: {progress.error}", severity="error", timeout=30)
            for note in self.store.notes():
                self.notify(note, severity="warning", timeout=10)

    def status_text(self) -> str:
        parts = [self.capture_name, progress_text(self.store.progress)]
        if self.view is not None:
            busy = "" if self.view.progress.done else ", filtering…"
            parts.append(f"filter: {len(self.view)} shown{busy}")
        if self.marks:
            parts.append(f"{len(self.marks)} marked")
        if self.live:
            lst = self.msg_list
            parts.append("following" if lst.following else
                         f"↓ {plural(lst.unseen, 'new message')} (G follows)" if lst.unseen else "paused")
        return " │ ".join(parts)

    # -- selection --------------------------------------------------------------------------

    def on_message_list_highlighted(self, event: MessageList.Highlighted) -> None:
        if event.index is not None:
            self.show_message(event.index)

    def show_message(self, index: int) -> None:
        """The tree and bytes of the message at store index `index`, its matched one flagged in
        the list. A message no longer held is decoded again in a worker thread."""
        self.shown = index
        self.msg_list.peer = self.store.row(index).peer
        self.msg_list.refresh()
        m = self.store.cached(index)
        if m is not None:
            self._show_tree(m)
            return
        self.field_tree.show(None)
        self.hex_view.show(None, None)
        self.field_tree.border_title = f"{FIELDS} (decoding…)"
        self.run_worker(lambda: self._decode(index), thread=True, exclusive=True, group="decode")

    def _decode(self, index: int) -> None:
        m = self.store.message(index)
        self.call_from_thread(self._decoded, index, m)

    def _decoded(self, index: int, m: Message) -> None:
        if index == self.shown:
            self._show_tree(m)

    def _show_tree(self, m: Message) -> None:
        self.field_tree.border_title = FIELDS
        self.field_tree.show(m)
        current = self.field_tree.current
        self.hex_view.show(m, current.span if current is not None else None)

    def on_field_tree_row_highlighted(self, event: FieldTree.RowHighlighted) -> None:
        self.hex_view.show(self.field_tree.message, event.row.span if event.row is not None else None)

    def on_message_list_chosen(self, event: MessageList.Chosen) -> None:
        self.field_tree.focus()

    def go_to(self, index: int | None, what: str) -> None:
        """Select the message at store index `index` in the list, saying why when it cannot."""
        if index is None:
            self.notify(f"No {what}.", severity="warning")
        elif not self.msg_list.select_index(index):
            self.notify(f"The {what} is hidden by the display filter.", severity="warning")

    # -- filter -----------------------------------------------------------------------------

    def check_filter(self, expr: str) -> tuple[str, int] | None:
        problem = self.store.check_filter(expr)
        return None if problem is None else (problem.message, problem.pos)

    def action_focus_filter(self) -> None:
        self.bar.input.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.bar.input:
            event.stop()
            self.apply_filter(event.value)

    def on_filter_input_leave(self, event: FilterInput.Leave) -> None:
        self.msg_list.focus()

    def apply_filter(self, text: str) -> bool:
        """Show the messages `text` passes (all, when empty); False, with the reason shown, when
        it is not a valid filter."""
        from kdissect.filter.errors import FilterError

        expr = text.strip()
        try:
            view = self.store.filtered(expr) if expr else None
        except FilterError as e:
            self.bar.show_problem((e.reason, e.pos))
            self.notify(f"Bad filter: {e.reason} (column {e.pos + 1})", severity="error")
            return False
        if self.view is not None:
            self.view.stop()
        self.view = view
        self.msg_list.set_source(AllRows(self.store) if view is None else ViewRows(view), self.shown)
        self.bar.input.remember(expr)
        self.bar.show_problem(None)
        self.msg_list.focus()
        self.tick()
        return True

    def on_field_tree_filter_requested(self, event: FieldTree.FilterRequested) -> None:
        self.bar.input.value = event.expr
        if event.apply:
            self.apply_filter(event.expr)
        else:
            self.bar.input.focus()
            self.bar.input.cursor_position = len(event.expr)

    # -- actions ----------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_jump(self) -> None:
        self.push_screen(PromptScreen("Go to frame:", restrict=r"\d*"), self._jump)

    def _jump(self, answer: str | None) -> None:
        if answer:
            self.go_to(self.store.index_of_frame(int(answer)), f"message in frame {answer}")

    def action_matched(self) -> None:
        index = self.msg_list.selected
        if index is not None:
            self.go_to(self.store.row(index).peer, "matched request or response")

    def action_follow(self) -> None:
        index = self.msg_list.selected
        if index is None:
            return
        stream = self.store.row(index).stream
        indices = self.store.stream_indices(stream)
        self.push_screen(FollowScreen(self.store, stream, indices, index, self.proto_styles, self.is_marked),
                         self._followed)

    def _followed(self, index: int | None) -> None:
        if index is not None:
            self.go_to(index, "message")

    def action_stats(self) -> None:
        self._stats("Statistics", histogram_only=False)

    def action_histogram(self) -> None:
        self._stats("Response times", histogram_only=True)

    def _stats(self, heading: str, histogram_only: bool) -> None:
        view, store = self.view, self.store
        shown = self.capture_name + (f" (filter: {view.expr})" if view is not None else "")
        self.push_screen(StatsScreen(heading, lambda: (store.stats(view), store.response_times(view)),
                                     shown, histogram_only))

    def is_marked(self, index: int) -> bool:
        return index in self.marks

    def action_toggle_mark(self) -> None:
        index = self.msg_list.selected
        if index is None:
            return
        if index in self.marks:
            self.store.unmark(index)
            self.marks.discard(index)
        else:
            self.store.mark(index)
            self.marks.add(index)
        self.msg_list.refresh()
        self.tick()

    def action_write(self, with_peer: bool) -> None:
        if not self.marks:
            self.notify("No message is marked (space or M marks one).", severity="warning")
            return
        question = f"Write the packets of {plural(len(self.marks), 'marked message')}" + (
            " and their requests/responses" if with_peer else "") + " to (pcapng):"
        self.push_screen(PromptScreen(question, "marked.pcapng"), lambda path: self._write(path, with_peer))

    def _write(self, path: str | None, with_peer: bool) -> None:
        if path:
            self.run_worker(lambda: self._write_now(path, with_peer), thread=True, group="write")

    def _write_now(self, path: str, with_peer: bool) -> None:
        try:
            n = self.store.write_marked(path, with_peer)
        except (KdissectError, OSError) as e:
            self.call_from_thread(self.notify, f"Not written: {e}", severity="error")
            return
        self.call_from_thread(self.notify, f"{plural(n, 'packet')} written to {path}")

    def action_find(self) -> None:
        self.push_screen(PromptScreen("Find in the field tree:"), self._find)

    def _find(self, text: str | None) -> None:
        if text:
            n = self.field_tree.search(text)
            self.notify(f"{plural(n, 'field')} with {text!r}" if n else f"No field holds {text!r}.",
                        severity="information" if n else "warning")

    def action_find_next(self, step: int) -> None:
        if not self.field_tree.next_hit(step):
            self.notify("Nothing searched yet (ctrl+f searches).", severity="warning")


def protocol_styles() -> dict[str, str]:
    """Each protocol's colour in the list, as the packet list of `kdissect read` has it."""
    from kdissect import protocols

    return protocols.styles()


def run(store: Store, name: str, display_filter: str | None, live: bool) -> None:
    """Run the app in the terminal until the user quits."""
    KdissectApp(store, name, display_filter, live).run()
