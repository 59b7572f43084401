"""The RocketMQ analyzer: on real captures (a missing topic's route lookup, healthy traffic) and
on answers encoded with the project's encoder and decoded by the dissector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES, capture_args, shared_captures

from kdissect.cliutil import build, iter_capture
from kdissect.dissect.base import Options, run_dissector
from kdissect.expert.analyzers.rocketmq import RocketMQ
from kdissect.expert.engine import Expert, Result
from kdissect.model import Field, Message, Pdu
from kdissect.rocketmq import encode
from kdissect.rocketmq.dissector import DISSECTOR

SEND_V2, PULL, ROUTE = 310, 11, 105
SUCCESS, SYSTEM_BUSY, FLUSH_DISK_TIMEOUT, NO_PERMISSION, TOPIC_NOT_EXIST, PULL_OFFSET_MOVED = 0, 2, 10, 16, 17, 21
SYSTEM_ERROR, PULL_NOT_FOUND = 1, 19


def analyse(path: Path) -> Result:
    args = capture_args(path)
    decode_as = tuple(args[i + 1] for i, a in enumerate(args) if a == "--decode-as")
    registry, opts = build(decode_as, 0, 0, False)
    expert = Expert(analyzers=[RocketMQ])
    return expert.add_all(iter_capture((str(path),), registry, opts, observers=[expert]))


class Exchange:
    """Requests and answers of one connection, dissected as the pipeline would."""

    def __init__(self) -> None:
        self.state = DISSECTOR.new_state()
        self.messages: list[Message] = []
        self.opaque = 0

    def _go(self, data: bytes, to_server: bool, ts: float) -> Message:
        m = Message(Pdu(data, [len(self.messages) + 1], ts, ts, to_server), 0, "10.0.0.1:40000",
                    "10.0.0.9:10911", "rocketmq")
        if not to_server:
            m.src, m.dst = m.dst, m.src
        run_dissector(DISSECTOR, m, self.state, Options())
        self.messages.append(m)
        return m

    def call(self, code: int, ext: dict[str, str], answer: int, ts: float, remark: str | None = None,
             answer_ext: dict[str, str] | None = None) -> None:
        self.opaque += 1
        self._go(encode.frame(code, opaque=self.opaque, ext=ext, version=401), True, ts)
        self._go(encode.frame(answer, opaque=self.opaque, flag=1, remark=remark, ext=answer_ext, version=401),
                 False, ts + 0.01)

    def result(self) -> Result:
        return Expert(analyzers=[RocketMQ]).add_all(self.messages)


def send(x: Exchange, answer: int, ts: float, topic: str = "orders", remark: str | None = None) -> None:
    x.call(SEND_V2, {"a": "PID-shop", "b": topic, "e": "1"}, answer, ts, remark)


def keys(result: Result) -> list[str]:
    return [f.kind.key for f in result.findings]


def test_missing_topic_route_lookup_in_a_real_capture() -> None:
    result = analyse(CAPTURES / "rocketmq" / "gen_encoder_binary.pcap")
    assert keys(result) == ["rocketmq.topic_not_exist"]
    f = result.findings[0]
    assert f.frames == [9] and f.count == 1 and f.severity.value == "note"
    assert f.values["topic"] == "orders-missing" and f.values["op"] == "GET_ROUTEINFO_BY_TOPIC"
    assert f.values["broker"] == "127.0.0.1:9876"
    assert f.values["remark"] == "No topic route info in name server for the topic: orders-missing"
    assert result.charts["rocketmq_codes"] == [{"op": "GET_ROUTEINFO_BY_TOPIC", "code": "TOPIC_NOT_EXIST",
                                                "topic": "orders-missing", "broker": "127.0.0.1:9876", "count": 1}]


@pytest.mark.parametrize("name", ["gen_cpp_produce_pull.pcap"])
def test_healthy_project_capture_has_no_finding(name: str) -> None:
    result = analyse(CAPTURES / "rocketmq" / name)
    assert result.messages > 20
    assert result.findings == []


def test_healthy_shared_captures_have_no_finding() -> None:
    paths = shared_captures("rocketmq")
    assert paths
    for path in paths:
        assert analyse(path).findings == [], path.name


def test_send_failures_grouped_by_topic_and_code() -> None:
    x = Exchange()
    send(x, SUCCESS, 1.0)
    send(x, SYSTEM_ERROR, 2.0, remark="store put message failed")
    send(x, SYSTEM_ERROR, 3.0)
    send(x, NO_PERMISSION, 4.0, topic="audit", remark="the broker[b1] sending message is forbidden")
    result = x.result()
    assert keys(result) == ["rocketmq.send_failed", "rocketmq.send_failed"]
    by_topic = {f.values["topic"]: f for f in result.findings}
    f = by_topic["orders"]
    assert f.count == 2 and f.values["code"] == "SYSTEM_ERROR" and f.values["group"] == "PID-shop"
    assert f.values["queues"] == ["1"] and f.values["remark"] == "store put message failed"
    assert f.frames == [4, 6] and f.first_ts == pytest.approx(2.01) and f.last_ts == pytest.approx(3.01)
    assert "answered SYSTEM_ERROR to 2 SEND_MESSAGE_V2 on topic orders" in f.summary
    assert by_topic["audit"].values["code"] == "NO_PERMISSION"


def test_broker_busy_on_any_request() -> None:
    x = Exchange()
    for i in range(3):
        send(x, SYSTEM_BUSY, 1.0 + i, remark="[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while")
    x.call(PULL, {"consumerGroup": "CID-a", "topic": "orders", "queueId": "0", "queueOffset": "5"}, SYSTEM_BUSY, 9.0)
    result = x.result()
    assert keys(result) == ["rocketmq.broker_busy", "rocketmq.broker_busy"]
    sends = next(f for f in result.findings if f.values["op"] == "SEND_MESSAGE_V2")
    assert sends.count == 3 and sends.severity.value == "warning"
    assert sends.values["remark"].startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")


def test_stored_without_durability() -> None:
    x = Exchange()
    send(x, FLUSH_DISK_TIMEOUT, 1.0)
    result = x.result()
    assert keys(result) == ["rocketmq.store_degraded"]
    assert result.findings[0].values["code"] == "FLUSH_DISK_TIMEOUT"


def test_pull_refused_and_offset_moved_but_not_found_is_normal() -> None:
    x = Exchange()
    pull = {"consumerGroup": "CID-a", "topic": "orders", "queueId": "3", "queueOffset": "10"}
    x.call(PULL, pull, PULL_NOT_FOUND, 1.0)
    x.call(PULL, pull, PULL_OFFSET_MOVED, 2.0, answer_ext={"nextBeginOffset": "40"})
    x.call(PULL, pull, PULL_OFFSET_MOVED, 3.0)
    x.call(PULL, pull, NO_PERMISSION, 4.0)
    result = x.result()
    assert sorted(keys(result)) == ["rocketmq.pull_offset_moved", "rocketmq.refused"]
    moved = next(f for f in result.findings if f.kind.key == "rocketmq.pull_offset_moved")
    assert moved.count == 2 and moved.values["group"] == "CID-a" and moved.values["queues"] == ["3"]


def test_missing_retry_topic_lookup_is_not_reported() -> None:
    x = Exchange()
    x.call(ROUTE, {"topic": "%RETRY%CID-a"}, TOPIC_NOT_EXIST, 1.0)
    x.call(ROUTE, {"topic": "payments"}, TOPIC_NOT_EXIST, 2.0)
    result = x.result()
    assert [f.values["topic"] for f in result.findings] == ["payments"]


def _hostile() -> list[Message]:
    out = []
    infos: list[dict[str, Any]] = [
        {}, {"error": 5}, {"error": "SYSTEM_BUSY", "op": 3, "topic": b"x"}, {"error": "SUCCESS"},
        {"error": "PULL_OFFSET_MOVED", "queue_id": [1]}, {"error": "NO_PERMISSION", "group": 7},
    ]
    for i, info in enumerate(infos):
        m = Message(Pdu(b"\x00", [i + 1], float(i), float(i), False), i, "s", "c", "rocketmq")
        m.kind = "response"
        m.info = info
        m.fields = [Field("remark", 12), Field("remark", None, children=[])]
        out.append(m)
    return out


def test_hostile_messages_do_not_break_it() -> None:
    result = Expert(analyzers=[RocketMQ]).add_all(_hostile())
    assert sorted(keys(result)) == ["rocketmq.broker_busy", "rocketmq.pull_offset_moved", "rocketmq.refused"]
