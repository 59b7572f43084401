from __future__ import annotations

import struct
import zlib

import lz4.frame
import pytest
import zstandard
from conftest import Run, field

from kdissect.dissect.base import ConversationState, Options
from kdissect.model import Group, Severity
from kdissect.rocketmq import encode as enc
from kdissect.rocketmq.dissector import DISSECTOR

JSON, BINARY = enc.SERIALIZE_JSON, enc.SERIALIZE_ROCKETMQ


def _v2(topic: str, queue: int, props: dict[str, str], sysflag: int = 0) -> dict[str, str]:
    return {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue), "f": str(sysflag),
            "g": "1700000000000", "h": "0", "i": enc.properties(props)}


@pytest.mark.parametrize("st", [JSON, BINARY])
def test_send_v2_request_and_response(run: Run, st: int) -> None:
    req = run(enc.frame(310, opaque=41, ext=_v2("orders", 3, {"KEYS": "k1", "UNIQ_KEY": "U"}), body=b"hi", serialize=st))
    assert req.kind == "request"
    assert req.summary == "SEND_MESSAGE_V2 topic=orders queue=3 keys=k1"
    assert field(req, "ext_fields.producer_group") == "PG"
    assert field(req, "ext_fields.born_timestamp") == 1700000000000
    assert field(req, "ext_fields.properties.KEYS") == "k1"
    assert field(req, "body") == b"hi"
    assert req.info["op"] == "SEND_MESSAGE_V2" and req.info["corr"] == 41 and req.info["topic"] == "orders"
    resp = run(enc.frame(0, opaque=41, flag=1, ext={"msgId": "AB", "queueId": "3", "queueOffset": "17"},
                         serialize=BINARY if st == JSON else JSON), to_server=False)
    assert resp.peer is req
    assert resp.kind == "response"
    assert resp.summary == "SUCCESS for SEND_MESSAGE_V2 topic=orders msgId=AB queue=3 offset=17"
    assert resp.info["op"] == "SEND_MESSAGE_V2" and resp.info["error"] is None


def test_long_names_are_cut_in_summaries_and_kept_whole_in_facts(run: Run) -> None:
    # A topic of 1 MB was written whole in the summary of the request and of its response.
    from kdissect.rocketmq.summary import MAX_TEXT

    topic = "T" * 1_000_000
    cut = topic[: MAX_TEXT - 1] + "…"
    req = run(enc.frame(310, opaque=42, ext=_v2(topic, 3, {"KEYS": "k" * 2000})))
    assert req.summary == f"SEND_MESSAGE_V2 topic={cut} queue=3 keys={'k' * (MAX_TEXT - 1)}…"
    resp = run(enc.frame(17, opaque=42, flag=1), to_server=False)
    assert resp.summary == f"TOPIC_NOT_EXIST for SEND_MESSAGE_V2 topic={cut}" and resp.info["topic"] == topic


def test_v2_letters_are_labelled_with_full_names(run: Run) -> None:
    msg = run(enc.frame(310, opaque=1, ext={"b": "t", "n": "broker-a"}))
    ext = next(f for f in msg.fields if f.name == "ext_fields")
    assert [(c.name, c.label) for c in ext.children or ()] == [("topic", "topic (b)"), ("broker_name", "brokerName (n)")]


def test_letters_are_not_renamed_outside_send_v2(run: Run) -> None:
    msg = run(enc.frame(11, opaque=1, ext={"b": "x"}))
    assert field(msg, "ext_fields.b") == "x"


def test_oneway_request_expects_no_response(run: Run, state: ConversationState) -> None:
    msg = run(enc.frame(15, opaque=5, flag=2, ext={"consumerGroup": "g", "topic": "t", "queueId": "1", "commitOffset": "9"}))
    assert msg.expects_response is False
    assert msg.summary == "UPDATE_CONSUMER_OFFSET group=g topic=t queue=1 offset=9"
    assert field(msg, "flag") == 2
    assert next(f for f in msg.fields if f.name == "flag").display == "ONEWAY"
    assert len(state.pending) == 0


def test_opaque_matching_is_per_initiating_side(run: Run) -> None:
    client_req = run(enc.frame(14, opaque=9, ext={"consumerGroup": "g", "topic": "t", "queueId": "0"}))
    broker_req = run(enc.frame(307, opaque=9, ext={"consumerGroup": "g"}), to_server=False)
    assert broker_req.kind == "request" and broker_req.expects_response
    client_answer = run(enc.frame(0, opaque=9, flag=1, body=b'{"jstack":""}'), to_server=True)
    assert client_answer.peer is broker_req
    broker_answer = run(enc.frame(0, opaque=9, flag=1, ext={"offset": "12"}), to_server=False)
    assert broker_answer.peer is client_req
    assert broker_answer.summary == "SUCCESS for QUERY_CONSUMER_OFFSET topic=t offset=12"


def test_pull_response_with_messages(run: Run) -> None:
    run(enc.frame(11, opaque=2, ext={"topic": "orders", "queueId": "2", "queueOffset": "10", "sysFlag": "3"}, serialize=JSON))
    body = b"".join([
        enc.stored_message("orders", zlib.compress(b"a" * 300), sysflag=0x301, queue_id=2, queue_offset=10,
                           physical_offset=4000, props={"KEYS": "z"}),
        enc.stored_message("orders", lz4.frame.compress(b"b" * 300), sysflag=0x101, queue_offset=11, born=("::1", 7)),
        enc.stored_message("orders", zstandard.ZstdCompressor().compress(b"c" * 300), sysflag=0x201, queue_offset=12,
                           magic_v2=True, store=("fe80::1", 10911)),
    ])
    resp = run(enc.frame(0, opaque=2, flag=1, ext={"nextBeginOffset": "13"}, body=body), to_server=False)
    assert resp.summary == "SUCCESS for PULL_MESSAGE topic=orders 3 messages"
    assert resp.diagnostics == []
    msgs = next(f for f in resp.fields if f.name == "messages").children or []
    assert [m.get("body") for m in msgs] == [b"a" * 300, b"b" * 300, b"c" * 300]
    assert msgs[0].get("msg_id") == "7F00000100002A9F0000000000000FA0"
    assert msgs[0].get("properties.KEYS") == "z"
    assert msgs[1].get("born_host") == "[::1]:7"
    assert msgs[2].get("store_host") == "[fe80::1]:10911"
    assert msgs[2].get("magic") == 0xDAA320AB
    assert next(c for c in msgs[0].children or [] if c.name == "sys_flag").display == "COMPRESSED|ZLIB"
    assert resp.info["messages"] == 3


def test_inner_batch_is_unwrapped(run: Run) -> None:
    run(enc.frame(11, opaque=3, ext={"topic": "t"}))
    inner = enc.batch([(b"one", {"UNIQ_KEY": "1"}), (b"two", {"UNIQ_KEY": "2"})])
    resp = run(enc.frame(0, opaque=3, flag=1, body=enc.stored_message("t", inner, sysflag=0xC0)), to_server=False)
    msg = (next(f for f in resp.fields if f.name == "messages").children or [])[0]
    inner_f = next(c for c in msg.children or [] if c.name == "inner_messages")
    assert [m.get("body") for m in inner_f.children or []] == [b"one", b"two"]
    assert [m.get("properties.UNIQ_KEY") for m in inner_f.children or []] == ["1", "2"]


def test_crc_mismatch_is_a_checksum_error(run: Run) -> None:
    run(enc.frame(11, opaque=4, ext={"topic": "t"}))
    rec = bytearray(enc.stored_message("t", b"payload"))
    rec[8:12] = b"\x00\x00\x00\x01"
    resp = run(enc.frame(0, opaque=4, flag=1, body=bytes(rec)), to_server=False)
    assert [(d.group, d.severity) for d in resp.diagnostics] == [(Group.CHECKSUM, Severity.ERROR)]


def test_decompression_is_capped(run: Run) -> None:
    ext = _v2("t", 0, {}, sysflag=0x301)
    msg = run(enc.frame(310, opaque=5, ext=ext, body=zlib.compress(b"x" * 5000)), opts=Options(max_decompressed=1000))
    assert [d.key for d in msg.diagnostics] == ["rocketmq.decompress"]
    assert "decompression budget" in msg.diagnostics[0].message


def test_a_missing_library_is_a_diagnostic(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from kdissect.wire import codecs

    monkeypatch.setitem(codecs._LIBS, "lz4.frame", False)
    ext = _v2("t", 0, {}, sysflag=0x101)
    body = lz4.frame.compress(b"x" * 300)
    msg = run(enc.frame(310, opaque=5, ext=ext, body=body))
    assert [(d.key, d.group, d.severity) for d in msg.diagnostics] == [
        ("rocketmq.codec_unavailable", Group.UNDECODED, Severity.WARNING)]
    assert msg.diagnostics[0].message == "lz4: the lz4 package is not installed: the body stays compressed"
    assert field(msg, "body") == body


def test_batch_send_is_split(run: Run) -> None:
    body = enc.batch([(b"m0", {"KEYS": "a"}), (b"m1", {"KEYS": "b"})])
    msg = run(enc.frame(320, opaque=6, ext=_v2("t", 1, {}), body=body))
    assert msg.summary == "SEND_BATCH_MESSAGE topic=t queue=1 2 messages"
    msgs = next(f for f in msg.fields if f.name == "messages").children or []
    assert [m.get("properties.KEYS") for m in msgs] == ["a", "b"]


def test_truncated_message_keeps_earlier_ones(run: Run) -> None:
    run(enc.frame(11, opaque=7, ext={"topic": "t"}))
    good = enc.stored_message("t", b"ok")
    resp = run(enc.frame(0, opaque=7, flag=1, body=good + good[:30]), to_server=False)
    msgs = next(f for f in resp.fields if f.name == "messages").children or []
    assert msgs[0].get("body") == b"ok" and msgs[1].name == "message" and msgs[2].name == "undecoded"
    assert [f.name for f in msgs[1].children or []][:3] == ["total_size", "magic", "body_crc"]
    assert [d.key for d in resp.diagnostics] == ["rocketmq.message_malformed"]
    assert resp.summary.endswith("(malformed)")


def test_json_body_fastjson(run: Run) -> None:
    run(enc.frame(105, opaque=8, ext={"topic": "t"}, serialize=JSON), to_server=True)
    body = b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"b"}],"queueDatas":[]}'
    resp = run(enc.frame(0, opaque=8, flag=1, body=body, serialize=JSON), to_server=False)
    assert field(resp, "body.broker_datas.broker_addrs.0") == "10.0.0.1:10911"
    assert resp.diagnostics == []


def test_error_response(run: Run) -> None:
    run(enc.frame(105, opaque=9, ext={"topic": "nope"}))
    resp = run(enc.frame(17, opaque=9, flag=1, remark="No topic route info"), to_server=False)
    assert resp.summary == "TOPIC_NOT_EXIST for GET_ROUTEINFO_BY_TOPIC topic=nope remark='No topic route info'"
    assert resp.info["error"] == "TOPIC_NOT_EXIST" and resp.info["error_code"] == 17
    assert [(d.group, d.severity) for d in resp.diagnostics] == [(Group.PROTOCOL, Severity.WARNING)]


def test_a_long_remark_is_cut_in_the_summary_and_the_diagnostic(run: Run) -> None:
    # The diagnostic of an error response quoted its remark whole: 4 MB of remark, a diagnostic
    # of 4 MB in every output.
    remark = "r" * 4_000_000
    resp = run(enc.frame(1, opaque=10, flag=1, remark=remark), to_server=False)
    assert resp.summary == f"SYSTEM_ERROR remark={'r' * 117!r}..."
    assert [d.message for d in resp.diagnostics] == [f"response SYSTEM_ERROR (1): {'r' * 117}..."]
    assert field(resp, "remark") == remark


def test_unmatched_response_body_is_guessed(run: Run) -> None:
    resp = run(enc.frame(0, opaque=99, flag=1, body=enc.stored_message("t", b"x")), to_server=False)
    assert resp.peer is None and resp.summary == "SUCCESS 1 message"
    raw = run(enc.frame(0, opaque=98, flag=1, body=b"\x00\x01binary"), to_server=False)
    assert [d.group for d in raw.diagnostics] == [Group.UNDECODED]


def test_malformed_frames_become_diagnostics(run: Run) -> None:
    bad_type = struct.pack(">II", 8, (5 << 24) | 4) + b"abcd"
    assert [d.key for d in run(bad_type).diagnostics] == ["rocketmq.badvalue"]
    long_header = struct.pack(">II", 8, 200) + b"{}{}"
    assert [d.key for d in run(long_header).diagnostics] == ["rocketmq.badlength"]
    not_json = struct.pack(">II", 8, 4) + b"{xx]"
    assert run(not_json).diagnostics[0].group == Group.MALFORMED


def test_unknown_request_code(run: Run) -> None:
    msg = run(enc.frame(31000, opaque=1))
    assert msg.summary == "UNKNOWN_31000"
    assert [d.group for d in msg.diagnostics] == [Group.UNDECODED]


def test_probe() -> None:
    json_req = enc.frame(105, opaque=1, ext={"topic": "t"}, serialize=JSON)
    bin_req = enc.frame(310, opaque=1, ext={"b": "t"})
    bin_resp = enc.frame(0, opaque=1, flag=1)
    assert DISSECTOR.probe(json_req[:64]) > 0.9
    assert DISSECTOR.probe(bin_req[:64]) >= 0.8
    assert DISSECTOR.probe(bin_resp[:64]) == 0.0
    assert DISSECTOR.probe_boundary(bin_resp[:64], False, DISSECTOR.new_state())
    assert DISSECTOR.probe(enc.frame(31000, opaque=1)[:64]) == 0.0
    assert DISSECTOR.probe(b"\x00\x00\x00\x10\x00\x00\x00\x20" + b"{" * 8) == 0.0  # header longer than frame
    assert DISSECTOR.probe(b"GET / HTTP/1.1\r\n") == 0.0
    assert DISSECTOR.probe(b"") == 0.0
