"""A packet cut short (the capture ends inside it, a length that overruns) keeps what was decoded
before the cut: the header, the body's fields and the record it cuts short, the summary and the
facts; then the MALFORMED diagnostic and the undecoded rest."""

from __future__ import annotations

from cut_short_support import capture_messages, check_cut
from hypothesis import given, settings
from hypothesis import strategies as st
from pcapgen import TcpConn
from tests_support_pipeline import run_packets
from zkutil import buf, dissect, field, frame, i32, i64, reply, request, started, stat, ustr

from kdissect.dissect.base import ConversationState, Options
from kdissect.model import SECRET, Message
from kdissect.zookeeper.dissector import DISSECTOR

GET_DATA, CREATE, GET_CHILDREN, MULTI = 4, 1, 8, 14
NO_NODE = -101


def names(fields: list) -> list[str]:
    return [f.name for f in fields]


def test_get_data_reply_cut_inside_its_stat() -> None:
    c = TcpConn(sport=2181)
    pkts = c.handshake()
    pkts.append(c.segment(True, request(7, GET_DATA, ustr("/app/config") + b"\1")))
    whole = reply(7, 0x99, NO_NODE, buf(b"hello") + stat())
    pkts.append(c.segment(False, whole[:60]))  # the capture ends inside Stat.mtime
    req, resp = run_packets(pkts)
    assert resp.peer is req
    assert resp.summary == "getData → NoNode (malformed)"
    assert resp.info["error"] == "NoNode" and resp.info["error_code"] == NO_NODE
    assert resp.info["corr"] == 7 and resp.info["zxid"] == 0x99 and resp.info["path"] == "/app/config"
    assert names(resp.fields) == ["length", "xid", "zxid", "err", "data", "stat", "undecoded"]
    assert field(resp, "data").value == b"hello"
    st_ = field(resp, "stat")
    assert names(st_.children) == ["czxid", "mzxid", "ctime"]
    assert (st_.offset, st_.length) == (29, 24)
    assert [d.key for d in resp.diagnostics] == ["tcp.incomplete", "zookeeper.truncated"]
    assert resp.diagnostics[1].offset == 53  # where Stat.mtime starts
    undecoded = resp.fields[-1]
    assert (undecoded.offset, undecoded.value) == (53, whole[53:60])


def test_create_request_cut_inside_its_acl() -> None:
    acl = i32(31) + ustr("world") + ustr("anyone")
    data = request(3, CREATE, ustr("/app/n") + buf(b"hello") + i32(2) + acl + acl + i32(0))
    st_ = started()
    msg = dissect(data[:-10], True, st_)
    assert msg.summary == "create /app/n 5 bytes (malformed)"
    assert msg.info["path"] == "/app/n" and msg.info["corr"] == 3
    assert names(msg.fields) == ["length", "xid", "opcode", "path", "data", "acl"]
    acls = field(msg, "acl").children
    assert len(acls) == 2 and names(acls[1].children) == ["perms", "id"]
    assert names(acls[1].child("id").children) == ["scheme"]
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("zookeeper.truncated", 75)]  # the id's text
    assert st_.pending.peek(3) is msg  # its reply can still be matched


def test_multi_request_cut_inside_its_second_op() -> None:
    hdr = lambda t, done=False: i32(t) + (b"\1" if done else b"\0") + i32(-1)  # noqa: E731
    data = request(6, MULTI, hdr(1) + ustr("/a") + buf(b"x") + i32(0) + i32(0)
                   + hdr(2) + ustr("/b") + i32(-1) + hdr(-1, True))
    msg = dissect(data[:-12], True, started())
    assert msg.summary == "multi create /a (malformed)"
    ops = field(msg, "ops")
    assert [names(op.children) for op in ops.children] == [
        ["type", "done", "err", "path", "data", "acl", "flags"], ["type", "done", "err", "path"]]
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("zookeeper.truncated", 55)]
    assert (msg.fields[-1].name, msg.fields[-1].offset) == ("undecoded", 55)


def test_children_reply_with_fewer_children_than_its_count() -> None:
    st_ = started()
    dissect(request(9, GET_CHILDREN, ustr("/app") + b"\0"), True, st_)
    msg = dissect(reply(9, 0x30, 0, i32(3) + ustr("a") + ustr("b") + ustr("c"))[:-3], False, st_)
    assert msg.summary == "getChildren → 2 children (malformed)"
    assert msg.info["error"] is None and msg.info["op"] == "getChildren"
    assert [c.value for c in field(msg, "children").children] == ["a", "b"]
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("zookeeper.truncated", 34)]


def test_notification_cut_inside_its_path() -> None:
    msg = dissect(reply(-1, -1, 0, i32(3) + i32(3) + ustr("/app/config"))[:-4], False, started())
    assert msg.kind == "event"
    assert msg.summary == "NodeDataChanged SyncConnected (malformed)"
    assert msg.info["event"] == "NodeDataChanged" and msg.info["state"] == "SyncConnected"
    assert names(msg.fields) == ["length", "xid", "zxid", "err", "type", "state", "undecoded"]


def test_reply_header_cut_keeps_its_xid() -> None:
    msg = dissect(reply(9, 0x30, 0)[:10], False, started())
    assert msg.summary == "malformed ZooKeeper response"
    assert names(msg.fields) == ["length", "xid", "undecoded"]


def test_connect_response_cut_inside_its_password() -> None:
    st_ = DISSECTOR.new_state()
    dissect(frame(i32(0) + i64(0) + i32(30000) + i64(0) + buf(b"\0" * 16) + b"\0"), True, st_)
    resp = frame(i32(0) + i32(30000) + i64(0x1000030AD9D0000) + buf(bytes(range(1, 17))) + b"\0")
    msg = dissect(resp[:30], False, st_)
    assert msg.summary == "connected timeout=30000 session=0x1000030ad9d0000 (malformed)"
    assert msg.info["session_id"] == 0x1000030AD9D0000
    assert names(msg.fields) == ["length", "protocol_version", "time_out", "session_id", "undecoded"]
    # After the password's length: the password's first bytes, redacted (the connect carries one).
    assert (msg.fields[-1].offset, msg.fields[-1].value, msg.fields[-1].hint) == (24, "<redacted 6 bytes>", SECRET)
    st2 = DISSECTOR.new_state()
    dissect(frame(i32(0) + i64(0) + i32(30000) + i64(0) + buf(b"\0" * 16) + b"\0"), True, st2)
    shown = dissect(resp[:30], False, st2, Options(show_secrets=True))
    assert shown.fields[-1].value == bytes(range(1, 7))


# -- every cut of the messages in the project's captures ------------------------------------


def _state(m: Message) -> ConversationState:
    """A conversation as the message met it: past the handshake, its request pending."""
    st_ = DISSECTOR.new_state() if m.info.get("op") == "connect" else started()
    if m.peer is not None:
        dissect(m.peer.data, m.peer.to_server, st_)
    return st_


def _binary(m: Message) -> bool:
    n = int.from_bytes(m.data[:4], "big")
    return len(m.data) == n + 4


CAPTURED = [m for m in capture_messages("zookeeper") if _binary(m) and len(m.data) > 4]


def test_the_captures_have_binary_packets() -> None:
    assert len(CAPTURED) > 30


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_a_cut_keeps_what_was_decoded_before_it(data: st.DataObject) -> None:
    m = data.draw(st.sampled_from(CAPTURED))
    cut = data.draw(st.integers(1, len(m.data) - 1))
    # A handshake cut before its password length cannot be told from a request.
    handshake = m.info.get("op") == "connect" and cut < (32 if m.to_server else 24)
    check_cut(m, cut, dissect, _state, compare=not handshake)
