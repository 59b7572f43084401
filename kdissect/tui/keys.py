"""The keys of `kdissect tui`, as data: the app and its panes bind them, the help screen lists them.

Each Key names Textual key names (comma-separated), the action it runs on the pane (or the app,
for GLOBAL ones) and the words the help screen shows. The habits are termshark's, less's and vi's.
"""

from __future__ import annotations

from dataclasses import dataclass

GLOBAL = "Everywhere"
LIST = "Message list"
TREE = "Field tree"
HEX = "Bytes"
FILTER = "Filter bar"
POPUP = "Pop-up screens"


@dataclass(frozen=True, slots=True)
class Key:
    keys: str  # Textual key names, comma-separated ("j,down")
    action: str  # the action run (Textual's action syntax)
    help: str  # what the help screen says
    pane: str  # GLOBAL or the pane that binds it
    shown: str = ""  # how the help screen writes the keys ("" : from `keys`)
    footer: bool = False  # also shown in the footer

    @property
    def label(self) -> str:
        return self.shown or ", ".join(KEY_NAMES.get(k, k) for k in self.keys.split(","))


# How the help screen writes Textual's key names.
KEY_NAMES = {
    "slash": "/", "question_mark": "?", "colon": ":", "space": "space", "tab": "tab",
    "shift+tab": "shift+tab", "enter": "enter", "escape": "esc", "up": "↑", "down": "↓",
    "left": "←", "right": "→", "pageup": "PgUp", "pagedown": "PgDn", "home": "Home", "end": "End",
    "ctrl+g": "ctrl+g", "ctrl+f": "ctrl+f", "ctrl+b": "ctrl+b", "ctrl+d": "ctrl+d", "ctrl+u": "ctrl+u",
}

KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", GLOBAL, footer=True),
    Key("question_mark", "help", "This help", GLOBAL, footer=True),
    Key("slash", "focus_filter", "Edit the display filter (-Y syntax)", GLOBAL, footer=True),
    Key("ctrl+g,colon", "jump", "Go to a frame number", GLOBAL, footer=True),
    Key("tab", "focus_next", "Next pane", GLOBAL),
    Key("shift+tab", "focus_previous", "Previous pane", GLOBAL),
    Key("m", "matched", "Go to the matched request or response", GLOBAL, footer=True),
    Key("f", "follow", "Follow the conversation of the selected message", GLOBAL, footer=True),
    Key("s", "stats", "Statistics of the shown messages (as `kdissect stats`)", GLOBAL, footer=True),
    Key("r", "histogram", "Response-time histogram of the shown messages", GLOBAL),
    Key("M", "toggle_mark", "Mark or unmark the selected message", GLOBAL),
    Key("w", "write(False)", "Write the marked messages' packets to a pcapng file", GLOBAL, footer=True),
    Key("W", "write(True)", "The same, with each message's request or response", GLOBAL),
    Key("ctrl+f", "find", "Search the field tree for text", GLOBAL),
    Key("n", "find_next(1)", "Next search hit in the tree", GLOBAL),
    Key("N", "find_next(-1)", "Previous search hit in the tree", GLOBAL),
    Key("j,down", "cursor(1)", "Next message", LIST),
    Key("k,up", "cursor(-1)", "Previous message", LIST),
    Key("pagedown,ctrl+d", "page(1)", "Page down", LIST),
    Key("pageup,ctrl+u", "page(-1)", "Page up", LIST),
    Key("g,home", "first", "First message", LIST),
    Key("G,end", "last", "Last message (and follow new ones when capturing live)", LIST),
    Key("space", "app.toggle_mark", "Mark or unmark the message", LIST),
    Key("enter", "open", "Go to the field tree", LIST),
    Key("j,down", "cursor(1)", "Next field", TREE),
    Key("k,up", "cursor(-1)", "Previous field", TREE),
    Key("pagedown,ctrl+d", "page(1)", "Page down", TREE),
    Key("pageup,ctrl+u", "page(-1)", "Page up", TREE),
    Key("g,home", "first", "First field", TREE),
    Key("G,end", "last", "Last field", TREE),
    Key("enter", "toggle_open", "Expand or collapse the field", TREE),
    Key("l,right", "expand", "Expand the field", TREE),
    Key("h,left", "collapse", "Collapse the field, or go to its parent", TREE),
    Key("e", "expand_all", "Expand every field", TREE),
    Key("E", "collapse_all", "Collapse every field", TREE),
    Key("a", "apply_filter", "Apply the field as the display filter", TREE),
    Key("p", "prepare_filter", "Prepare the field as a filter (edit before applying)", TREE),
    Key("c", "copy_value", "Copy the field's value", TREE),
    Key("C", "copy_filter", "Copy the field's filter expression", TREE),
    Key("j,down", "scroll_down", "Scroll down", HEX),
    Key("k,up", "scroll_up", "Scroll up", HEX),
    Key("g,home", "scroll_home", "Top", HEX),
    Key("G,end", "scroll_end", "Bottom", HEX),
    Key("enter", "apply", "Apply the filter", FILTER),
    Key("up", "history(-1)", "Earlier filter", FILTER),
    Key("down", "history(1)", "Later filter", FILTER),
    Key("escape", "leave", "Back to the message list", FILTER),
    Key("escape,q", "close", "Close", POPUP),
    Key("enter", "choose", "In the conversation: go to the message", POPUP),
)

PANES = (GLOBAL, LIST, TREE, HEX, FILTER, POPUP)


def keys_of(pane: str) -> list[Key]:
    return [k for k in KEYS if k.pane == pane]
