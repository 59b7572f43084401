"""What one ZooKeeper packet may cost: vector elements and multi operations are counted per
packet; past the limit they are read (to decode what follows) but not kept, with a
diagnostic."""

from __future__ import annotations

import pytest
from zkutil import dissect, field, i32, reply, request, started, stat, ustr, value

from kdissect.dissect import base
from kdissect.model import Group


def keys(msg: object) -> list[str]:
    return [d.key for d in msg.diagnostics]  # type: ignore[attr-defined]


def test_children_past_the_limit_are_read_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 50)
    st = started()
    dissect(request(3, 12, ustr("/big") + b"\0"), True, st)  # getChildren2
    names = b"".join(ustr(f"n{i}") for i in range(1000))
    resp = dissect(reply(3, 0x10, 0, i32(1000) + names + stat(version=7)), False, st)
    children = field(resp, "children")
    assert children is not None and len(children.children or []) == 50
    assert children.label == "children (first 50 of 1000)"
    assert value(resp, "stat.version") == 7  # what follows the vector is still decoded
    assert keys(resp) == ["zookeeper.vector_limit"]
    d = resp.diagnostics[0]
    assert d.group == Group.UNDECODED and "1000 elements" in d.message and "first 50" in d.message


def test_many_empty_names_stop_at_the_default_limit() -> None:
    st = started()
    dissect(request(4, 8, ustr("/big") + b"\0"), True, st)  # getChildren
    n = 150_000
    resp = dissect(reply(4, 0x10, 0, i32(n) + b"\0\0\0\0" * n), False, st)
    children = field(resp, "children")
    assert children is not None and len(children.children or []) == base.MAX_ELEMENTS
    assert keys(resp) == ["zookeeper.vector_limit"]


def test_multi_operations_past_the_limit_are_read_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 10)
    st = started()
    hdr = lambda t, done=False: i32(t) + (b"\1" if done else b"\0") + i32(-1)  # noqa: E731
    ops = b"".join(hdr(2) + ustr(f"/n{i}") + i32(-1) for i in range(40)) + hdr(-1, True)
    req = dissect(request(5, 14, ops), True, st)
    assert len(field(req, "ops").children or []) == 10
    assert keys(req) == ["zookeeper.vector_limit"]
    assert req.summary.startswith("multi delete /n0, delete /n1")


def test_a_long_path_is_cut_in_summaries_and_kept_whole_in_the_fields() -> None:
    # A create of a 2 MB path had a summary line as long, and its reply another.
    from kdissect.zookeeper.summary import MAX_TEXT

    path = "/" + "p" * 2_000_000
    cut = path[: MAX_TEXT - 1] + "…"
    st = started()
    req = dissect(request(6, 1, ustr(path) + ustr("d") + i32(0) + i32(0)), True, st)  # create
    resp = dissect(reply(6, 0x11, 0, ustr(path)), False, st)
    hdr = lambda t, done=False: i32(t) + (b"\1" if done else b"\0") + i32(-1)  # noqa: E731
    multi = dissect(request(7, 14, hdr(2) + ustr(path) + i32(-1) + hdr(-1, True)), True, st)
    event = dissect(reply(-1, 0x12, 0, i32(3) + i32(3) + ustr(path)), False, st)
    assert req.summary == f"create {cut} 1 byte" and resp.summary == f"create → {cut}"
    assert multi.summary == f"multi delete {cut}" and event.summary == f"NodeDataChanged {cut}"
    assert value(req, "path") == path and req.info["path"] == path
