"""The dissector on hand-built packets: session handshake, requests, replies by xid, special
xids, multi, errors, secrets."""

from __future__ import annotations

from zkutil import buf, dissect, field, frame, i32, i64, reply, request, started, stat, ustr, value

from kdissect.dissect.base import Options

CONNECT_REQ = frame(i32(0) + i64(0) + i32(30000) + i64(0) + buf(b"\0" * 16) + b"\0")
CONNECT_RESP = frame(i32(0) + i32(30000) + i64(0x1000030AD9D0000) + buf(bytes(range(1, 17))) + b"\0")


def test_connect_pair_is_matched_and_summarised() -> None:
    from kdissect.zookeeper.dissector import DISSECTOR

    st = DISSECTOR.new_state()
    req = dissect(CONNECT_REQ, True, st)
    resp = dissect(CONNECT_RESP, False, st)
    assert req.summary == "connect timeout=30000 session=0x0"
    assert value(req, "time_out") == 30000 and value(req, "read_only") is False
    assert resp.peer is req
    assert resp.summary == "connected timeout=30000 session=0x1000030ad9d0000"
    assert value(resp, "session_id") == 0x1000030AD9D0000
    assert value(resp, "passwd") == "<redacted 16 bytes>"


def test_connect_without_read_only_byte() -> None:
    old = frame(i32(0) + i64(0x1B) + i32(10000) + i64(0x42) + buf(b"\1" * 16))
    msg = dissect(old, True)
    assert msg.summary == "connect timeout=10000 session=0x42 lastZxid=0x1b"
    assert field(msg, "read_only") is None
    assert [d.key for d in msg.diagnostics] == ["zookeeper.no_read_only"]
    assert msg.diagnostics[0].group.value == "comment"


def test_refused_reattach_is_session_expired() -> None:
    from kdissect.zookeeper.dissector import DISSECTOR

    st = DISSECTOR.new_state()
    dissect(CONNECT_REQ, True, st)
    msg = dissect(frame(i32(0) + i32(0) + i64(0) + buf(b"\0" * 16) + b"\0"), False, st)
    assert msg.summary == "connect → session expired"
    assert msg.info["error"] == "SessionExpired"


def test_show_secrets_keeps_password_bytes() -> None:
    msg = dissect(CONNECT_RESP, False, None, Options(show_secrets=True))
    assert value(msg, "passwd") == bytes(range(1, 17))


def test_get_data_request_and_reply_by_xid() -> None:
    st = started()
    req = dissect(request(7, 4, ustr("/app/config") + b"\1"), True, st)
    assert req.summary == "getData /app/config watch"
    assert req.info == {"op": "getData", "op_code": 4, "corr": 7, "error": None, "error_code": None,
                        "path": "/app/config"}
    assert field(req, "opcode").display == "getData"
    resp = dissect(reply(7, 0x20, 0, buf(b"x" * 24) + stat(version=3)), False, st)
    assert resp.peer is req
    assert resp.summary == "getData → 24 bytes v3"
    assert value(resp, "stat.version") == 3
    assert field(resp, "stat.ctime").display == "2023-11-14T22:13:20.000Z"
    assert resp.info["path"] == "/app/config"


def test_error_reply_has_no_body_and_names_the_error() -> None:
    st = started()
    dissect(request(3, 4, ustr("/nope") + b"\0"), True, st)
    resp = dissect(reply(3, 0x20, -101), False, st)
    assert resp.summary == "getData → NoNode"
    assert resp.info["error"] == "NoNode" and resp.info["error_code"] == -101
    assert field(resp, "err").display == "NoNode"
    assert not resp.diagnostics


def test_reply_without_request_shows_header_and_undecoded() -> None:
    resp = dissect(reply(9, 0x20, 0, stat()), False, started())
    assert resp.peer is None
    assert resp.summary == "reply xid=9 → ok"
    assert [d.key for d in resp.diagnostics] == ["zookeeper.undecoded"]
    assert resp.diagnostics[0].group.value == "undecoded"
    assert field(resp, "body").length == 68


def test_special_xids_without_request() -> None:
    st = started()
    assert dissect(reply(-2, 0x20, 0), False, st).summary == "ping → ok"
    assert dissect(reply(-4, 0, -115), False, st).summary == "auth → AuthFailed"
    assert dissect(reply(-8, 0, 0), False, st).summary == "setWatches → ok"


def test_ping_request_matches_ping_reply() -> None:
    st = started()
    ping = dissect(request(-2, 11), True, st)
    assert ping.summary == "ping"
    assert dissect(reply(-2, 0x20, 0), False, st).peer is ping


def test_notification_is_an_event() -> None:
    msg = dissect(reply(-1, 0x30, 0, i32(3) + i32(3) + ustr("/app/config")), False, started())
    assert msg.kind == "event"
    assert msg.summary == "NodeDataChanged /app/config"
    assert field(msg, "type").display == "NodeDataChanged"
    assert field(msg, "state").display == "SyncConnected"


def test_state_change_notification_without_path() -> None:
    msg = dissect(reply(-1, 0, 0, i32(-1) + i32(-112) + ustr("")), False, started())
    assert msg.summary == "state Expired"


def test_create_flags_acl_perms_and_auth_redaction() -> None:
    acl = i32(1) + i32(1 | 4) + ustr("digest") + ustr("alice:xyz")
    msg = dissect(request(1, 1, ustr("/e") + buf(b"v") + acl + i32(3)), True, started())
    assert msg.summary == "create /e 1 byte EPHEMERAL_SEQUENTIAL"
    assert field(msg, "acl.perms").display == "READ|CREATE"
    assert field(msg, "flags").display == "EPHEMERAL_SEQUENTIAL"
    auth = dissect(request(-4, 100, i32(0) + ustr("digest") + buf(b"alice:secret")), True, started())
    assert auth.summary == "auth digest"
    assert value(auth, "auth") == "<redacted 12 bytes>"
    assert value(auth, "opcode") == 100 and value(auth, "type") == 0


def test_multi_request_and_failed_results() -> None:
    st = started()
    hdr = lambda t, done=False, err=-1: i32(t) + (b"\1" if done else b"\0") + i32(err)  # noqa: E731
    ops = (hdr(1) + ustr("/a") + buf(b"") + i32(0) + i32(0) + hdr(13) + ustr("/b") + i32(4)
           + hdr(2) + ustr("/c") + i32(-1) + hdr(-1, True))
    req = dissect(request(5, 14, ops), True, st)
    assert req.summary == "multi create /a, check /b, delete /c"
    assert [c.child("type").display for c in field(req, "ops").children] == ["create", "check", "delete"]
    assert field(req, "ops.err").display is None  # the -1 placeholder is not an error
    results = hdr(-1, err=0) + i32(0) + hdr(-1, err=-103) + i32(-103) + hdr(-1, err=-2) + i32(-2) + hdr(-1, True)
    resp = dissect(reply(5, 0x40, 0, results), False, st)
    assert resp.peer is req
    assert resp.summary == "multi → BadVersion (op 2 of 3)"
    second = field(resp, "results").children[1]
    assert second.child("err").display == "BadVersion" and second.child("result_err").value == -103


def test_multi_read_results() -> None:
    st = started()
    hdr = lambda t, done=False, err=-1: i32(t) + (b"\1" if done else b"\0") + i32(err)  # noqa: E731
    dissect(request(6, 22, hdr(4) + ustr("/x") + b"\0" + hdr(8) + ustr("/x") + b"\0" + hdr(-1, True)), True, st)
    body = hdr(4, err=0) + buf(b"hi") + stat() + hdr(8, err=0) + i32(2) + ustr("a") + ustr("b") + hdr(-1, True)
    resp = dissect(reply(6, 0x40, 0, body), False, st)
    assert resp.summary == "multiRead → 2 results ok"
    assert [c.value for c in field(resp, "results").children[1].child("children").children] == ["a", "b"]


def test_unknown_opcode_is_undecoded_not_malformed() -> None:
    msg = dissect(request(8, 999, b"\1\2\3"), True, started())
    assert msg.summary == "opcode 999"
    assert [d.group.value for d in msg.diagnostics] == ["undecoded"]


def test_truncated_body_is_malformed_with_raw_rest() -> None:
    data = request(2, 4, ustr("/app/config") + b"\1")
    msg = dissect(data[:-3], True, started())
    assert [d.key for d in msg.diagnostics] == ["zookeeper.truncated"]
    assert field(msg, "undecoded") is not None


def test_four_letter_word_pair() -> None:
    from kdissect.zookeeper.dissector import DISSECTOR

    st = DISSECTOR.new_state()
    req = dissect(b"ruok", True, st)
    resp = dissect(b"imok", False, st)
    assert (req.summary, req.kind) == ("ruok", "request")
    assert resp.peer is req and resp.summary == "ruok → imok"
    assert value(resp, "text") == "imok"
