"""The Pulsar analyzer: on real captures (a SEND_ERROR, healthy traffic) and on messages built as
the Pulsar dissector builds them (FLOW and MESSAGE for permits, broker closes, auth failures)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import CAPTURES, capture_args, shared_captures

from kdissect.cliutil import build, iter_capture
from kdissect.expert.analyzers.pulsar import Pulsar
from kdissect.expert.engine import Expert, Result
from kdissect.model import Field, Message, Pdu, struct

CLIENT, SERVER = "10.0.0.5:40000", "10.0.0.9:6650"
TOPIC = "persistent://public/default/orders"


def analyse(path: Path) -> Result:
    args = capture_args(path)
    decode_as = tuple(args[i + 1] for i, a in enumerate(args) if a == "--decode-as")
    registry, opts = build(decode_as, 0, 0, False)
    expert = Expert(analyzers=[Pulsar])
    return expert.add_all(iter_capture((str(path),), registry, opts, observers=[expert]))


def keys(result: Result) -> list[str]:
    return [f.kind.key for f in result.findings]


def test_send_error_in_a_real_capture() -> None:
    result = analyse(CAPTURES / "pulsar" / "gen__pulsar_chunks_auth_errors.pcap")
    assert keys(result) == ["pulsar.producer_error"]
    f = result.findings[0]
    assert f.values == {"topic": "persistent://public/default/x-senderror", "producer": "gen-1",
                        "error": "PersistenceError", "message": "scripted persistence failure", "errors": 1,
                        "answers": ["SEND_ERROR"]}
    assert f.frames == [61] and f.severity.value == "error"
    permits = result.charts["pulsar_permits"]["consumer 0"]
    assert permits["v"] == [1000, 999, 998, 997, 996]  # 4 chunks pushed of 1000 permits


@pytest.mark.parametrize("name", ["gen__pulsar_codecs_batches.pcap", "gen__pulsar_encrypted.pcap"])
def test_healthy_project_captures(name: str) -> None:
    result = analyse(CAPTURES / "pulsar" / name)
    assert result.findings == []
    assert result.charts["pulsar_permits"]


def test_batches_use_one_permit_per_message() -> None:
    result = analyse(CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap")
    assert result.charts["pulsar_permits"]["consumer 0"]["v"] == [1000, 996]  # one batch of 4


def test_healthy_shared_captures() -> None:
    for path in shared_captures("pulsar"):
        assert analyse(path).findings == [], path.name


# -- messages as the dissector builds them ---------------------------------------------------


class Feed:
    def __init__(self) -> None:
        self.expert = Expert(analyzers=[Pulsar])
        self.frame = 0

    def msg(self, op: str, ts: float, to_server: bool, info: dict[str, Any] | None = None,
            fields: list[Field] | None = None, kind: str | None = None, stream: int = 0,
            peer: Message | None = None) -> Message:
        self.frame += 1
        m = Message(Pdu(b"", [self.frame], ts, ts, to_server), stream,
                    CLIENT if to_server else SERVER, SERVER if to_server else CLIENT, "pulsar")
        m.kind = kind or ("request" if to_server else "response")
        m.info = {"op": op, **(info or {})}
        m.fields = fields or []
        m.peer = peer
        self.expert.add(m)
        return m

    def subscribe(self, ts: float, cid: int, stream: int = 0) -> None:
        body = struct("subscribe", [Field("topic", TOPIC), Field("subscription", "billing"), Field("consumer_id", cid)])
        self.msg("SUBSCRIBE", ts, True, {"topic": TOPIC, "consumer_id": cid}, [body], stream=stream)

    def flow(self, ts: float, cid: int, permits: int, stream: int = 0) -> None:
        body = struct("flow", [Field("consumer_id", cid), Field("message_permits", permits)])
        self.msg("FLOW", ts, True, {"topic": TOPIC, "consumer_id": cid}, [body], stream=stream)

    def push(self, ts: float, cid: int, batch: int | None = None, stream: int = 0) -> None:
        meta = struct("metadata", [Field("producer_name", "p")] +
                      ([Field("num_messages_in_batch", batch)] if batch is not None else []))
        self.msg("MESSAGE", ts, False, {"topic": TOPIC, "consumer_id": cid},
                 [struct("message", [Field("consumer_id", cid)]), meta], kind="event", stream=stream)


def test_flow_stall_until_a_new_flow() -> None:
    feed = Feed()
    feed.subscribe(1.0, 3)
    feed.flow(1.1, 3, 10)
    feed.push(1.2, 3, batch=5)
    for i in range(5):
        feed.push(1.3 + i * 0.01, 3)  # permits run out at the 5th
    feed.flow(4.0, 3, 10)  # 2.66 s later
    feed.push(4.1, 3)
    feed.flow(4.2, 3, 10)
    feed.subscribe(1.0, 4, stream=1)  # a consumer that never runs dry
    feed.flow(1.1, 4, 10, stream=1)
    feed.push(1.2, 4, stream=1)
    result = feed.expert.finish()
    assert keys(result) == ["pulsar.flow_stall"]
    f = result.findings[0]
    assert f.values["consumer_id"] == 3 and f.values["subscription"] == "billing" and f.values["topic"] == TOPIC
    assert f.values["stalls"] == 1 and f.values["longest_s"] == pytest.approx(2.66)
    assert f.values["granted"] == 30 and f.values["pushed"] == 11
    assert f.frames == [8, 9] and f.streams == [0]
    assert "ran out of permits 1 times, longest 2.7 s" in f.summary
    chart = result.charts["pulsar_permits"]
    assert chart["consumer 3"]["v"] == [10, 5, 4, 3, 2, 1, 0, 10, 9, 19]
    assert chart["consumer 4"]["v"] == [10, 9]


def test_open_stall_measured_to_the_end_and_closed_consumer_not_held() -> None:
    feed = Feed()
    feed.flow(1.0, 1, 2)
    feed.push(1.1, 1)
    feed.push(1.2, 1)  # out of permits, never refilled
    feed.flow(1.0, 2, 1, stream=1)
    feed.push(1.1, 2, stream=1)  # out of permits, then closed by the client quickly
    feed.msg("CLOSE_CONSUMER", 1.5, True, {"consumer_id": 2}, stream=1)
    feed.msg("PING", 6.2, False, kind="request")
    result = feed.expert.finish()
    assert keys(result) == ["pulsar.flow_stall"]
    f = result.findings[0]
    assert f.values["consumer_id"] == 1 and f.values["longest_s"] == pytest.approx(5.0)
    assert f.frames == [3]


def test_broker_closes_producers_and_consumers() -> None:
    feed = Feed()
    close = struct("close_producer", [Field("producer_id", 7), Field("request_id", 1),
                                      Field("assigned_broker_service_url", "pulsar://broker-2:6650")])
    feed.msg("CLOSE_PRODUCER", 1.0, False, {"topic": TOPIC, "producer_id": 7}, [close], kind="request")
    feed.msg("CLOSE_CONSUMER", 1.1, False, {"topic": TOPIC, "consumer_id": 2},
             [struct("close_consumer", [Field("consumer_id", 2)])], kind="request")
    feed.msg("CLOSE_CONSUMER", 1.2, True, {"topic": TOPIC, "consumer_id": 3})  # by the client: not reported
    result = feed.expert.finish()
    assert keys(result) == ["pulsar.broker_closed", "pulsar.broker_closed"]
    by_what = {f.values["what"]: f for f in result.findings}
    assert by_what["producer"].values["ids"] == ["7"]
    assert by_what["producer"].values["assigned_broker"] == "pulsar://broker-2:6650"
    assert "reassigned to pulsar://broker-2:6650" in by_what["producer"].summary
    assert by_what["consumer"].values["closed"] == 1


def test_producer_error_answer_to_a_producer_request() -> None:
    feed = Feed()
    req = feed.msg("PRODUCER", 1.0, True, {"topic": TOPIC, "producer_id": 4, "corr": 9},
                   [struct("producer", [Field("producer_name", "billing-writer")])])
    feed.msg("ERROR", 1.1, False, {"corr": 9, "topic": TOPIC, "error": "ProducerBusy",
                                   "error_message": "producer with name 'billing-writer' is already connected"},
             peer=req)
    feed.msg("ERROR", 1.2, False, {"error": "TopicNotFound"})  # not a producer's: the broker analyzer's
    result = feed.expert.finish()
    assert keys(result) == ["pulsar.producer_error"]
    f = result.findings[0]
    assert f.values["producer"] == "billing-writer" and f.values["error"] == "ProducerBusy"
    assert f.values["answers"] == ["ERROR"]


def test_auth_failures() -> None:
    feed = Feed()
    connect = feed.msg("CONNECT", 1.0, True)
    feed.msg("ERROR", 1.1, False, {"error": "AuthenticationError", "error_message": "expired token"}, peer=connect)
    feed.msg("AUTH_CHALLENGE", 2.0, False, kind="request", stream=1)
    feed.msg("AUTH_RESPONSE", 2.1, True, kind="response", stream=1)
    feed.expert.conversation_ended(SimpleNamespace(index=1, last_ts=2.5))
    feed.msg("AUTH_CHALLENGE", 3.0, False, kind="request", stream=2)  # refreshed fine
    feed.msg("AUTH_RESPONSE", 3.1, True, kind="response", stream=2)
    feed.msg("PING", 3.2, False, kind="request", stream=2)
    feed.expert.conversation_ended(SimpleNamespace(index=2, last_ts=3.5))
    result = feed.expert.finish()
    assert keys(result) == ["pulsar.auth_failure"]
    f = result.findings[0]
    assert f.count == 2 and f.values["client"] == "10.0.0.5"
    assert f.values["reasons"] == ["AuthenticationError", "AUTH_RESPONSE not accepted"]


def test_a_challenge_waiting_for_its_connection_end_is_not_kept_whole() -> None:
    """Each connection's last AUTH_CHALLENGE waits for the connection's end (10,000 of them):
    its time, frame and client, not the message (100 challenges of 100,000 unknown fields each,
    30 MB, took 2 GB)."""
    feed = Feed()
    held = []
    for stream in range(3):
        m = feed.msg("AUTH_CHALLENGE", 2.0 + stream, False, kind="request", stream=stream,
                     fields=[struct("auth_challenge", [Field("unknown", 1)] * 1000)])
        held.append(weakref.ref(m))
        del m
        feed.expert.conversation_ended(SimpleNamespace(index=stream, last_ts=2.5 + stream))
    gc.collect()
    assert all(r() is None for r in held)
    result = feed.expert.finish()
    f = result.findings[0]
    assert keys(result) == ["pulsar.auth_failure"] and f.count == 3 and f.values["client"] == "10.0.0.5"
    assert f.frames == [1, 2, 3] and f.streams == [0, 1, 2] and f.values["reasons"] == ["AUTH_CHALLENGE not answered"]


def test_hostile_messages() -> None:
    feed = Feed()
    odd: list[dict[str, Any]] = [{}, {"consumer_id": "1"}, {"consumer_id": True}, {"producer_id": [1], "error": 3},
                                 {"consumer_id": 1, "error": "AuthorizationError"}]
    for op in ("FLOW", "MESSAGE", "SUBSCRIBE", "PRODUCER", "PRODUCER_SUCCESS", "CLOSE_CONSUMER", "CLOSE_PRODUCER",
               "SEND_ERROR", "AUTH_CHALLENGE", "AUTH_RESPONSE", 7):
        for info in odd:
            for to_server in (True, False):
                fields = [Field("flow", 3), Field("metadata", None, children=[Field("num_messages_in_batch", "x")]),
                          Field("message_permits", -5), Field("close_producer", None, children=None)]
                feed.msg(op, 1.0, to_server, dict(info), fields)  # type: ignore[arg-type]
    feed.expert.conversation_ended(SimpleNamespace(index="x", last_ts=None))
    feed.expert.conversation_ended(object())
    result = feed.expert.finish()
    assert all(f.kind.category == "pulsar" for f in result.findings)
