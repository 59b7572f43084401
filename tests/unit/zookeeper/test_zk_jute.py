"""The jute reader and its tables: primitives, bounds, nulls, nested records; packets encoded
by kazoo (an independent encoder) decode to the values kazoo was given; the generated tables
match the spec they come from."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from zkutil import REPO, SPEC, buf, dissect, field, i32, request, started, ustr, value

from kdissect.errors import BadLength, BadValue, Truncated
from kdissect.wire.reader import WireReader
from kdissect.zookeeper.codes_table import OPCODES
from kdissect.zookeeper.jute import Ctx, min_size, read_fields, read_record
from kdissect.zookeeper.records_table import RECORDS


def read(record: str, data: bytes) -> dict[str, object]:
    r = WireReader(data)
    out = {f.name: f for f in read_fields(r, record, Ctx())}
    assert r.at_end()
    return {k: (f.value if f.children is None else [c.value for c in f.children]) for k, f in out.items()}


def test_primitives_and_nulls() -> None:
    data = ustr(None) + buf(None) + i32(0)
    assert read("SetDataRequest", data) == {"path": None, "data": None, "version": 0}
    assert read("GetChildrenResponse", i32(-1)) == {"children": []}
    r = WireReader(i32(-1))
    assert read_fields(r, "GetChildrenResponse", Ctx())[0].value is None


def test_nested_records_and_vectors_of_records() -> None:
    acl = i32(2) + i32(31) + ustr("world") + ustr("anyone") + i32(1) + ustr("ip") + ustr("10.0.0.1")
    whole = read_record(WireReader(acl + bytes(68)), "GetACLResponse", "resp", Ctx())
    assert (whole.name, whole.length, len(whole.child("acl").children)) == ("resp", len(acl) + 68, 2)
    r = WireReader(ustr("/p") + acl + i32(4))
    fields = read_fields(r, "SetACLRequest", Ctx())
    acls = fields[1].children
    assert [(a.child("perms").display, a.get("id.scheme"), a.get("id.id")) for a in acls] == [
        ("ALL", "world", "anyone"), ("READ", "ip", "10.0.0.1")]
    assert acls[1].offset == 4 + 2 + 4 + 4 + 4 + 5 + 4 + 6
    assert fields[2].value == 4


def test_bad_lengths_counts_and_booleans() -> None:
    with pytest.raises(BadLength):
        read_fields(WireReader(i32(-2)), "SyncRequest", Ctx())
    with pytest.raises(Truncated):
        read_fields(WireReader(i32(100) + b"/short"), "SyncRequest", Ctx())
    with pytest.raises(BadLength):  # 2**30 ACLs cannot fit: refused before allocating
        read_fields(WireReader(i32(1 << 30) + b"\0" * 16), "GetACLResponse", Ctx())
    with pytest.raises(BadValue):
        read_fields(WireReader(ustr("/a") + b"\x02"), "GetDataRequest", Ctx())


def test_min_sizes() -> None:
    assert min_size("Stat") == 68
    assert min_size("ACL") == 12
    assert min_size("vector<ACL>") == 4
    assert min_size("ConnectResponse") == 4 + 4 + 8 + 4 + 1


def test_every_record_decodes_zero_filled_bytes() -> None:
    """All-zero bytes are valid for every layout: empty strings, vectors and false booleans."""
    for name in RECORDS:
        r = WireReader(b"\0" * 512)
        fields = read_fields(r, name, Ctx())
        assert [f.name for f in fields] == [n for n, _ in RECORDS[name]]
        assert r.pos == min_size(name)


def test_opcode_table_covers_the_spec() -> None:
    names = {v[0] for v in OPCODES.values()}
    for op in ("create", "create2", "createTTL", "createContainer", "delete", "exists", "getData",
               "setData", "getACL", "setACL", "getChildren", "getChildren2", "getAllChildrenNumber",
               "getEphemerals", "sync", "check", "multi", "multiRead", "reconfig", "checkWatches",
               "removeWatches", "addWatch", "setWatches", "setWatches2", "whoAmI", "sasl", "auth",
               "ping", "closeSession"):
        assert op in names
    for _, req, resp in OPCODES.values():
        for rec in (req, resp):
            assert rec is None or rec == "" or rec in RECORDS


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_zk_tables", REPO / "tools" / "gen_zk_tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_zk_tables"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generated_tables_match_the_spec() -> None:
    if not (SPEC / "zookeeper.jute").exists():
        pytest.skip("../shared/zookeeper-spec is not present")
    gen = _generator()
    records = gen.parse_jute((SPEC / "zookeeper.jute").read_text())
    table = REPO / "kdissect" / "zookeeper"
    assert gen.gen_records(records) == (table / "records_table.py").read_text()
    assert gen.gen_codes(SPEC, records) == (table / "codes_table.py").read_text()


# -- packets from kazoo's encoder ------------------------------------------------------------


def kazoo_request(obj: object, xid: int) -> bytes:
    body = i32(xid) + i32(obj.type) + bytes(obj.serialize())  # type: ignore[attr-defined]
    return i32(len(body)) + body


def test_kazoo_encoded_requests() -> None:
    ser = pytest.importorskip("kazoo.protocol.serialization")
    from kazoo.security import ACL, Id

    acl = [ACL(31, Id("world", "anyone")), ACL(3, Id("digest", "bob:hash"))]
    cases = [
        (ser.Create("/a/b", b"payload", acl, 2), "create /a/b 7 bytes PERSISTENT_SEQUENTIAL"),
        (ser.Create2("/c", b"", acl[:1], 1), "create2 /c 0 bytes EPHEMERAL"),
        (ser.Delete("/a/b", 4), "delete /a/b v4"),
        (ser.Exists("/x", True), "exists /x watch"),
        (ser.GetData("/x", False), "getData /x"),
        (ser.SetData("/x", b"12345", 9), "setData /x 5 bytes v9"),
        (ser.GetACL("/x"), "getACL /x"),
        (ser.SetACL("/x", acl, -1), "setACL /x 2 ACLs"),
        (ser.GetChildren("/x", True), "getChildren /x watch"),
        (ser.GetChildren2("/x", False), "getChildren2 /x"),
        (ser.Sync("/x"), "sync /x"),
        (ser.Reconfig("server.4=h:1:2", None, None, -1), "reconfig"),
        (ser.Transaction([ser.Create("/t", b"v", acl[:1], 0), ser.CheckVersion("/t", 1),
                          ser.SetData("/t", b"w", -1), ser.Delete("/t", -1)]),
         "multi create /t, check /t, setData /t +1 more"),
    ]
    st = started()
    for i, (obj, summary) in enumerate(cases, start=1):
        msg = dissect(kazoo_request(obj, i), True, st)
        assert msg.summary == summary
        assert not msg.diagnostics, (summary, msg.diagnostics)
    setacl = dissect(kazoo_request(cases[7][0], 99), True, st)
    assert [a.child("perms").display for a in field(setacl, "acl").children] == ["ALL", "READ|WRITE"]
    recon = dissect(kazoo_request(cases[11][0], 98), True, st)
    assert (value(recon, "joining_servers"), value(recon, "leaving_servers")) == ("server.4=h:1:2", None)


def test_kazoo_encoded_connect_and_auth() -> None:
    ser = pytest.importorskip("kazoo.protocol.serialization")
    body = bytes(ser.Connect(0, 0x55, 8000, 0x77, b"\x09" * 16, True).serialize())
    msg = dissect(i32(len(body)) + body, True)
    assert msg.summary == "connect timeout=8000 session=0x77 lastZxid=0x55 readonly"
    auth = dissect(kazoo_request(ser.Auth(0, "digest", "u:p"), -4), True, started())
    assert (value(auth, "scheme"), value(auth, "auth")) == ("digest", "<redacted 3 bytes>")


def test_all_request_records_round_trip_through_the_dissector() -> None:
    """Each opcode's request record, zero-filled except a '/p' path, decodes without diagnostics."""
    st = started()
    for opcode, (name, req, _) in OPCODES.items():
        if not req:
            continue
        body = b"".join(ustr("/p") if t == "ustring" and i == 0 else (b"\0" * (8 if t == "long" else 1 if t == "boolean" else 4))
                        for i, (_, t) in enumerate(RECORDS[req]))
        msg = dissect(request(10 + opcode, opcode, body), True, st)
        assert not msg.diagnostics, (name, msg.diagnostics)
        assert msg.info["op"] == name
