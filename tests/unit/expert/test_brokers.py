"""The broker analyzer: leadership errors and Metadata storms, throttling, slow responses,
requests never answered and error bursts, on real captures of the four protocols (healthy ones
give no warning) and on built messages, one per kind of finding; hostile trees do not break it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES, shared_captures, shared_path, sidecar_decode_as

from kdissect.dissect.base import Options
from kdissect.expert.analyzers.brokers import (
    BURST_ERRORS,
    BURST_WINDOW_S,
    CHART_ERRORS,
    OTHER,
    STARTUP_METADATA,
    STORM_REQUESTS,
    Brokers,
    Bursts,
    Unanswered,
)
from kdissect.expert.catalogue import Finding
from kdissect.expert.engine import Expert, Result
from kdissect.model import ARRAY, Field, Match, Message, Pdu, Severity, array, struct
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

CLIENT, SERVER = "10.0.0.1:5000", "10.0.0.2:9092"
# Real captures where a warning of this analyzer is right, and the kinds it gives there.
WARNED = {
    "ajbanjara__Wireshark__kafka-testcases-v4__unsupported-version.pcapng": {"broker.no_response"},
}
HEALTHY = [CAPTURES / "kafka" / "mock_ck_large_values.pcap", CAPTURES / "zookeeper" / "zk_session.pcap",
           CAPTURES / "kafka" / "expert_healthy.pcap"]


def analyse(path: Path) -> Result:
    expert = Expert(analyzers=[Brokers])
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
    return expert.add_all(dissect_file(str(path), registry, Options(), observers=[expert]))


def run(messages: list[Message]) -> Result:
    return Expert(analyzers=[Brokers]).add_all(messages)


def of(result: Result, key: str) -> list[Finding]:
    return [f for f in result.findings if f.kind.key == key]


def message(kind: str, frame: int, ts: float, *, proto: str = "kafka", stream: int = 0, info: dict[str, Any] | None = None,
            fields: list[Field] | None = None) -> Message:
    up = kind == "request"
    m = Message(Pdu(b"x", [frame], ts, ts, up), stream, CLIENT if up else SERVER, SERVER if up else CLIENT, proto)
    m.kind, m.number, m.info, m.fields = kind, frame, dict(info or {}), list(fields or [])
    return m


def exchange(op: str, frame: int, ts: float, rtt: float, *, proto: str = "kafka", stream: int = 0,
             error: str | None = None, client: str = "app", request: list[Field] | None = None,
             response: list[Field] | None = None) -> list[Message]:
    """A request and its response `rtt` seconds later (frames `frame` and `frame + 1`)."""
    req = message("request", frame, ts, proto=proto, stream=stream, info={"op": op, "client_id": client},
                  fields=request)
    resp = message("response", frame + 1, ts + rtt, proto=proto, stream=stream,
                   info={"op": op, **({"error": error} if error else {})}, fields=response)
    resp.peer = req
    req.match, resp.match = Match(frame + 1, "response", rtt), Match(frame, "request", rtt)
    return [req, resp]


def partitions(topic: str, errors: dict[int, int]) -> list[Field]:
    """A Produce response's tree: `errors` maps partition -> error code."""
    parts = [struct("p", [Field("index", p), Field("error_code", code)]) for p, code in errors.items()]
    return [array("responses", [struct("t", [Field("name", topic), array("partition_responses", parts)])]),
            Field("throttle_time_ms", 0)]


# --- real captures ----------------------------------------------------------------------------------


def test_leadership_errors_of_the_errors_capture_are_read_per_partition() -> None:
    result = analyse(shared_path("captures", "kafka", "gen__mock_ck_errors.pcap"))
    (lead,) = of(result, "kafka.broker.leadership")
    assert lead.severity is Severity.NOTE and lead.frames == [11, 40, 189]
    assert lead.values["errors"] == {"NOT_LEADER_OR_FOLLOWER": 2, "LEADER_NOT_AVAILABLE": 1}
    # frame 189 names its topic by id (Fetch v16): the name comes from the Metadata answers
    assert lead.values["partition_list"] == ["err-topic-0", "err-topic-2"]
    assert lead.values["topics"] == {"err-topic": 3} and lead.values["metadata_after"] == 8
    assert not of(result, "kafka.broker.metadata_storm")
    errors = result.charts["errors"]
    assert {k: sum(v) for k, v in errors.items()} == {
        "kafka COORDINATOR_LOAD_IN_PROGRESS": 2, "kafka NOT_LEADER_OR_FOLLOWER": 2,
        "kafka COORDINATOR_NOT_AVAILABLE": 1, "kafka LEADER_NOT_AVAILABLE": 1, "kafka NOT_ENOUGH_REPLICAS": 1,
        "kafka REBALANCE_IN_PROGRESS": 1, "kafka REQUEST_TIMED_OUT": 1}  # UNSUPPORTED_VERSION is expected
    assert all(len(v) == result.charts["time"]["bins"] for v in errors.values())


def test_a_request_split_over_segments_is_answered_and_an_unknown_api_is_not() -> None:
    split = analyse(shared_path("captures", "kafka", "ajbanjara__Wireshark__kafka-testcases-v4__request-missing.pcapng"))
    assert not of(split, "broker.no_response") and not of(split, "broker.pending_at_end")
    assert {k: sum(v) for k, v in split.charts["errors"].items()} == {"kafka UNKNOWN_MEMBER_ID": 1}
    unknown = analyse(shared_path("captures", "kafka", "ajbanjara__Wireshark__kafka-testcases-v4__unsupported-version.pcapng"))
    (f,) = of(unknown, "broker.no_response")
    assert (f.severity, f.frames, f.values["op"], f.values["followed_by_frames"]) == \
        (Severity.WARNING, [4], "Unknown(10000)", [8])


def test_a_capture_of_one_direction_is_told_apart() -> None:
    result = analyse(shared_path("captures", "zookeeper", "twitter__zktraffic__create.pcap"))
    pending = {f.values["op"]: f for f in of(result, "broker.pending_at_end")}
    assert not of(result, "broker.no_response")
    create = pending["create"]
    assert (create.count, create.values["streams"], create.values["silent_conversations_requests"]) == (25, 5, 25)
    assert create.severity is Severity.NOTE
    assert "one direction captured?" in create.summary


def test_metadata_unanswered_at_the_end_is_chat_and_a_pending_fetch_is_nothing() -> None:
    result = analyse(shared_path("captures", "kafka", "gen__mock_ck_consumer_group.pcap"))
    (f,) = of(result, "broker.pending_at_end")
    assert (f.severity, f.values["op"], f.frames) == (Severity.CHAT, "Metadata", [345])


@pytest.mark.parametrize("proto", ["kafka", "zookeeper", "pulsar", "rocketmq"])
def test_shared_captures_give_no_false_warning(proto: str) -> None:
    for path in shared_captures(proto):
        result = analyse(path)
        warned = {f.kind.key for f in result.findings if f.severity not in (Severity.CHAT, Severity.NOTE)}
        assert warned == WARNED.get(path.name, set()), (path.name, [f.summary for f in result.findings])
        json.dumps(result.to_json(), allow_nan=False)


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_healthy_captures_give_no_warning(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is not recorded yet")
    result = analyse(path)
    assert [f.summary for f in result.findings if f.severity not in (Severity.CHAT, Severity.NOTE)] == []


# --- built messages: one per kind of finding ----------------------------------------------------------


def test_leadership_errors_on_many_partitions_then_a_metadata_storm() -> None:
    msgs = exchange("Produce", 1, 100.0, 0.002, error="NOT_LEADER_OR_FOLLOWER",
                    response=partitions("orders", {p: 6 for p in range(12)} | {12: 0}))
    n = STARTUP_METADATA + STORM_REQUESTS + 2
    for i in range(n):
        msgs += exchange("Metadata", 10 + 2 * i, 100.1 + 0.3 * i, 0.001)
    result = run(msgs)
    (lead,) = of(result, "kafka.broker.leadership")
    assert lead.severity is Severity.WARNING and lead.values["partitions"] == 12
    assert lead.values["errors"] == {"NOT_LEADER_OR_FOLLOWER": 12} and lead.values["metadata_after"] == n
    assert lead.summary.startswith("12 leadership errors (NOT_LEADER_OR_FOLLOWER 12) on 12 partitions of 1 topic")
    (storm,) = of(result, "kafka.broker.metadata_storm")
    assert storm.severity is Severity.WARNING and storm.values["client"] == "app@10.0.0.1"
    # a connection's first Metadata requests are its start-up: the storm counts the rest
    assert (storm.values["requests"], storm.values["episodes"]) == (n - STARTUP_METADATA, 1)
    assert storm.values["after_leadership_errors"] == n


def test_metadata_at_a_calm_pace_is_no_storm() -> None:
    msgs = [m for i in range(30) for m in exchange("Metadata", 2 * i + 1, 100.0 + 2.0 * i, 0.001)]
    assert not run(msgs).findings


def test_sustained_throttling_is_a_warning_with_its_chart() -> None:
    msgs: list[Message] = []
    for i in range(8):
        throttle = 300 if i < 6 else 0
        msgs += exchange("Produce", 2 * i + 1, 100.0 + 3 * i, 0.002, response=[Field("throttle_time_ms", throttle)])
    msgs += exchange("Fetch", 100, 101.0, 0.002, client="other", response=[Field("throttle_time_ms", 40)])
    result = run(msgs)
    by_api = {f.values["api"]: f for f in of(result, "kafka.broker.throttled")}
    produce, fetch = by_api["Produce"], by_api["Fetch"]
    assert produce.severity is Severity.WARNING and fetch.severity is Severity.NOTE
    assert (produce.count, produce.values["total_ms"], produce.values["max_ms"]) == (6, 1800, 300)
    assert (produce.values["first_frame"], produce.values["last_frame"]) == (2, 12)
    chart = result.charts["throttle"]
    assert set(chart) == {"app Produce", "other Fetch"}
    assert chart["app Produce"]["v"] == [300] * 6 + [0, 0]  # the recovery shows
    assert chart["app Produce"]["t"][0] == pytest.approx(0.002)


def test_a_slow_response_stands_out_of_its_operation_and_long_polls_do_not() -> None:
    msgs: list[Message] = []
    for i in range(60):
        msgs += exchange("Produce", 2 * i + 1, 100.0 + i, 0.002 + 0.0001 * (i % 5))
    msgs += exchange("Produce", 500, 200.0, 1.5)
    wait = [Field("max_wait_ms", 500)]
    for i in range(30):
        msgs += exchange("Fetch", 600 + 2 * i, 100.0 + i, 0.001, request=wait)
    msgs += exchange("Fetch", 700, 210.0, 0.5, request=wait)  # an empty answer after the wait: a long poll
    msgs += exchange("Metadata", 800, 211.0, 3.0)  # too few Metadata answers to judge
    result = run(msgs)
    (slow,) = of(result, "broker.slow_response")
    assert slow.severity is Severity.WARNING and slow.frames == [501]
    assert slow.values["op"] == "Produce" and slow.values["rtt_ms"] == 1500.0
    assert slow.values["p50_ms"] == pytest.approx(2.2) and slow.values["responses"] == 61
    assert slow.values["threshold_ms"] == 1500.0  # p99 of 61 answers is the slowest


def test_requests_never_answered_though_later_ones_were() -> None:
    skipped = message("request", 1, 100.0, info={"op": "Produce"})
    msgs = [skipped, *exchange("Produce", 2, 100.1, 0.001)]
    msgs += exchange("ApiVersions", 8, 100.5, 0.001, stream=1)
    msgs.append(message("request", 10, 101.0, stream=1, info={"op": "Metadata"}))  # the capture ends
    msgs.append(message("request", 11, 101.0, stream=1, info={"op": "Fetch"}))  # a long poll: not a finding
    oneway = message("request", 12, 101.0, stream=1, info={"op": "Produce"})
    oneway.expects_response = False  # acks=0
    late = message("request", 20, 102.0, stream=2, info={"op": "ListOffsets"})
    answer = message("response", 21, 300.0, stream=2, info={"op": "ListOffsets"})
    answer.peer = late  # released before its answer came, long after
    pending_zk = message("request", 30, 103.0, proto="zookeeper", stream=3, info={"op": "getData"})
    watch = message("event", 31, 103.1, proto="zookeeper", stream=3, info={"event": "NodeDataChanged"})
    watch.to_server = False  # a notification may come before the answer: it proves nothing
    result = run([*msgs, oneway, late, answer, pending_zk, watch])
    (never,) = of(result, "broker.no_response")
    assert (never.severity, never.frames, never.values["followed_by_frames"]) == (Severity.WARNING, [1], [3])
    assert never.summary.startswith("kafka Produce: 1 request never answered, though the server answered later")
    pending = {f.protocol: f for f in of(result, "broker.pending_at_end")}
    assert (pending["kafka"].severity, pending["kafka"].values["op"], pending["kafka"].frames) == \
        (Severity.CHAT, "Metadata", [10])
    assert (pending["zookeeper"].severity, pending["zookeeper"].frames) == (Severity.CHAT, [30])
    assert set(pending) == {"kafka", "zookeeper"}


def test_a_burst_of_errors_and_a_calm_trickle() -> None:
    msgs: list[Message] = []
    for i in range(30):  # 30 answers in 3 s, 25 of them errors
        error = None if i % 6 == 5 else ("NOT_ENOUGH_REPLICAS" if i % 2 else "REQUEST_TIMED_OUT")
        msgs += exchange("Produce", 2 * i + 1, 100.0 + 0.1 * i, 0.001, error=error)
    for i in range(40):  # then a healthy minute with an error every 4 s
        msgs += exchange("Produce", 200 + 2 * i, 110.0 + 1.5 * i, 0.001, error="REQUEST_TIMED_OUT" if i % 3 == 0 else None)
    result = run(msgs)
    (burst,) = of(result, "broker.error_burst")
    assert burst.severity is Severity.WARNING and burst.count == 25 >= BURST_ERRORS
    assert burst.values["names"] == {"REQUEST_TIMED_OUT": 15, "NOT_ENOUGH_REPLICAS": 10}
    assert burst.values["responses"] == 30 and burst.first_ts == 100.001 and burst.frames[0] == 2
    assert burst.summary == ("kafka: 25 error answers in 2.9 s (REQUEST_TIMED_OUT 15, NOT_ENOUGH_REPLICAS 10), "
                             "83% of 30 responses")


def test_the_error_chart_keeps_the_most_frequent_names() -> None:
    msgs: list[Message] = []
    frame = 1
    for n in range(CHART_ERRORS + 5):
        for _ in range(n + 1):
            msgs += exchange("Produce", frame, 100.0 + frame, 0.001, error=f"E{n:02d}")
            frame += 2
    chart = run(msgs).charts["errors"]
    assert len(chart) == CHART_ERRORS + 1
    assert sum(chart[OTHER]) == sum(range(1, 6)) and "kafka E00" not in chart and sum(chart["kafka E24"]) == 25


# --- hostile trees --------------------------------------------------------------------------------------


def test_hostile_trees_do_not_break_it() -> None:
    junk = [Field("throttle_time_ms", "lots"), Field("responses", 7, hint=ARRAY),
            array("topics", [Field("x", None), struct("t", [Field("name", b"\xff"), Field("error_code", "6"),
                                                            Field("partitions", None, hint=ARRAY),
                                                            array("partition_responses", [Field("p", 3)])])]),
            array("partitions", [struct("p", [Field("partition_index", True), Field("error_code", 6)])])]
    msgs: list[Message] = []
    for i in range(40):
        req, resp = exchange("Produce", 2 * i + 1, 100.0 + 0.01 * i, 0.001, error="NOT_LEADER_OR_FOLLOWER",
                             response=junk)
        resp.info["op"] = 12345 if i % 2 else None
        req.info["client_id"] = ["not", "text"]
        resp.match = Match(0, "request", float("nan") if i % 3 else -1.0)
        msgs += [req, resp]
    orphan = message("response", 500, 101.0, info={"error_code": 6, "error": None})
    odd = message("event", 501, 101.0, proto="pulsar", info={"op": None})
    throttled = message("response", 502, 101.0, fields=[Field("throttle_time_ms", True)])
    result = run([*msgs, orphan, odd, throttled])
    json.dumps(result.to_json(), allow_nan=False)
    (lead,) = of(result, "kafka.broker.leadership")
    assert lead.count == 40 and lead.values["partitions"] == 0  # the top-level answer only: nothing to read per partition
    assert not of(result, "kafka.broker.throttled") and not of(result, "broker.slow_response")
    assert of(result, "broker.error_burst")[0].count == 41


def test_times_that_step_back_keep_the_error_burst_window_short() -> None:
    # A clock that steps back and forth: the window kept the out-of-order seconds and was summed
    # again on every answer (quadratic); a second before the latest counts in the latest.
    bursts = Bursts()
    for i in range(2000):
        bursts.add(message("response", i, 100.0 + (1000.0 if i % 2 else 0.0), info={"op": "Produce"}), None)
        assert len(bursts.window["kafka"]) <= BURST_WINDOW_S


def _scanned(events: list[Message]) -> dict[tuple[str, str, bool], tuple[list[int], list[int]]]:
    """What Unanswered settles, as a scan of every watched request on each response finds it."""
    waiting: dict[int, dict[tuple[int, int], Message]] = {}
    later: dict[tuple[str, str, bool], tuple[list[int], list[int]]] = {}
    for m in events:
        if m.kind == "response" and m.peer is not None:
            waiting.get(m.peer.stream, {}).pop((m.peer.frame, m.peer.number), None)
        watched = waiting.get(m.stream, {}) if m.kind == "response" else {}
        for key in [k for k, w in watched.items() if w.to_server != m.to_server and m.ts >= w.ts]:
            w = watched.pop(key)
            row = later.setdefault((w.protocol, w.info["op"], w.to_server), ([], []))
            row[0].append(w.frame)
            row[1].append(m.frame)
        if m.kind == "request":
            waiting.setdefault(m.stream, {})[(m.frame, m.number)] = m
    return later


def test_watched_requests_are_settled_as_a_scan_of_all_of_them_would() -> None:
    # Requests of both directions, times out of order, some answered after all: each response
    # settles exactly the watched requests of the other direction sent no later than it, in the
    # order they were watched.
    import random

    rnd = random.Random(7)
    events: list[Message] = []
    requests: list[Message] = []
    for frame in range(1, 1500):
        stream = rnd.randrange(3)
        ts = 100.0 + frame * 0.01 + rnd.choice([0.0, 0.0, 5.0, -5.0])
        kind = rnd.choice(["request", "request", "response"])
        m = message(kind, frame, ts, stream=stream, info={"op": rnd.choice(["Produce", "Metadata"])})
        m.to_server = rnd.random() < 0.7 if kind == "request" else rnd.random() < 0.3
        if kind == "response" and requests and rnd.random() < 0.2:
            m.peer = requests.pop(rnd.randrange(len(requests)))  # answered after all
        if kind == "request":
            requests.append(m)
        events.append(m)
    unanswered = Unanswered()
    for m in events:
        unanswered.add(m)
    want = _scanned(events)
    assert unanswered.later.keys() == want.keys() and len(want) > 2
    for k, (frames, followed) in want.items():
        row = unanswered.later[k]  # (the evidence keeps the first frames)
        assert row.requests.count == len(frames) and row.requests.frames == frames[: len(row.requests.frames)]
        assert row.followed_by == followed[: len(row.followed_by)] and row.followed_by


def test_requests_no_answer_can_reach_cost_nothing_per_response() -> None:
    # 10,000 requests from the server that the client never answers, then 20,000 exchanges: each
    # response looked at all 10,000 (0.5 ms a response); now only at those it may settle.
    import time

    msgs = [message("request", i, 100.0 + i * 1e-4, proto="rocketmq", info={"op": "CHECK_TRANSACTION_STATE"})
            for i in range(1, 10_001)]
    for m in msgs:
        m.to_server = False
    for i in range(20_000):
        msgs += exchange("HEART_BEAT", 20_000 + 2 * i, 102.0 + i * 1e-4, 0.001, proto="rocketmq")
    unanswered = Unanswered()
    t0 = time.process_time()
    for m in msgs:
        unanswered.add(m)
    assert time.process_time() - t0 < 3.0
    assert unanswered.size == 10_000
