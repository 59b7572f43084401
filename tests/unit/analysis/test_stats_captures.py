"""`kdissect stats` on real captures, every number checked against the JSON export."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from analysis_support import capture, export, run

from kdissect.analysis.stats import MAX_ERROR_NAMES, OTHER, Stats, _tally
from kdissect.model import Field, Message, Pdu, array, struct


def stats(path: Path, *args: str) -> dict[str, Any]:
    return json.loads(run("stats", str(path), "-F", "json", *args))


def nearest_rank(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


def op_key(d: dict[str, Any], by_frame: dict[int, dict[str, Any]]) -> tuple[str, str, int | None]:
    """A response counts under its request's operation and version."""
    if d["kind"] == "response" and d["match"]:
        d = by_frame[d["match"]["frame"]]
    return d["protocol"], d["info"].get("op") or "(unknown)", d["info"].get("version")


@pytest.mark.parametrize("rel", ["kafka/gen__mock_ck_errors.pcap", "kafka/gen__mock_ck_consumer_group.pcap",
                                 "zookeeper/gen__zk_kazoo_errors.pcap", "zookeeper/gen__zk_kazoo_basic.pcap",
                                 "pulsar/gen__pulsar_py_produce_consume.pcap", "rocketmq/gen__rocketmq_cpp_produce.pcap"])
def test_operations_match_the_export(rel: str) -> None:
    path = capture(rel)
    msgs = export(path)
    by_frame = {d["frame"]: d for d in msgs if d["kind"] == "request"}
    got = {(r["protocol"], r["op"], r["version"]): r for r in stats(path)["operations"]}
    want_req = Counter(op_key(d, by_frame) for d in msgs if d["kind"] == "request")
    want_resp = Counter(op_key(d, by_frame) for d in msgs if d["kind"] == "response")
    assert {k: r["requests"] for k, r in got.items() if r["requests"]} == dict(want_req)
    assert {k: r["responses"] for k, r in got.items() if r["responses"]} == dict(want_resp)
    for key, row in got.items():
        resp = [d for d in msgs if d["kind"] == "response" and op_key(d, by_frame) == key]
        errors = Counter(d["info"]["error"] for d in resp if d["info"].get("error"))
        assert Counter(row["errors"]) + Counter(row["expected"]) == errors, key
        timed = [d for d in resp if d["match"] and d["match"]["rtt_ms"] is not None]
        polls = [d for d in timed if long_poll(d, by_frame[d["match"]["frame"]])]
        assert row["long_polls"] == row["long_poll_time_ms"]["count"] == len(polls), key
        rtts = [d["match"]["rtt_ms"] for d in timed if d not in polls]
        rt = row["response_time_ms"]
        assert rt["count"] == len(rtts)
        if rtts:
            assert rt["exact"]
            assert (rt["min"], rt["max"]) == (min(rtts), max(rtts))
            for q, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
                assert rt[name] == nearest_rank(rtts, q), (key, name)


def long_poll(resp: dict[str, Any], req: dict[str, Any]) -> bool:
    """docs/stats.md's long-poll rule for the operations of these captures, from the JSON export."""
    op, err, rtt = req["info"].get("op"), resp["info"].get("error"), resp["match"]["rtt_ms"]
    if req["protocol"] == "kafka" and op == "JoinGroup":
        return err is None
    if req["protocol"] == "kafka" and op == "Fetch":
        wait = req["fields"].get("max_wait_ms") or 0
        records = sum(n for _, _, n in batches(resp, "responses", "partitions", "partition_index"))
        return err is None and records == 0 and wait > 0 and rtt >= 0.9 * wait
    return False


def batches(d: dict[str, Any], topic_key: str, parts_key: str, part_key: str) -> Iterator[tuple[str, int, int]]:
    for t in d["fields"].get(topic_key) or []:
        for p in t.get(parts_key) or []:
            recs = p.get("records") or []
            yield t.get("name") or t.get("topic") or "?", p[part_key], sum(b.get("records_count", 0) for b in recs)


def test_produce_and_fetch_records_per_partition() -> None:
    path = capture("kafka/gen__mock_ck_codec_none.pcap")
    msgs = export(path)
    produced: Counter[tuple[str, int]] = Counter()
    for d in msgs:
        if d["kind"] == "request" and d["info"].get("op") == "Produce":
            for topic, part, n in batches(d, "topic_data", "partition_data", "index"):
                produced[(topic, part)] += n
    assert sum(produced.values()) > 0
    rows = stats(path)["topics"]
    assert {(r["topic"], r["partition"]): r["produced"]["records"] for r in rows} == dict(produced)
    # Fetch v13+ names topics by id; the Metadata response maps the id to the name. Every
    # produced record is fetched once in this capture.
    assert all(r["fetched"]["records"] == r["produced"]["records"] for r in rows)
    by_client = {r["client_id"]: r for r in stats(path)["clients"]}
    want = Counter(d["info"]["client_id"] for d in msgs if d["kind"] == "request" and "client_id" in d["info"])
    assert {k: v["requests"] for k, v in by_client.items()} == dict(want)


def test_display_filter_restricts_the_statistics() -> None:
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    only = stats(path, "-Y", "kafka.op == Produce")
    assert {r["op"] for r in only["operations"]} == {"Produce"}
    assert only["messages"] == len(export(path, "-Y", "kafka.op == Produce")) == 14


def test_zookeeper_paths() -> None:
    path = capture("zookeeper/gen__zk_kazoo_basic.pcap")
    msgs = export(path)
    want = Counter((d["info"]["op"], d["info"]["path"]) for d in msgs
                   if d["kind"] == "request" and "path" in d["info"])
    assert want
    got = {(r["op"], r["path"]): r["count"] for r in stats(path)["paths"] if r["count"]}
    assert got == dict(want)


def test_text_output_has_tables_and_a_histogram() -> None:
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    out = run("stats", str(path), "--no-color")
    assert "Service response time" in out and "Records per topic and partition" in out
    assert "kafka response time (ms, 15 responses)" in out
    assert "█" in out


def _record_batch(topic: str, part: int, count: int) -> Field:
    batch = struct("batch", [Field("records_count", count), array("records", [])])
    return struct("t", [Field("name", topic), array("partition_data", [
        struct("p", [Field("index", part), Field("records", None, 0, 100, [batch], "array")])])])


def test_tables_are_bounded() -> None:
    st = Stats(max_keys=5)
    for i in range(50):
        m = Message(Pdu(b"x" * 10, [i], float(i), float(i), True), i, f"10.0.0.1:{1000 + i}", "10.0.0.2:9092", "kafka")
        m.info = {"op": f"Op{i}", "client_id": f"c{i}", "path": f"/p{i}"}
        m.fields = [array("topic_data", [_record_batch(f"t{i}", 0, 3)])]
        st.add(m)
    assert len(st.ops) <= 6 and len(st.clients) <= 6 and len(st.paths) <= 6 and len(st.topics) <= 6
    assert len(st.conversations) == 5
    assert sum(t.produced.records for t in st.topics.values()) == 150


def test_error_names_per_row_are_bounded() -> None:
    # Every distinct error name was kept per operation and per path: 300,000 ZooKeeper replies of
    # distinct unknown error codes took 160 MB in stats -F json, and 10.7 MB of JSON.
    st = Stats()
    n = 3 * MAX_ERROR_NAMES
    for i in range(n):
        m = Message(Pdu(b"x" * 10, [i], float(i), float(i), False), i, "10.0.0.1:1000", "10.0.0.2:2181", "zookeeper")
        m.kind = "response"
        m.info = {"op": "exists", "path": "/a", "error_code": -1000 - i}
        st.add(m)
    (op,), (path,) = st.ops.values(), st.paths.values()
    for errors in (op.errors, path.errors):
        assert len(errors) == MAX_ERROR_NAMES + 1 and sum(errors.values()) == n
        assert errors[OTHER] == n - MAX_ERROR_NAMES and errors["error -1000"] == 1
    # A name counted under OTHER is taken back from there.
    _tally(op.errors, "error -1250", -1)
    assert op.errors[OTHER] == n - MAX_ERROR_NAMES - 1 and "error -1250" not in op.errors


@pytest.mark.parametrize("rel", ["pulsar/gen__pulsar_py_produce_consume.pcap", "rocketmq/gen__rocketmq_cpp_produce.pcap",
                                 "kafka/gen__mock_ck_produce_basic.pcap"])
def test_messages_per_topic(rel: str) -> None:
    path = capture(rel)
    msgs = export(path)
    by_frame = {d["frame"]: d for d in msgs if d["kind"] == "request"}

    def topics(d: dict[str, Any]) -> list[str]:
        info = d["info"]
        got = info.get("topics") or ([info["topic"]] if "topic" in info else [])
        if not got and d["kind"] == "response" and d["match"]:
            return topics(by_frame[d["match"]["frame"]])
        return list(dict.fromkeys(got))

    want: Counter[tuple[str, str, str]] = Counter()
    size: Counter[str] = Counter()
    for d in msgs:
        for t in topics(d):
            want[(t, d["kind"], d["protocol"])] += 1
            size[t] += d["length"]
    assert want
    for r in stats(path)["topic_messages"]:
        assert r["requests"] == want[(r["topic"], "request", r["protocol"])]
        assert r["responses"] == want[(r["topic"], "response", r["protocol"])]
        assert r["bytes"] == size[r["topic"]]


def test_tables_keep_names_cut_short() -> None:
    # A name is data: each row kept a whole one, so 300 Produce requests and responses naming a
    # distinct topic of a megabyte each (630 MB) took 453 MB in stats and 356 MB in expert (now
    # 54 and 56 MB); the tables' 10,000 rows could hold gigabytes. They keep 1,024 characters.
    st = Stats()
    for i in range(3):
        topic, client, path = (f"{i}" * 5_000 for _ in range(3))
        m = Message(Pdu(b"x" * 10, [i], float(i), float(i), True), i, "10.0.0.1:1000", "10.0.0.2:9092", "kafka")
        m.info = {"op": "Produce", "client_id": client, "path": path, "topics": [topic]}
        m.fields = [array("topic_data", [_record_batch(topic, 0, 3)]),
                    array("topics", [struct("t", [Field("topic_id", f"id-{i}"), Field("name", topic)])])]
        st.add(m)
    names = [t for t, _ in st.topics] + [t for _, t in st.topic_messages] + [c for _, c in st.clients]
    names += [p for _, _, p in st.paths] + list(st.topic_names.values())
    assert len(names) == 15 and all(len(n) == 1_025 and n.endswith("…") for n in names)
    assert sum(t.produced.records for t in st.topics.values()) == 9
