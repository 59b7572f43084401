from __future__ import annotations

import io
import re

from pcapgen import TcpConn, kafka_request, kafka_response
from rich.console import Console
from tests_support_pipeline import run_packets

from kdissect.model import ARRAY, BYTES, STRUCT, TIME_MS, Field, Row
from kdissect.render.jsonout import fields_dict
from kdissect.render.text import TextRenderer, summary_line, summary_plain, tree_lines


def _messages() -> list:
    c = TcpConn()
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(18, 0, 7, "app")))
    pkts.append(c.segment(False, kafka_response(7, b"\x00\x00\x00\x00\x00\x00")))
    return run_packets(pkts)


def test_plain_and_rich_summary_lines_agree() -> None:
    for m in _messages():
        assert summary_plain(m, "   0.250000") == summary_line(m, "   0.250000").plain


def test_plain_and_colour_renderers_print_the_same_text() -> None:
    msgs = _messages()
    plain_out, rich_out = io.StringIO(), io.StringIO()
    plain = TextRenderer(Console(file=plain_out, color_system=None, no_color=True, width=10_000), True, True)
    rich = TextRenderer(Console(file=rich_out, force_terminal=True, color_system="standard", width=10_000),
                        True, True)
    for m in msgs:
        plain.render(m)
        rich.render(m)
    assert "\x1b[" in rich_out.getvalue()
    no_ansi = re.sub(r"\x1b\[[0-9;]*m", "", rich_out.getvalue())
    assert [line.rstrip() for line in no_ansi.splitlines()] == [line.rstrip() for line in plain_out.getvalue().splitlines()]


def test_row_renders_like_the_fields_it_stands_for() -> None:
    cols = (("offset", None), ("timestamp", TIME_MS), ("key", BYTES), ("headers", ARRAY))
    headers = Field("headers", None, -1, 0, [], ARRAY)
    row = Row("record", cols, (5, 1700000000000, b"k\x00", headers), None)
    fields = Field("record", None, -1, 0, [
        Field("offset", 5), Field("timestamp", 1700000000000, hint=TIME_MS), Field("key", b"k\x00", hint=BYTES),
        Field("headers", None, -1, 0, [], ARRAY)], STRUCT)
    assert fields_dict([row], 256) == fields_dict([fields], 256)
    fresh = Row("record", cols, (5, 1700000000000, b"k\x00", headers), None)
    assert tree_lines([fresh], 256) == tree_lines([fields], 256)
    assert "2023-11-14T22:13:20.000Z (1700000000000)" in "\n".join(tree_lines([fields], 256))


HOSTILE = "evil\x1b]0;title\x07\x1b[31mred\x1b[0m\r\nforged line\t\x9b[2J"


def test_control_characters_from_a_capture_are_escaped_in_every_text_line() -> None:
    """A client id can hold escape sequences and line ends: the terminal sees them escaped, so
    nothing retitles or colours it, moves its cursor or forges a line of output."""
    c = TcpConn()
    pkts = c.handshake()
    pkts.append(c.segment(True, kafka_request(18, 0, 7, HOSTILE)))
    msgs = run_packets(pkts)
    escaped = "evil\\x1b]0;title\\x07\\x1b[31mred\\x1b[0m\\r\\nforged line\\t\\x9b[2J"
    for colour in (False, True):
        out = io.StringIO()
        console = Console(file=out, force_terminal=colour, color_system="standard" if colour else None,
                          no_color=not colour, width=10_000)
        renderer = TextRenderer(console, True, True)
        for m in msgs:
            renderer.render(m)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()) if colour else out.getvalue()
        assert f"client={escaped}" in text
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
        assert all(not line.startswith("forged") for line in text.splitlines())


def test_shown_escapes_control_characters_only() -> None:
    from kdissect.text import shown

    assert shown("topic-é → 🔒 [x]") == "topic-é → 🔒 [x]"
    assert shown("a\x00b\x7fc\x85d\ne") == "a\\x00b\\x7fc\\x85d\\ne"
