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
