"""The consumer analyzer: lag, rebalances, max.poll stalls, partition moves and backward commits,
on real captures (values read from their decoded messages) and on decoded trees built here in
the decoder's shapes, one per finding; broken trees give no exception."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES, shared_path, sidecar_decode_as

from kdissect.cliutil import build, iter_capture
from kdissect.expert.analyzers.consumers import LAG_WARN_RECORDS, Consumers
from kdissect.expert.catalogue import Finding
from kdissect.expert.engine import Expert, Result
from kdissect.model import Field, Match, Message, Pdu, Severity, array, struct

TOPIC_ID = "5a1f2c3d-0000-4000-8000-000000000001"


def run_capture(path: Path) -> Result:
    decode_as = tuple(f"{port}={name}" for port, name in sidecar_decode_as(path, "kafka").items())
    registry, opts = build(decode_as, 0, 64 << 20, False)
    expert = Expert(analyzers=[Consumers])
    return expert.add_all(iter_capture(str(path), registry, opts, observers=[expert]))


def of_kind(result: Result, key: str) -> list[Finding]:
    return [f for f in result.findings if f.kind.key == key]


# -- decoded trees in the decoder's shapes ----------------------------------------------------------

def node(name: str, v: Any) -> Field:
    """A dict is a struct, a list an array (its elements named like it), anything else a value."""
    if isinstance(v, dict):
        return struct(name, [node(k, x) for k, x in v.items()])
    if isinstance(v, list):
        return array(name, [node(name, x) for x in v])
    return Field(name, v)


class Wire:
    """Requests and their responses between Kafka clients and brokers, as the dissector emits them."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.frame = 0

    def _message(self, ts: float, to_server: bool, stream: int, broker: str, fields: dict[str, Any],
                 info: dict[str, Any]) -> Message:
        self.frame += 1
        client = f"10.0.0.{stream % 250 + 1}:5{stream:04d}"
        src, dst = (client, broker) if to_server else (broker, client)
        m = Message(Pdu(b"", [self.frame], ts, ts, to_server), stream, src, dst, "kafka")
        m.fields = [node(k, v) for k, v in fields.items()]
        m.info = info
        self.messages.append(m)
        return m

    def call(self, op: str, ts: float, client: str, request: dict[str, Any], response: dict[str, Any] | None = None,
             error: str | None = None, rtt: float = 0.001, stream: int = 1, broker: str = "10.0.1.1:9092") -> Message:
        info: dict[str, Any] = {"op": op, "version": 9, "corr": self.frame, "client_id": client}
        if isinstance(request.get("group_id"), str):
            info["group"] = request["group_id"]
        req = self._message(ts, True, stream, broker, request, info)
        if response is not None:
            answer = {"op": op, "error": error, "error_code": 0 if error is None else 27}
            res = self._message(ts + rtt, False, stream, broker, response, answer)
            res.peer = req
            res.match = Match(req.frame, "request", rtt)
            req.match = Match(res.frame, "response", rtt)
        return req

    def result(self) -> Result:
        expert = Expert(analyzers=[Consumers])
        return expert.add_all(sorted(self.messages, key=lambda m: (m.ts, m.frame)))


def metadata(w: Wire, ts: float, client: str, topic: str = "orders") -> None:
    w.call("Metadata", ts, client, {"topics": [{"topic_id": "00000000-0000-0000-0000-000000000000", "name": topic}]},
           {"topics": [{"error_code": 0, "name": topic, "topic_id": TOPIC_ID, "partitions": []}]})


def fetch(w: Wire, ts: float, client: str, positions: dict[int, int], hws: dict[int, int], *, by_id: bool = False,
          topic: str = "orders", stream: int = 1) -> None:
    key: dict[str, Any] = {"topic_id": TOPIC_ID} if by_id else {"topic": topic}
    request = {"replica_id": -1, "max_wait_ms": 500, "isolation_level": 0,
               "topics": [{**key, "partitions": [{"partition": p, "fetch_offset": o} for p, o in positions.items()]}]}
    response = {"error_code": 0, "responses": [{**key, "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": 0}
        for p, hw in hws.items()]}]}
    w.call("Fetch", ts, client, request, response, stream=stream)


def heartbeat(w: Wire, ts: float, client: str, member: str, gen: int, group: str = "g", error: str | None = None,
              stream: int = 2) -> None:
    w.call("Heartbeat", ts, client, {"group_id": group, "generation_id": gen, "member_id": member},
           {"error_code": 0}, error=error, stream=stream)


def join(w: Wire, ts: float, client: str, member: str, gen: int, members: list[str], *, group: str = "g",
         rebalance_ms: int = 300_000, session_ms: int = 10_000, stream: int = 2, rtt: float = 0.5,
         leader: str = "A") -> None:
    w.call("JoinGroup", ts, client,
           {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms,
            "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "cooperative-sticky"}]},
           {"error_code": 0, "generation_id": gen, "protocol_name": "cooperative-sticky", "leader": leader,
            "member_id": member, "members": [{"member_id": m, "group_instance_id": None} for m in members]},
           rtt=rtt, stream=stream)


def sync(w: Wire, ts: float, client: str, member: str, gen: int, plan: dict[str, list[int]], *, group: str = "g",
         stream: int = 2) -> None:
    def assignment(parts: list[int]) -> dict[str, Any]:
        return {"version": 0, "assigned_partitions": [{"topic": "orders", "partitions": parts}], "user_data": b""}
    w.call("SyncGroup", ts, client,
           {"group_id": group, "generation_id": gen, "member_id": member, "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": assignment(p)} for m, p in plan.items()]},
           {"error_code": 0, "assignment": assignment(plan.get(member, []))}, stream=stream)


def commit(w: Wire, ts: float, client: str, member: str, offsets: dict[int, int], *, group: str = "g",
           error: str | None = None) -> Message:
    parts = [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": 0, "committed_metadata": ""}
             for p, o in offsets.items()]
    answers = [{"partition_index": p, "error_code": 27 if error else 0} for p in offsets]
    return w.call("OffsetCommit", ts, client,
                  {"group_id": group, "generation_id_or_member_epoch": 1, "member_id": member,
                   "topics": [{"name": "orders", "partitions": parts}]},
                  {"topics": [{"name": "orders", "partitions": answers}]}, error=error, stream=2)


# -- lag -------------------------------------------------------------------------------------------

def test_lag_that_grows_to_the_end_is_a_warning_with_its_numbers() -> None:
    w = Wire()
    metadata(w, 0.0, "c1")
    heartbeat(w, 0.5, "c1", "m1", 1)
    for i in range(21):  # the consumer reads 100 records a second, the producers write 400
        fetch(w, 1.0 + i, "c1", {0: 100 * i}, {0: 400 * i + 500}, by_id=True)
    r = w.result()
    [lag] = of_kind(r, "kafka.consumer.lag")
    assert lag.severity is Severity.WARNING
    assert lag.values["group"] == "g" and lag.values["topic"] == "orders" and lag.values["partition"] == 0
    assert lag.values["lag_end"] == 8500 - 2000 and lag.values["lag_max"] == 6500
    assert lag.values["position"] == 2000 and lag.values["high_watermark"] == 8500
    assert "6,500 records at the end and not shrinking" in lag.summary
    series = r.charts["lag"]["g orders/0"]
    assert series["v"][:3] == [500, 800, 1100] and series["t"][0] == pytest.approx(1.001)


def test_lag_that_shrinks_is_a_note_and_a_client_without_group_keys_by_client() -> None:
    w = Wire()
    for i in range(11):
        fetch(w, float(i), "lonely", {3: 1000 * i}, {3: 12_000})
    [lag] = of_kind(w.result(), "kafka.consumer.lag")
    assert lag.severity is Severity.NOTE and lag.values["group"] == "client lonely"
    assert lag.values["lag_end"] == 2000 > LAG_WARN_RECORDS and "shrinking" in lag.summary


def test_small_lag_gives_no_finding() -> None:
    w = Wire()
    for i in range(10):
        fetch(w, float(i), "c1", {0: 10 * i}, {0: 10 * i + 3})
    assert not of_kind(w.result(), "kafka.consumer.lag")


def test_committed_lag_against_the_latest_end_offset() -> None:
    w = Wire()
    for i in range(8):
        w.call("ListOffsets", 10.0 * i, "c9", {"topics": [{"name": "orders", "partitions": [
            {"partition_index": 1, "timestamp": -1}]}]},
            {"topics": [{"name": "orders", "partitions": [
                {"partition_index": 1, "error_code": 0, "timestamp": -1, "offset": 5000 + 1000 * i}]}]})
        commit(w, 10.0 * i + 1, "c9", "m9", {1: 10 * i})
    r = w.result()
    [lag] = of_kind(r, "kafka.consumer.lag")
    assert lag.values["measure"] == "committed" and lag.values["lag_end"] == 12_000 - 70
    assert lag.severity is Severity.WARNING
    assert "g orders/1 (committed)" in r.charts["lag"]


# -- rebalances, stalls, moves, commits ---------------------------------------------------------------

def test_a_member_that_stops_heartbeating_is_named_as_a_session_timeout() -> None:
    w = Wire()
    join(w, 0.0, "c1", "A", 1, ["A", "B"])
    join(w, 0.0, "c2", "B", 1, [], stream=3)
    for t in range(1, 25, 3):
        heartbeat(w, float(t), "c1", "A", 1 if t < 20 else 2)
        if t < 10:
            heartbeat(w, float(t), "c2", "B", 1, stream=3)
    heartbeat(w, 19.0, "c1", "A", 1, error="REBALANCE_IN_PROGRESS")
    join(w, 20.0, "c1", "A", 2, ["A"])
    r = w.result()
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.severity is Severity.WARNING and f.values["rebalances"] == 1 and f.values["generations"] == [1, 2]
    assert f.values["errors"] == {"REBALANCE_IN_PROGRESS": 1}
    assert f.values["causes"] == ["c2 stopped heartbeating 13.5 s before generation 2 (session timeout 10.0 s)"]
    events = r.charts["rebalances"]["g"]
    assert {"t": 19.001, "event": "error", "member": "c1", "generation": 1,
            "detail": "Heartbeat: REBALANCE_IN_PROGRESS"} in events
    assert [e["event"] for e in events].count("join") == 3


def test_a_fetch_gap_past_the_rebalance_timeout_then_a_rejoin_is_a_max_poll_stall() -> None:
    w = Wire()
    join(w, 0.0, "c1", "A", 1, ["A"], rebalance_ms=5000)
    for t in [1, 2, 3, 4, 14.5, 15.5]:
        fetch(w, float(t), "c1", {0: 0}, {0: 0})
    heartbeat(w, 12.0, "c1", "A", 1, error="UNKNOWN_MEMBER_ID")
    join(w, 13.0, "c1", "", 2, ["A2"])
    r = w.result()
    [stall] = of_kind(r, "kafka.consumer.max_poll_stall")
    assert stall.values == {"group": "g", "client_id": "c1", "gap_s": 10.5, "rebalance_timeout_ms": 5000,
                            "evidence": "UNKNOWN_MEMBER_ID, then JoinGroup"}
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.severity is Severity.WARNING and f.values["errors"] == {"UNKNOWN_MEMBER_ID": 1}


def test_a_consumer_that_closes_or_restarts_is_no_stall() -> None:
    w = Wire()
    join(w, 0.0, "c1", "A", 1, ["A"], rebalance_ms=5000)
    fetch(w, 1.0, "c1", {0: 0}, {0: 0})
    w.call("LeaveGroup", 2.0, "c1", {"group_id": "g", "member_id": "A"}, {"error_code": 0}, stream=2)
    w.call("Metadata", 60.0, "other", {"topics": []}, {"topics": []}, stream=9)  # the capture goes on
    join(w, 70.0, "c1", "", 2, ["B"], stream=3)  # the restarted process, on new connections
    fetch(w, 71.0, "c1", {0: 0}, {0: 0}, stream=4)
    r = w.result()
    assert not of_kind(r, "kafka.consumer.max_poll_stall")
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.values["left"] == [{"member": "c1", "reason": "left"}] and f.severity is Severity.NOTE


def test_partitions_that_change_owner_between_generations_are_listed_as_moves() -> None:
    w = Wire()
    join(w, 0.0, "c1", "A", 1, ["A"])
    sync(w, 1.0, "c1", "A", 1, {"A": [0, 1, 2]})
    join(w, 5.0, "c1", "A", 2, ["A", "B"])
    sync(w, 6.0, "c1", "A", 2, {"A": [0, 2]})  # cooperative: partition 1 revoked first
    join(w, 7.0, "c1", "A", 3, ["A", "B"])
    sync(w, 8.0, "c1", "A", 3, {"A": [0, 2], "B": [1]})
    [f] = of_kind(w.result(), "kafka.consumer.assignment")
    assert f.values["moves"] == [{"topic": "orders", "partition": 1, "from": "c1", "to": "B", "generation": 3}]
    assert f.severity is Severity.NOTE and "orders/1 c1 → B" in f.summary


def test_kip848_epochs_moves_leave_and_fencing() -> None:
    w = Wire()
    metadata(w, 0.0, "c1")

    def beat(ts: float, client: str, member: str, epoch: int, answer_epoch: int, parts: list[int] | None,
             error: str | None = None) -> None:
        assignment = None if parts is None else {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": parts}]}
        w.call("ConsumerGroupHeartbeat", ts, client,
               {"group_id": "k", "member_id": member, "member_epoch": epoch, "instance_id": None,
                "rebalance_timeout_ms": 300_000, "server_assignor": "uniform", "topic_partitions": None},
               {"error_code": 0, "member_id": member, "member_epoch": answer_epoch, "heartbeat_interval_ms": 5000,
                "assignment": assignment}, error=error, stream=5 if client == "c1" else 6)

    beat(1.0, "c1", "A", 0, 1, [0, 1])
    beat(2.0, "c2", "B", 0, 2, [])
    beat(3.0, "c1", "A", 1, 2, [0])
    beat(4.0, "c2", "B", 2, 2, [1])
    beat(5.0, "c2", "B", 2, 2, None, error="FENCED_MEMBER_EPOCH")
    beat(6.0, "c2", "B", -1, -1, None)
    r = w.result()
    [moves] = of_kind(r, "kafka.consumer.assignment")
    assert moves.values["moves"] == [{"topic": "orders", "partition": 1, "from": "c1", "to": "c2", "generation": 2}]
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.severity is Severity.WARNING and f.values["generations"] == [1, 2]
    assert f.values["errors"] == {"FENCED_MEMBER_EPOCH": 1} and f.values["left"] == [{"member": "c2", "reason": "member epoch -1"}]
    assert f.values["protocols"] == ["uniform"]
    kinds = [e["event"] for e in r.charts["rebalances"]["k"]]
    assert kinds == ["join", "heartbeat", "join", "heartbeat", "heartbeat", "heartbeat", "error", "leave"]


def test_a_commit_below_the_previous_one_is_a_warning_and_failed_commits_do_not_count() -> None:
    w = Wire()
    first = commit(w, 1.0, "c1", "A", {0: 100, 1: 50})
    commit(w, 2.0, "c1", "A", {0: 10}, error="REBALANCE_IN_PROGRESS")  # refused: no commit
    commit(w, 3.0, "c1", "A", {0: 120})
    later = commit(w, 4.0, "c2", "B", {0: 40, 1: 60})
    [f] = of_kind(w.result(), "kafka.consumer.commit_backwards")
    assert f.severity is Severity.WARNING and f.count == 1
    assert f.values["commits"] == [{"topic": "orders", "partition": 0, "previous": 120, "offset": 40,
                                    "previous_frame": first.frame + 4, "frame": later.frame, "member": "c2"}]


# -- broken trees ---------------------------------------------------------------------------------------

OPS = ["Metadata", "Fetch", "ListOffsets", "OffsetCommit", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
       "ConsumerGroupHeartbeat"]
NAMES = ["topics", "responses", "partitions", "topic", "topic_id", "name", "partition", "partition_index",
         "fetch_offset", "high_watermark", "last_stable_offset", "log_start_offset", "error_code", "group_id",
         "member_id", "generation_id", "members", "assignments", "assignment", "assigned_partitions",
         "topic_partitions", "member_epoch", "committed_offset", "offset", "timestamp", "replica_id",
         "rebalance_timeout_ms", "session_timeout_ms", "group_instance_id", "reason", "protocols"]
VALUES: list[Any] = [None, -1, 0, 7, 2**63, "x", "", b"\x00", True, 1.5, [], {}]


def _junk(rng: random.Random, depth: int) -> Field:
    name = rng.choice(NAMES)
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return Field(name, rng.choice(VALUES), hint=rng.choice([None, "array", "struct"]))
    kids = [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    return array(name, kids) if roll < 0.7 else struct(name, kids)


def test_broken_trees_give_no_exception() -> None:
    rng = random.Random(848)
    w = Wire()
    for i in range(600):
        op = rng.choice(OPS)
        info: dict[str, Any] = {"op": op, "client_id": rng.choice(["c1", "c2", None, 5]),
                                "group": rng.choice(["g", None, 3, ["x"]])}
        req = w._message(i * 0.1, True, rng.randrange(3), "b:1", {}, info)
        req.fields = [_junk(rng, 0) for _ in range(rng.randrange(6))]
        res = w._message(i * 0.1 + 0.01, False, req.stream, "b:1", {},
                         {"op": op, "error": rng.choice([None, "UNKNOWN_MEMBER_ID", 4]),
                          "error_code": rng.choice([0, 25, "x"])})
        res.fields = [_junk(rng, 0) for _ in range(rng.randrange(6))]
        res.peer = rng.choice([req, None, req])
    w.messages.append(w._message(99.0, True, 1, "b:1", {}, {}))  # no operation at all
    json.dumps(w.result().to_json(), allow_nan=False)


def _spoil(rng: random.Random, f: Field) -> None:
    """Change a value's type, drop children or turn a struct into a scalar, here and there."""
    for c in list(f.children or ()):
        roll = rng.random()
        if roll < 0.1 and f.children is not None:
            f.children.remove(c)
        elif roll < 0.25:
            c.value, c.children, c.hint = rng.choice(VALUES), None, rng.choice([None, "array", "struct"])
        else:
            _spoil(rng, c)


def test_spoilt_real_shapes_give_no_exception() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        w = Wire()
        metadata(w, 0.0, "c1")
        join(w, 0.5, "c1", "A", 1, ["A", "B"], rebalance_ms=1000)
        sync(w, 1.0, "c1", "A", 1, {"A": [0], "B": [1]})
        for i in range(6):
            fetch(w, 2.0 + 3 * i, "c1", {0: i, 1: 2 * i}, {0: 5000, 1: 9}, by_id=bool(i % 2))
            heartbeat(w, 2.5 + 3 * i, "c1", "A", 1, error=rng.choice([None, "ILLEGAL_GENERATION"]))
            commit(w, 3.0 + 3 * i, "c1", "A", {0: 100 - i})
        w.call("LeaveGroup", 30.0, "c1", {"group_id": "g", "members": [{"member_id": "A", "reason": "bye"}]},
               {"error_code": 0})
        for m in w.messages:
            _spoil(rng, struct("root", m.fields))
            if rng.random() < 0.1:
                m.info = {"op": m.info.get("op"), "group": 7, "client_id": ["c1"]}
        json.dumps(w.result().to_json(), allow_nan=False)


# -- real captures -----------------------------------------------------------------------------------

def test_classic_group_of_the_confluent_capture() -> None:
    r = run_capture(shared_path("captures", "kafka", "gen__mock_ck_consumer_group.pcap"))
    [f] = of_kind(r, "kafka.consumer.rebalance")
    # JoinGroup answers: generation 2 (frame 94, ck-c1 alone), generation 3 (frames 197-198, with ck-c2,
    # which joined as static member "static-member-2"); REBALANCE_IN_PROGRESS answers in frames 184,
    # 187, 190; LeaveGroup from ck-c1 in frame 352.
    assert f.values["generations"] == [2, 3] and f.values["rebalances"] == 1
    assert f.values["joined"] == ["ck-c1", "ck-c2 (static static-member-2)"]
    assert f.values["errors"] == {"REBALANCE_IN_PROGRESS": 3} and f.values["left"] == [{"member": "ck-c1",
                                                                                          "reason": "left"}]
    assert f.severity is Severity.NOTE and {94, 184, 187, 190, 197} <= set(f.frames)
    # The leader's SyncGroup for generation 3 (frame 205) gives grp/2 and grp/3 to ck-c2.
    [moves] = of_kind(r, "kafka.consumer.assignment")
    assert [(m["partition"], m["from"], m["to"]) for m in moves.values["moves"]] == [
        (2, "ck-c1", "ck-c2 (static static-member-2)"), (3, "ck-c1", "ck-c2 (static static-member-2)")]
    # Fetch v16 names topics by id (learnt from Metadata): frame 125 answers grp/2 hw=10 for offset 0.
    assert r.charts["lag"]["g-classic grp/2"]["v"][:2] == [10, 0]
    # The refused commit of grp/3 at offset 1 (frame 183) is no commit: 8 (frame 339) is no rewind.
    assert not of_kind(r, "kafka.consumer.commit_backwards") and not of_kind(r, "kafka.consumer.lag")
    assert not of_kind(r, "kafka.consumer.max_poll_stall")


def test_kafka_python_member_fenced_after_leaving() -> None:
    r = run_capture(shared_path("captures", "kafka", "gen__mock_kp_basic.pcap"))
    # kp-g1: generation 2 (frame 286), a rejoin answered after 29.0 s with generation 3 (frame 298), after
    # the member had left (frame 296): its SyncGroup is answered UNKNOWN_MEMBER_ID (frame 307).
    by_group = {f.values["group"]: f for f in of_kind(r, "kafka.consumer.rebalance")}
    g1 = by_group["kp-g1"]
    assert g1.severity is Severity.WARNING and g1.values["errors"] == {"UNKNOWN_MEMBER_ID": 1}
    assert g1.values["longest_join_s"] == pytest.approx(29.0, abs=0.01) and 307 in g1.frames
    assert by_group["kp-g2"].severity is Severity.CHAT and by_group["kp-g2"].values["rebalances"] == 0


def test_kafka_go_groups_are_quiet() -> None:
    for p in shared_path("captures", "kafka").glob("segmentio__kafka-go__*.pcapng"):
        r = run_capture(p)
        assert all(f.severity in (Severity.CHAT, Severity.NOTE) for f in r.findings), (p.name, r.findings)
        assert all(f.severity is Severity.CHAT for f in of_kind(r, "kafka.consumer.rebalance")), p.name


def _expert_capture(name: str) -> tuple[Result, dict[str, Any]]:
    """The consumer findings of a project capture, and its sidecar (what the clients saw)."""
    p = CAPTURES / "kafka" / f"{name}.pcap"
    if not p.exists():
        pytest.skip(f"captures/kafka/{name}.pcap is not recorded")
    return run_capture(p), json.loads(p.with_suffix(".json").read_text())


def _tp(name: str) -> tuple[str, int]:
    topic, _, part = name.rstrip("]").partition("[")
    return topic, int(part)


def _client_moves(events: list[dict[str, Any]]) -> list[tuple[str, int, str, str]]:
    """The partitions the clients were given that another client had last, in the order they saw it."""
    owner: dict[tuple[str, int], str] = {}
    out: list[tuple[str, int, str, str]] = []
    for e in sorted((e for e in events if e["event"] == "assign"), key=lambda e: e["t"]):
        for tp in sorted(map(_tp, e["partitions"])):
            if owner.get(tp, e["client"]) != e["client"]:
                out.append((*tp, owner[tp], e["client"]))
            owner[tp] = e["client"]
    return out


def _moves(f: Finding) -> list[tuple[str, int, str, str]]:
    return [(m["topic"], m["partition"], m["from"], m["to"]) for m in f.values["moves"]]


def test_healthy_capture_gives_no_warning() -> None:
    r, side = _expert_capture("expert_healthy")
    assert [f.summary for f in r.findings if f.severity in (Severity.WARNING, Severity.ERROR)] == []
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.values["group"] == side["facts"]["group"] and f.values["generations"] == side["facts"]["generations"]
    assert f.severity is Severity.CHAT and f.values["rebalances"] == 0


def test_lag_then_a_max_poll_stall_and_rejoin() -> None:
    r, side = _expert_capture("expert_consumer_lag")
    facts = side["facts"]
    [stall] = of_kind(r, "kafka.consumer.max_poll_stall")
    assert stall.values["group"] == facts["group"] and stall.values["client_id"] == "lag-reader"
    assert stall.values["rebalance_timeout_ms"] == facts["max_poll_interval_ms"]
    assert facts["stall_s"] <= stall.values["gap_s"] < facts["stall_s"] + 2 and "JoinGroup" in stall.values["evidence"]
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.values["generations"] == facts["generations"] and f.severity is Severity.WARNING
    assert any("stalled past max.poll.interval.ms" in c for c in f.values["causes"])
    # The producer wrote every record before the first Fetch (offset 0): the lag peaked at the partition's size.
    [lag] = of_kind(r, "kafka.consumer.lag")
    assert lag.values["lag_max"] == facts["produced"][f"{facts['topic']}[{lag.values['partition']}]"]
    assert not of_kind(r, "kafka.consumer.commit_backwards")
    assert not of_kind(r, "kafka.consumer.assignment")  # the same consumer rejoined: nothing moved


def test_cooperative_rebalance_moves_what_the_clients_saw() -> None:
    r, side = _expert_capture("expert_cooperative_rebalance")
    facts = side["facts"]
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.values["generations"] == sorted({g for gs in facts["generations"].values() for g in gs})
    assert f.values["protocols"] == ["cooperative-sticky"] and f.severity is not Severity.WARNING
    [moves] = of_kind(r, "kafka.consumer.assignment")
    assert _moves(moves) == _client_moves(side["events"]) != []


def test_kip848_rebalance_moves_what_the_clients_saw() -> None:
    r, side = _expert_capture("expert_kip848_rebalance")
    facts = side["facts"]
    [f] = of_kind(r, "kafka.consumer.rebalance")
    assert f.values["generations"] == sorted({g for gs in facts["generations"].values() for g in gs if g > 0})
    assert {x["member"] for x in f.values["left"]} == set(facts["consumed"])
    [moves] = of_kind(r, "kafka.consumer.assignment")
    assert _moves(moves) == _client_moves(side["events"]) != []


def test_topic_and_group_names_are_kept_cut_short() -> None:
    # A name is data: 300 Metadata responses naming a distinct 1 MB topic by its id (315 MB)
    # took 354 MB in expert (now 49 MB); the tables of ids and groups outlive the messages.
    w = Wire()
    for i in range(3):
        name = f"{i}" * 5_000
        w.call("Metadata", float(i), "c", {"topics": None},
               {"topics": [{"error_code": 0, "name": name, "topic_id": f"00000000-0000-0000-0000-00000000000{i + 1}",
                            "partitions": []}]})
        heartbeat(w, float(i) + 0.5, "c", "m", 1, group=name)
    expert = Expert(analyzers=[Consumers])
    expert.add_all(sorted(w.messages, key=lambda m: (m.ts, m.frame)))
    consumers = expert.analyzers[0]
    assert isinstance(consumers, Consumers)
    names = [*consumers.topic_names.values(), *consumers.groups]
    assert len(names) == 6 and all(len(n) == 1_025 and n.endswith("…") for n in names)
