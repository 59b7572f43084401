"""Field-level checks on real captures (../shared/captures/rocketmq) and the project's own
(captures/rocketmq)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SHARED_CAPTURES

from kdissect.model import Message
from kdissect.pipeline import dissect_file

REPO = Path(__file__).resolve().parents[3]
SHARED = SHARED_CAPTURES / "rocketmq"
OWN = REPO / "captures" / "rocketmq"


def _messages(path: Path) -> list[Message]:
    if not path.exists():
        pytest.skip(f"{path} not present")
    return list(dissect_file(str(path)))


def _by_frame(msgs: list[Message], frame: int) -> Message:
    return next(m for m in msgs if m.frame == frame)


def _get(msg: Message, path: str) -> object:
    head, _, rest = path.partition(".")
    f = next(f for f in msg.fields if f.name == head)
    return f.value if not rest else f.get(rest)


def _bad(msgs: list[Message]) -> list[Message]:
    return [m for m in msgs if any(d.severity.value == "error" or d.group.value in ("malformed", "undecoded")
                                   for d in m.diagnostics)]


def test_send_message_v2_real() -> None:
    msgs = _messages(SHARED / "deepflowio__deepflow__rocketmq-send-message-v2.pcap")
    req, resp = _by_frame(msgs, 1), _by_frame(msgs, 2)
    assert req.summary == "SEND_MESSAGE_V2 topic=TopicTest queue=0 tags=TagA"
    assert _get(req, "ext_fields.producer_group") == "please_rename_unique_group_name"
    assert _get(req, "ext_fields.born_timestamp") == 1736132550666
    assert _get(req, "ext_fields.properties.UNIQ_KEY") == "0A0000D900086E0BE8581A66E40A0000"
    assert _get(req, "body") == b"Hello RocketMQ 0"
    assert _get(req, "language") == 0 and _get(req, "version") == 293
    assert resp.peer is req and resp.match is not None
    assert resp.summary == ("SUCCESS for SEND_MESSAGE_V2 topic=TopicTest "
                            "msgId=0A0000B400002A9F00000000002EAF62 queue=0 offset=4249")
    assert _bad(msgs) == []


def test_pull_message_real() -> None:
    msgs = _messages(SHARED / "deepflowio__deepflow__rocketmq-pull-message.pcap")
    first = _by_frame(msgs, 1)
    assert first.summary == "PULL_MESSAGE topic=%RETRY%please_rename_unique_group_name_4 queue=0 offset=0"
    sys_flag = next(c for c in next(f for f in first.fields if f.name == "ext_fields").children or [] if c.name == "sys_flag")
    assert sys_flag.value == 2 and sys_flag.display == "SUSPEND"
    not_found = _by_frame(msgs, 3)
    assert not_found.summary == ("PULL_NOT_FOUND for PULL_MESSAGE topic=%RETRY%please_rename_unique_group_name_4 "
                                 "next=0 remark='NO_MESSAGE_IN_QUEUE'")
    found = _by_frame(msgs, 9)
    assert found.summary == "SUCCESS for PULL_MESSAGE topic=TopicTest 1 message"
    assert found.peer is not None and found.peer.frame == 6
    m = (next(f for f in found.fields if f.name == "messages").children or [])[0]
    assert m.get("topic") == "TopicTest" and m.get("queue_id") == 2 and m.get("queue_offset") == 1154
    assert m.get("body") == b"Hello RocketMQ 1"
    assert m.get("born_host") == "192.169.0.6:52070" and m.get("store_host") == "192.169.0.4:10911"
    assert m.get("properties.TAGS") == "TagA"
    assert m.get("msg_id") == "C0A9000400002A9F00000000000CACE0"
    assert _bad(msgs) == []


def test_route_info_fastjson_body_real() -> None:
    msgs = _messages(SHARED / "deepflowio__deepflow__rocketmq-get-routeinfo-by-topic.pcap")
    resp = _by_frame(msgs, 4)
    assert resp.peer is not None and resp.peer.summary == "GET_ROUTEINFO_BY_TOPIC topic=TopicTest"
    assert _get(resp, "body.broker_datas.broker_addrs.0") == "192.169.0.4:10911"
    assert _get(resp, "body.queue_datas.write_queue_nums") == 4
    assert _bad(msgs) == []


def test_heartbeat_and_oneway_real() -> None:
    hb = _messages(SHARED / "deepflowio__deepflow__rocketmq-heartbeat.pcap")
    assert hb[0].summary == "HEART_BEAT client=192.169.0.5@8"
    assert _get(hb[0], "body.consumer_data_set.group_name") == "please_rename_unique_group_name_4"
    upd = _messages(SHARED / "deepflowio__deepflow__rocketmq-update-consumer-offset.pcap")
    assert len(upd) == 3 and all(not m.expects_response for m in upd)
    assert upd[0].summary == "UPDATE_CONSUMER_OFFSET group=please_rename_unique_group_name_4 topic=TopicTest queue=3 offset=904"


def test_cpp_client_shared_capture() -> None:
    msgs = _messages(SHARED / "gen__rocketmq_cpp_produce.pcap")
    send = _by_frame(msgs, 11)
    assert send.summary == "SEND_MESSAGE topic=TopicGen queue=0 keys=key-0 tags=TagA"
    assert _get(send, "language") == 1  # CPP
    assert _get(send, "ext_fields.properties.prop-0") == "value-0"
    big = _by_frame(msgs, 33)
    assert _get(big, "ext_fields.sys_flag") == 1
    assert _get(big, "body") == b"B" * 300000 and _get(big, "compressed_size") == 314
    assert _bad(msgs) == []
    assert all(m.peer is not None for m in msgs if m.kind == "response")


def test_own_cpp_capture() -> None:
    msgs = _messages(OWN / "gen_cpp_produce_pull.pcap")
    pulls = [m for m in msgs if m.kind == "response" and m.info.get("op") == "PULL_MESSAGE" and m.info.get("messages")]
    assert sum(m.info["messages"] for m in pulls) == 6
    bodies = [c.get("body") for m in pulls for c in next(f for f in m.fields if f.name == "messages").children or []]
    assert b"Z" * 300000 in bodies and b"body 0" in bodies
    assert _bad(msgs) == []
    assert all(m.peer is not None for m in msgs if m.kind == "response")


def test_own_binary_capture() -> None:
    msgs = _messages(OWN / "gen_encoder_binary.pcap")
    kinds = {(m.info.get("serialize_type"), m.kind) for m in msgs}
    assert ("ROCKETMQ", "request") in kinds and ("ROCKETMQ", "response") in kinds and ("JSON", "request") in kinds
    batch = next(m for m in msgs if m.info.get("op") == "SEND_BATCH_MESSAGE" and m.kind == "request")
    assert batch.summary == "SEND_BATCH_MESSAGE topic=orders queue=0 3 messages"
    pull = next(m for m in msgs if m.kind == "response" and m.info.get("messages") == 4)
    items = next(f for f in pull.fields if f.name == "messages").children or []
    assert items[0].get("body") == b"zlib body " * 50 and items[1].get("body") == b"lz4 body " * 50
    assert items[2].get("body") == b"zstd body " * 50 and items[1].get("born_host") == "[::1]:45000"
    assert [m.get("body") for m in next(c for c in items[3].children or [] if c.name == "inner_messages").children or []] == [
        b"inner one", b"inner two"]
    direct = next(m for m in msgs if m.info.get("op") == "CONSUME_MESSAGE_DIRECTLY" and m.kind == "request")
    assert not direct.to_server and direct.match is not None
    notify = next(m for m in msgs if m.info.get("op") == "NOTIFY_CONSUMER_IDS_CHANGED")
    assert notify.expects_response is False
    assert _bad(msgs) == []
    assert all(m.peer is not None for m in msgs if m.kind == "response")
