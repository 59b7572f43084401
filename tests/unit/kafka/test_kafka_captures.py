"""Kafka on the shared real captures: clean decoding, field values checked by hand, quirks."""

from __future__ import annotations

import pytest
from kafka_captures import all_captures, messages

from kdissect.model import Field, Group, Message, Severity

# Captures broken on purpose, and the messages that cannot decode (see docs/kafka.md).
BROKEN = {
    "ajbanjara__Wireshark__kafka-testcases-v4__unsupported-version.pcapng": 3,
}


def bad(m: Message) -> bool:
    return any(d.severity == Severity.ERROR or d.group in (Group.MALFORMED, Group.UNDECODED)
               for d in m.diagnostics)


def find(fields: list[Field], name: str) -> Field | None:
    for f in fields:
        if f.name == name:
            return f
    return None


@pytest.mark.parametrize("name", all_captures())
def test_capture_decodes_cleanly(name: str) -> None:
    ms = messages(name)
    assert ms
    assert sum(bad(m) for m in ms) == BROKEN.get(name, 0)


def test_produce_v9_request_and_response() -> None:
    req, resp = messages("deepflowio__deepflow__00-produce-v9.pcap")
    assert req.summary == "Produce v9 request corr=47 client=console-producer acks=1 zqy-test[0:1 record]"
    assert req.info["topics"] == ["zqy-test"] and req.info["acks"] == 1
    assert resp.peer is req and resp.info["error_code"] == 0 and resp.info["error"] is None
    assert resp.summary == "Produce v9 response corr=47 zqy-test[0@35]"
    responses = find(resp.fields, "responses")
    assert responses is not None and responses.children
    parts = find(responses.children[0].children or [], "partition_responses")
    assert parts is not None and parts.children
    values = {f.name: f.value for f in parts.children[0].children or []}
    assert values["index"] == 0 and values["base_offset"] == 35 and values["error_code"] == 0


def test_fetch_v0_to_v3_old_versions() -> None:
    ms = messages("ajbanjara__Wireshark__kafka-testcases-v4__fetch.pcapng")
    versions = {m.info["version"] for m in ms}
    assert versions == {0, 1, 2, 3}
    first = ms[1]
    assert first.summary == "Fetch v0 response corr=0 topic1[0] hw=7 7 batches 7 records"
    unknown = ms[3]
    assert unknown.info["error"] == "UNKNOWN_TOPIC_OR_PARTITION" and unknown.info["error_code"] == 3


def test_offset_commit_v1_commit_timestamp() -> None:
    ms = messages("ajbanjara__Wireshark__kafka-testcases-v4__offset-commit.pcapng")
    v1 = next(m for m in ms if m.kind == "request" and m.info["version"] == 1)
    topics = find(v1.fields, "topics")
    assert topics is not None and topics.children
    part = find(topics.children[0].children or [], "partitions")
    assert part is not None and part.children
    names = [f.name for f in part.children[0].children or []]
    assert names == ["partition_index", "committed_offset", "commit_timestamp", "committed_metadata"]
    assert any(d.key == "kafka.removed_version" and d.severity == Severity.NOTE for d in v1.diagnostics)


def test_produce_acks_0_expects_no_response() -> None:
    ms = messages("gen__mock_ck_produce_acks.pcap")
    produce = [m for m in ms if m.info.get("op") == "Produce" and m.kind == "request"]
    acks0 = [m for m in produce if m.info["acks"] == 0]
    assert acks0 and all(not m.expects_response for m in acks0)
    # librdkafka's mock cluster answers acks=0 anyway: the answer points to its request by
    # correlation id, and the request, which waited for nothing, shows no link
    assert all(m.match is None for m in acks0)
    answers = {m.peer.frame: m for m in ms if m.kind == "response" and m.peer in acks0}
    assert sorted(answers) == [m.frame for m in acks0]
    assert all(a.match is not None and a.match.frame == a.frame - 1 for a in answers.values())
    assert all(m.match is not None for m in produce if m.info["acks"] != 0)


def test_heartbeat_error_name() -> None:
    ms = messages("ajbanjara__Wireshark__kafka-testcases-v4__request-missing.pcapng")
    resp = ms[-1]
    assert resp.info["error_code"] == 25 and resp.info["error"] == "UNKNOWN_MEMBER_ID"
    assert resp.summary.endswith("UNKNOWN_MEMBER_ID")
    err = find(resp.fields, "error_code")
    assert err is not None and err.display == "UNKNOWN_MEMBER_ID"


def test_controlled_shutdown_v0_with_client_id_and_in_order_match() -> None:
    ms = messages("ajbanjara__Wireshark__kafka-testcases-v4__unsupported-version.pcapng")
    cs0 = next(m for m in ms if m.info.get("op") == "ControlledShutdown" and m.info["version"] == 0)
    assert find(cs0.fields, "broker_id") is not None and find(cs0.fields, "broker_id").value == 1000  # type: ignore[union-attr]
    assert cs0.info["client_id"] == "test"
    resp = next(m for m in ms if m.peer is cs0)
    assert any(d.key == "kafka.correlation_mismatch" for d in resp.diagnostics)
    unknown = ms[0]
    assert any(d.key == "kafka.unknown_api" for d in unknown.diagnostics)


def test_api_versions_unsupported_version_body() -> None:
    ms = messages("gen__mock_ck_metadata.pcap")
    err = next(m for m in ms if m.kind == "response" and m.info.get("op") == "ApiVersions"
               and m.info["error_code"] == 35)
    assert err.info["error"] == "UNSUPPORTED_VERSION"
    ok = next(m for m in ms if m.kind == "response" and m.info.get("op") == "ApiVersions"
              and m.info["error_code"] == 0)
    keys = find(ok.fields, "api_keys")
    assert keys is not None and len(keys.children or []) == 24


def test_consumer_protocol_in_sync_group() -> None:
    ms = messages("gen__mock_ck_consumer_group.pcap")
    sync = next(m for m in ms if m.info.get("op") == "SyncGroup" and m.kind == "response"
                and m.info["error_code"] == 0 and m.info.get("topics"))
    assignment = find(sync.fields, "assignment")
    assert assignment is not None and assignment.label == "consumer protocol assignment"
    parts = find(assignment.children or [], "assigned_partitions")
    assert parts is not None and parts.children
    assert find(parts.children[0].children or [], "topic").value == "grp"  # type: ignore[union-attr]


def test_injected_errors_reach_info_and_summary() -> None:
    ms = messages("gen__mock_ck_errors.pcap")
    errors = {m.info["error"] for m in ms if m.kind == "response" and m.info.get("error")}
    assert {"NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"} <= errors
    m = next(m for m in ms if m.info.get("error") == "NOT_LEADER_OR_FOLLOWER")
    assert m.summary.endswith("NOT_LEADER_OR_FOLLOWER")


def test_old_protocol_produce_v0() -> None:
    ms = messages("gen__mock_kp_api_0_8_2.pcap")
    produce = [m for m in ms if m.info.get("op") == "Produce" and m.kind == "request"]
    assert produce and {m.info["version"] for m in produce} == {0}
    assert produce[0].info["acks"] == -1 and "acks=all" in produce[0].summary
