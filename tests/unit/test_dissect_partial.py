"""The shared keeping of what was decoded before a break (dissect/partial.py), and the per-PDU
boundary that shows it when a dissector leaves it on the error."""

from __future__ import annotations

from typing import Any

from kdissect.diagnostics import Catalogue, decode_errors
from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.dissect.partial import inline_partial, keep_partial, partial_fields, take_partial
from kdissect.errors import DecodeError, Truncated
from kdissect.model import ARRAY, STRUCT, Field, Message, Pdu


def _nested_break() -> DecodeError:
    """An array of structs whose second element breaks after one field, at offset 13."""
    e: DecodeError = Truncated("int32 past the end", 13)
    keep_partial(e, "item", 9, [Field("a", 2, 9, 4)], STRUCT)
    return keep_partial(e, "items", 4, [Field("item", None, 4, 5, [], STRUCT)], ARRAY)


def test_keep_partial_nests_the_innermost_structure_last() -> None:
    e = _nested_break()
    items = e.partial
    assert (items.name, items.hint, items.offset, items.length) == ("items", ARRAY, 4, 9)
    assert [c.name for c in items.children] == ["item", "item"]
    cut = items.children[1]
    assert (cut.offset, cut.length, [f.name for f in cut.children]) == (9, 4, ["a"])


def test_inline_partial_lays_the_fields_side_by_side() -> None:
    e = _nested_break()
    inline_partial(e, [Field("header", 1, 0, 4)], "body", 0)
    assert [f.name for f in partial_fields(e)] == ["header", "item", "item"]
    assert (e.partial.offset, e.partial.length) == (0, 13)
    assert [f.name for f in take_partial(e)] == ["header", "item", "item"] and e.partial is None


class _Stub:
    """A dissector that decodes a header, sets a summary (or not), then breaks."""

    name, title, ports, max_frame = "stub", "Stub", (), 100
    diagnostics = Catalogue("stub", "Stub", decode_errors())

    def holds_secrets(self, msg: Message) -> bool:
        return False

    def __init__(self, summary: str, keep: str) -> None:
        self.summary, self.keep = summary, keep

    def dissect(self, msg: Message, state: Any, opts: Options) -> None:
        msg.fields.append(Field("length", len(msg.data), 0, 4))
        msg.summary = self.summary
        e = Truncated("int32 past the end", 6)
        inline_partial(e, [Field("code", 7, 4, 2)])
        if self.keep == "take":
            msg.fields += take_partial(e)
        elif self.keep == "copy":  # kept, but left on the error too
            msg.fields += partial_fields(e)
        raise e


def _run(summary: str, keep: str) -> Message:
    msg = Message(Pdu(b"\0\0\0\x09\0\x07\0\0", [1], 0.0, 0.0, True), 0, "c", "s", "stub")
    run_dissector(_Stub(summary, keep), msg, ConversationState(), Options())  # type: ignore[arg-type]
    return msg


def test_the_boundary_appends_the_partial_fields_a_dissector_left() -> None:
    msg = _run("op code=7", keep="")
    assert [f.name for f in msg.fields] == ["length", "code", "undecoded"]
    assert msg.summary == "op code=7 (malformed)"
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("stub.truncated", 6)]
    assert (msg.fields[-1].offset, msg.fields[-1].value) == (6, b"\0\0")


def test_the_boundary_does_not_repeat_fields_a_dissector_kept() -> None:
    for keep in ("take", "copy"):
        msg = _run("", keep)
        assert [f.name for f in msg.fields] == ["length", "code", "undecoded"]
        assert msg.summary == "malformed Stub request"
