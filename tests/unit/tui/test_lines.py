"""The line-API panes' strips: text from a capture reaches the terminal with its control
characters escaped, in cells of the width asked for."""

from __future__ import annotations

from kdissect.tui.widgets.lines import fit, strip_of


def test_a_cell_shows_control_characters_escaped_at_its_width() -> None:
    assert fit("a\x1b[2Jb", 12) == "a\\x1b[2Jb   "
    assert fit("a\x1b[2Jb", 6) == "a\\x1b…"
    assert fit("x\ny", 4, right=True) == "x\\ny"


def test_a_strip_sends_no_control_character() -> None:
    strip = strip_of([("evil\x1b]0;t\x07", None), ("\r\nforged", None)], 40)
    text = "".join(s.text for s in strip)
    assert text.startswith("evil\\x1b]0;t\\x07\\r\\nforged") and len(text) == 40
