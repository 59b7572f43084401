"""Field-level checks on real captures: the shared ones (ZooKeeper 3.8 + kazoo, zktraffic's
samples) and the project's own (tools/gen_zk_captures.py). Expected values were checked against
the client's own output recorded beside each shared capture."""

from __future__ import annotations

from zkutil import OWN_ZK, field, messages, shared_capture, value

from kdissect.model import Message


def by_op(ms: list[Message], op: str, kind: str = "request") -> list[Message]:
    return [m for m in ms if m.info.get("op") == op and m.kind == kind]


def unmatched(ms: list[Message]) -> list[Message]:
    return [m for m in ms if m.kind == "response" and m.match is None]


def test_basic_values() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_basic.pcap"))
    assert not unmatched(ms)
    assert not [m for m in ms if m.diagnostics]
    connect = ms[0]
    assert connect.summary == "connect timeout=10000 session=0x0"
    assert ms[1].summary == "connected timeout=10000 session=0x1000030ad9d0000"
    get = by_op(ms, "getData", "response")[0]
    assert get.summary == "getData → 8 bytes v0"
    assert value(get, "data") == b'{"a": 1}'
    assert (value(get, "stat.czxid"), value(get, "stat.ctime")) == (3, 1795328027446)
    first_set = by_op(ms, "setData", "response")[0]
    assert (value(first_set, "stat.mzxid"), value(first_set, "stat.version")) == (5, 1)
    assert value(first_set, "stat.mtime") == 1795328027456
    versioned = by_op(ms, "setData")[1]
    assert versioned.summary == "setData /app/config 8 bytes v1"
    kids = by_op(ms, "getChildren2", "response")[0]
    assert [c.value for c in field(kids, "children").children] == ["config", "empty"]
    utf8 = [m for m in by_op(ms, "create") if "utf8" in m.info["path"]][0]
    assert utf8.info["path"] == "/app/utf8-é中"
    assert by_op(ms, "sync", "response")[0].summary == "sync → /app"


def test_error_replies_by_name() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_errors.pcap"))
    errors = [(m.info["op"], m.info["error"]) for m in ms if m.kind == "response" and m.info.get("error")]
    assert errors == [
        ("getData", "NoNode"), ("setData", "NoNode"), ("delete", "NoNode"), ("create", "NodeExists"),
        ("delete", "NotEmpty"), ("setData", "BadVersion"), ("create", "NoNode"),
        ("create", "NoChildrenForEphemerals"), ("getChildren", "NoNode"),
    ]
    bad_version = by_op(ms, "setData", "response")[1]
    assert bad_version.info["error_code"] == -103 and len(bad_version.fields) == 4


def test_acls_and_auth() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_auth_acl.pcap"))
    assert not unmatched(ms)
    acls = field(by_op(ms, "getACL", "response")[0], "acl").children
    got = [(a.child("perms").display, a.get("id.scheme"), a.get("id.id")) for a in acls]
    assert got == [("ALL", "digest", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="), ("READ", "world", "anyone")]
    assert value(by_op(ms, "setACL", "response")[0], "stat.aversion") == 1
    auth = by_op(ms, "auth")[0]
    assert (value(auth, "xid"), value(auth, "scheme")) == (-4, "digest")
    assert str(value(auth, "auth")).startswith("<redacted")
    assert [m.info["error"] for m in by_op(ms, "getData", "response")][:1] == ["NoAuth"]


def test_multi_commit_and_rollback() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_multi.pcap"))
    ok, failed = by_op(ms, "multi", "response")
    kinds = [r.child("type").display for r in field(ok, "results").children]
    assert kinds == ["create", "create", "setData", "check", "delete"]
    assert [r.get("path") for r in field(ok, "results").children[:2]] == ["/txn/a", "/txn/b"]
    set_stat = field(ok, "results").children[2].child("stat")
    assert (set_stat.get("czxid"), set_stat.get("mzxid"), set_stat.get("version")) == (3, 4, 1)
    assert [r.child("err").value for r in field(failed, "results").children] == [0, -103, -2]
    assert failed.summary == "multi → BadVersion (op 2 of 3)"
    req = failed.peer
    assert req is not None and req.summary == "multi create /txn/c, check /txn/existing, delete /txn/nonexistent"


def test_watch_notifications() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_watches.pcap"))
    events = [m.summary for m in ms if m.kind == "event"]
    assert events[:4] == ["NodeDataChanged /watch/data", "NodeCreated /watch/later",
                          "NodeChildrenChanged /watch", "NodeDeleted /watch/later"]
    assert all(m.info["state"] == "SyncConnected" for m in ms if m.kind == "event")
    assert not unmatched(ms)


def test_pings_reattach_and_read_only() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_ping_session.pcap"))
    pings = by_op(ms, "ping")
    assert len(pings) >= 9 and all(p.match is not None and value(p, "xid") == -2 for p in pings)
    reattach = [m for m in by_op(ms, "connect") if m.info["session_id"]][0]
    assert reattach.info["session_id"] == 0x100003105150000
    assert str(value(reattach, "passwd")).startswith("<redacted 16")
    read_only = [m for m in by_op(ms, "connect") if value(m, "read_only")]
    assert [m.summary for m in read_only] == ["connect timeout=4000 session=0x0 readonly"]
    assert not unmatched(ms)


def test_four_letter_words() -> None:
    ms = messages(shared_capture("gen__zk_kazoo_four_letter.pcap"))
    words = [m.summary for m in ms if m.kind == "request" and "four_letter_word" in {f.name for f in m.fields}]
    assert words == ["ruok", "srvr", "stat", "mntr", "conf", "cons", "envi", "wchs", "dump", "isro"]
    replies = {m.peer.summary: value(m, "text") for m in ms if m.peer is not None and m.info.get("corr") == "4lw"}
    assert replies["ruok"] == "imok" and replies["isro"] == "rw"
    assert replies["wchs"] == "0 connections watching 0 paths\nTotal watches:0\n"
    assert str(replies["mntr"]).startswith("zk_version\t3.8.0")
    assert not unmatched(ms)


def test_zktraffic_samples() -> None:
    multi = messages(shared_capture("twitter__zktraffic__multi.pcap"))
    assert [m.summary for m in multi] == ["ping", "ping → ok", "multi create /foo, setData /foo",
                                         "multi → 2 results ok"]
    replies = messages(shared_capture("twitter__zktraffic__connect_replies.pcap"))
    sessions = [m.info["session_id"] for m in replies if m.kind == "response"]
    assert sessions == [0x1001113200F0001, 0x1001113200F0002, 0x1001113200F0003]
    watches = messages(shared_capture("twitter__zktraffic__setwatches.pcap"))
    sw = by_op(watches, "setWatches")[0]
    assert (value(sw, "xid"), value(sw, "relative_zxid")) == (13, 0x730)
    assert field(sw, "data_watches").children == [] and field(sw, "exist_watches").children == []
    assert [c.value for c in field(sw, "child_watches").children] == [
        "/foo", "/in", "/zookeeper", "/in/portland", "/"]
    closes = by_op(messages(shared_capture("twitter__zktraffic__connects.pcap")), "closeSession")
    assert [value(m, "opcode") for m in closes] == [-11, -11, -11]
    four = messages(shared_capture("twitter__zktraffic__get_children_with_four_letter.pcap"))
    stat = [m for m in four if m.info.get("corr") == "4lw" and m.kind == "response"][0]
    assert str(value(stat, "text")).startswith("Zookeeper version: 3.6.0-SNAPSHOT")


def test_server_only_stream_decodes_what_needs_no_request() -> None:
    ms = messages(shared_capture("twitter__zktraffic__fire_watches.pcap"))
    event = [m for m in ms if m.kind == "event"][0]
    assert event.summary == "NodeChildrenChanged /in/portland/they/eat/tacos"
    assert [m.summary for m in ms if value(m, "xid") == -2] == ["ping → ok", "ping → ok"]
    orphan = [m for m in ms if value(m, "xid") == 27][0]
    assert [d.group.value for d in orphan.diagnostics] == ["undecoded"]


def test_quorum_traffic_is_not_claimed() -> None:
    assert messages(shared_capture("twitter__zktraffic__zab_request.pcap")) == []


def test_own_extended_opcodes() -> None:
    ms = messages(OWN_ZK / "zk_extended_ops.pcap")
    assert not unmatched(ms) and not [m for m in ms if m.diagnostics]
    ops = [m.info["op"] for m in ms if m.kind == "request"]
    for op in ("create2", "createContainer", "createTTL", "getEphemerals", "getAllChildrenNumber",
               "addWatch", "checkWatches", "removeWatches", "whoAmI", "multiRead", "setWatches2", "reconfig"):
        assert op in ops
    ttl = by_op(ms, "createTTL")[0]
    assert (value(ttl, "ttl"), field(ttl, "flags").display) == (60000, "PERSISTENT_WITH_TTL")
    assert field(by_op(ms, "addWatch")[0], "mode").display == "PERSISTENT_RECURSIVE"
    assert [c.value for c in field(by_op(ms, "getEphemerals", "response")[0], "ephemerals").children] == ["/ext/eph"]
    assert value(by_op(ms, "getAllChildrenNumber", "response")[0], "total_number") == 3
    who = field(by_op(ms, "whoAmI", "response")[0], "client_info").children[0]
    assert (who.get("auth_scheme"), who.get("user")) == ("ip", "127.0.0.1")
    mr = field(by_op(ms, "multiRead", "response")[0], "results").children
    assert [r.child("type").display for r in mr] == ["getData", "getChildren", "error"]
    assert mr[2].child("err").display == "NoNode"
    assert by_op(ms, "reconfig", "response")[0].info["error"] == "ReconfigDisabled"
    assert "NodeCreated /ext/new" in [m.summary for m in ms if m.kind == "event"]


def test_own_session_and_four_letter_words() -> None:
    ms = messages(OWN_ZK / "zk_session.pcap")
    assert "connect → session expired" in [m.summary for m in ms]
    assert not unmatched(ms)
    four = messages(OWN_ZK / "zk_four_letter_more.pcap")
    stmk = [m for m in four if m.summary.startswith("stmk mask")][0]
    assert value(stmk, "trace_mask") == 0x1F2
    reply = [m for m in four if m.peer is stmk][0]
    assert value(reply, "text") == str(0x1F2)  # the server answers with the mask it set
    assert not unmatched(four)
