"""A frame cut short (the capture ends inside it, a length that overruns) keeps what was decoded
before the cut: the header's fields (JSON or binary) and the ext-fields read so far, the code,
remark and summary, the messages of the body and the one it cuts short; then the MALFORMED
diagnostic and the undecoded rest."""

from __future__ import annotations

from cut_short_support import capture_messages, check_cut, state_after_peer
from hypothesis import given, settings
from hypothesis import strategies as st
from pcapgen import TcpConn
from tests_support_pipeline import run_packets

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.model import Field, Message, Pdu
from kdissect.rocketmq import encode as enc
from kdissect.rocketmq.dissector import DISSECTOR

PULL, SEND_V2, BATCH, ROUTE = 11, 310, 320, 105
TOPIC_NOT_EXIST = 17


def run(data: bytes, to_server: bool = True, state: ConversationState | None = None) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "rocketmq")
    run_dissector(DISSECTOR, msg, state if state is not None else DISSECTOR.new_state(), Options())
    return msg


def names(fields: list[Field] | None) -> list[str]:
    return [f.name for f in fields or ()]


def root(msg: Message, name: str) -> Field:
    return next(f for f in msg.fields if f.name == name)


def test_pull_response_cut_inside_its_second_message() -> None:
    c = TcpConn(sport=10911)
    pkts = c.handshake()
    pkts.append(c.segment(True, enc.frame(PULL, opaque=7, ext={"topic": "orders", "queueId": "1"})))
    stored = enc.stored_message("orders", b"ok", props={"KEYS": "k1", "TAGS": "t"})
    whole = enc.frame(0, opaque=7, flag=1, ext={"nextBeginOffset": "2"}, body=stored + stored)
    pkts.append(c.segment(False, whole[:-6]))  # the capture ends inside the TAGS property
    req, resp = run_packets(pkts)
    assert resp.peer is req
    assert resp.summary == "SUCCESS for PULL_MESSAGE topic=orders 1 message (malformed)"
    assert resp.info["messages"] == 1 and resp.info["error"] is None and resp.info["topic"] == "orders"
    msgs = root(resp, "messages").children or []
    assert names(msgs) == ["message", "message", "undecoded"]
    second = msgs[1]
    assert names(second.children)[-3:] == ["topic", "properties_length", "properties"]
    assert second.get("properties.KEYS") == "k1" and second.get("properties.TAGS") is None
    cut_at = len(whole) - 6 - 1  # after the KEYS item and its separator
    assert (msgs[2].offset, msgs[2].value) == (cut_at, whole[cut_at:-6])
    assert [d.key for d in resp.diagnostics] == ["tcp.incomplete", "rocketmq.length", "rocketmq.message_malformed"]
    assert resp.diagnostics[-1].offset == cut_at


def test_error_response_cut_inside_its_ext_fields_keeps_code_and_remark() -> None:
    state = DISSECTOR.new_state()
    run(enc.frame(PULL, opaque=8, ext={"topic": "orders"}), True, state)
    remark = "No topic route info in name server for the topic: orders"
    whole = enc.frame(TOPIC_NOT_EXIST, opaque=8, flag=1, remark=remark, ext={"a": "1", "b": "2"})
    msg = run(whole[:-3], False, state)
    assert msg.summary == f"TOPIC_NOT_EXIST for PULL_MESSAGE topic=orders remark={remark!r} (malformed)"
    assert msg.info["error"] == "TOPIC_NOT_EXIST" and msg.info["error_code"] == TOPIC_NOT_EXIST
    assert msg.info["op"] == "PULL_MESSAGE"
    assert names(msg.fields) == ["length", "serialize_type", "header_length", "code", "language", "version",
                                 "opaque", "flag", "remark", "ext_fields", "undecoded"]
    assert root(msg, "remark").value == remark
    assert names(root(msg, "ext_fields").children) == ["a"]
    keys = [d.key for d in msg.diagnostics]
    assert keys == ["rocketmq.length", "rocketmq.error_response", "rocketmq.truncated"]
    assert msg.diagnostics[-1].offset == len(whole) - 5  # the second entry's value length
    assert root(msg, "undecoded").offset == len(whole) - 5


def test_json_header_cut_inside_its_ext_fields() -> None:
    ext = {"a": "PG", "b": "orders", "e": "3", "i": enc.properties({"KEYS": "k1"})}
    whole = enc.frame(SEND_V2, opaque=9, ext=ext, body=b"hi", serialize=enc.SERIALIZE_JSON)
    msg = run(whole[:-12])
    assert msg.summary == "SEND_MESSAGE_V2 topic=orders queue=3 (malformed)"
    assert msg.info["corr"] == 9 and msg.info["group"] == "PG" and msg.info["queue_id"] == 3
    assert names(root(msg, "ext_fields").children) == ["producer_group", "topic", "queue_id"]
    assert msg.diagnostics[-1].key == "rocketmq.truncated"
    undecoded = root(msg, "undecoded")
    assert undecoded.value.startswith(b',"i":') and undecoded.offset == msg.diagnostics[-1].offset


def test_batch_cut_inside_its_second_entry() -> None:
    body = enc.batch([(b"one", {"KEYS": "a"}), (b"two", {"KEYS": "b"})])
    whole = enc.frame(BATCH, opaque=3, ext={"b": "orders", "e": "0", "a": "PG"}, body=body)
    msg = run(whole[:-10])  # the second entry ends inside its body
    assert msg.summary == "SEND_BATCH_MESSAGE topic=orders queue=0 1 message (malformed)"
    assert msg.info["messages"] == 1
    entries = root(msg, "messages").children or []
    assert names(entries) == ["message", "message", "undecoded"]
    assert names(entries[1].children) == ["total_size", "magic", "body_crc", "flag", "body_length"]
    assert entries[2].offset == entries[1].offset + 20  # where the body should be
    assert [d.key for d in msg.diagnostics] == ["rocketmq.length", "rocketmq.message_malformed"]


def test_json_body_cut_short_keeps_its_members() -> None:
    state = DISSECTOR.new_state()
    run(enc.frame(ROUTE, opaque=5, ext={"topic": "orders"}), True, state)
    body = b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"b"}],"queueDatas":[]}'
    whole = enc.frame(0, opaque=5, flag=1, body=body)
    msg = run(whole[:-20], False, state)
    assert msg.summary.endswith("(malformed)")
    tree = root(msg, "body")
    assert names(tree.children) == ["broker_datas"]
    assert tree.get("broker_datas.broker_addrs.0") == "10.0.0.1:10911"
    assert [d.key for d in msg.diagnostics][-1] == "rocketmq.body_json"
    assert root(msg, "undecoded").offset == msg.diagnostics[-1].offset


def test_frame_cut_inside_its_length_word() -> None:
    msg = run(enc.frame(PULL, opaque=1)[:6])
    assert msg.summary == "malformed RocketMQ request"
    assert names(msg.fields) == ["length", "serialize_type", "undecoded"]


# -- every cut of the messages in the project's captures ------------------------------------

CAPTURED = capture_messages("rocketmq")
# Inner batches are read from the whole stored body, which a cut inside it leaves undecoded.
SKIP = frozenset({"inner_messages"})
# A text value is known whole once its closing quote or separator has arrived.
MARGIN = 1


_state = state_after_peer(DISSECTOR.new_state, run)


def test_the_captures_have_frames() -> None:
    assert len(CAPTURED) > 20


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_a_cut_keeps_what_was_decoded_before_it(data: st.DataObject) -> None:
    m = data.draw(st.sampled_from(CAPTURED))
    check_cut(m, data.draw(st.integers(1, len(m.data) - 1)), run, _state, MARGIN, SKIP)
