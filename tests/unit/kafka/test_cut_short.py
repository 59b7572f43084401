"""A body cut short keeps what was decoded before the cut: the tree, the summary and the error
code, then the MALFORMED diagnostic and the undecoded rest."""

from __future__ import annotations

import struct

from pcapgen import TcpConn, kafka_request, kafka_response
from tests_support_pipeline import run_packets

LEAVE_GROUP = 13


def _leave_group_v3(response_body: bytes) -> list:
    c = TcpConn()
    pkts = c.handshake()
    member = struct.pack(">h", 2) + b"m1" + struct.pack(">h", -1)
    req_body = struct.pack(">h", 6) + b"group1" + struct.pack(">i", 1) + member
    pkts.append(c.segment(True, kafka_request(LEAVE_GROUP, 3, 5, "app", req_body)))
    pkts.append(c.segment(False, kafka_response(5, response_body)))
    return run_packets(pkts)


def test_response_cut_inside_an_array_keeps_the_error_code() -> None:
    # throttle_time_ms, error_code 25 (UNKNOWN_MEMBER_ID), then one member cut inside its id.
    body = struct.pack(">ihi", 0, 25, 1) + struct.pack(">h", 8) + b"memb"
    _, resp = _leave_group_v3(body)
    assert resp.summary == "LeaveGroup v3 response corr=5 UNKNOWN_MEMBER_ID (malformed)"
    assert resp.info["error_code"] == 25 and resp.info["error"] == "UNKNOWN_MEMBER_ID"
    names = [f.name for f in resp.fields]
    assert names[:4] == ["length", "header", "throttle_time_ms", "error_code"]
    members = resp.fields[4]
    assert members.name == "members" and members.offset == 14 and members.length == 6
    assert [d.key for d in resp.diagnostics] == ["kafka.truncated"]
    assert resp.diagnostics[0].offset == 20  # where the member id's 8 bytes should start
    undecoded = resp.fields[-1]
    assert (undecoded.name, undecoded.offset, undecoded.value) == ("undecoded", 20, b"memb")


def test_request_cut_short_keeps_its_group() -> None:
    c = TcpConn()
    pkts = c.handshake()
    req_body = struct.pack(">h", 6) + b"group1" + struct.pack(">i", 3)  # three members, none sent
    pkts.append(c.segment(True, kafka_request(LEAVE_GROUP, 3, 5, "app", req_body)))
    (req,) = run_packets(pkts)
    assert req.summary.startswith("LeaveGroup v3 request corr=5 client=app group=group1")
    assert req.summary.endswith("(malformed)")
    assert req.info["group"] == "group1"
    assert any(d.key.startswith("kafka.") and d.severity.value == "error" for d in req.diagnostics)
