"""`kdissect sniff` on loopback while a real Kafka client (librdkafka through confluent-kafka)
produces to and consumes from librdkafka's mock cluster."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import MockCluster, export_jsonl, start_sniff

pytestmark = pytest.mark.live
TOPIC = "kd-live"


def produce(bootstrap: str, n: int, per_request: int = 1) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0 if per_request == 1 else 5, "acks": 1,
                  "batch.num.messages": per_request, "queue.buffering.max.messages": max(n, 1000)})
    for i in range(n):
        p.produce(TOPIC, key=b"k%d" % i, value=b"value-%d" % i)
        p.poll(0)
    assert p.flush(30) == 0


def consume(bootstrap: str, n: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kd-live-group", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    deadline = time.monotonic() + 20
    while got < n and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(1000, 0.2) if not m.error())
    c.close()
    return got


def records(m: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of a Produce request's record batches."""
    return [rec for t in m["fields"].get("topic_data", []) for p in t["partition_data"]
            for batch in p.get("records") or [] for rec in batch.get("records", [])]


def sniff_args(mc: MockCluster, *extra: str) -> list[str]:
    port = mc.ports[0]
    return ["-i", "lo", "-f", f"tcp port {port}", "--decode-as", f"{port}=kafka", "-F", "jsonl", *extra]


def test_produce_and_consume_are_decoded_live(mock_kafka: MockCluster, tmp_path: Path) -> None:
    pcap = tmp_path / "live.pcap"
    sn = start_sniff(sniff_args(mock_kafka, "-w", str(pcap)))
    produce(mock_kafka.bootstrap, 50)
    assert consume(mock_kafka.bootstrap, 50) == 50
    time.sleep(0.3)
    assert sn.stop() == 0, sn.stderr_lines
    assert " 0 dropped by the kernel" in sn.summary
    msgs = sn.messages()
    kinds = Counter((m["info"]["op"], m["kind"]) for m in msgs)
    for op in ("ApiVersions", "Metadata", "Produce", "Fetch"):
        assert kinds[(op, "request")] >= 1 and kinds[(op, "response")] >= 1, op
    assert kinds[("Produce", "request")] == kinds[("Produce", "response")] == 50

    # Every response is printed after its request, linked to it, with a response time.
    for i, m in enumerate(msgs):
        if m["kind"] == "response":
            reqs = [r for r in msgs[:i] if r["kind"] == "request" and r["frame"] == m["match"]["frame"]
                    and r["stream"] == m["stream"] and r["info"]["corr"] == m["info"]["corr"]]
            assert len(reqs) == 1 and reqs[0]["info"]["op"] == m["info"]["op"], m
            assert 0 <= m["match"]["rtt_ms"] < 5000
    produced = [m for m in msgs if m["info"]["op"] == "Produce" and m["kind"] == "request"]
    assert {m["info"]["topic"] for m in produced} == {TOPIC}
    assert sorted(r["value_text"] for m in produced for r in records(m)) == sorted(f"value-{i}" for i in range(50))
    metadata = [m for m in msgs if m["info"]["op"] == "Metadata" and m["kind"] == "response"]
    assert any(TOPIC in m["info"].get("topics", []) for m in metadata)
    assert not [d for m in msgs for d in m["diagnostics"] if d["severity"] == "error"]

    # The capture written with -w reads back to the same messages.
    back = export_jsonl(pcap, "--decode-as", f"{mock_kafka.ports[0]}=kafka")

    def key(m: dict[str, Any]) -> tuple[int, int, str, str]:
        return (m["stream"], m["frame"], m["kind"], m["summary"])

    assert sorted(map(key, back)) == sorted(map(key, msgs))

    def rtts(ms: list[dict[str, Any]]) -> list[tuple[int, int, int, float]]:
        return sorted((m["stream"], m["frame"], m["info"]["corr"], m["match"]["rtt_ms"])
                      for m in ms if m["kind"] == "response")

    assert rtts(back) == rtts(msgs)


def test_keeps_up_with_one_request_per_record(mock_kafka: MockCluster) -> None:
    n = 3000
    sn = start_sniff(sniff_args(mock_kafka))
    t0 = time.monotonic()
    produce(mock_kafka.bootstrap, n)
    rate = n / (time.monotonic() - t0)
    time.sleep(0.3)
    assert sn.stop(timeout=60) == 0, sn.stderr_lines
    assert " 0 dropped by the kernel" in sn.summary, sn.summary
    assert "backlog" not in sn.summary
    msgs = sn.messages()
    produce_msgs = [m for m in msgs if m["info"]["op"] == "Produce"]
    assert Counter(m["kind"] for m in produce_msgs) == {"request": n, "response": n}, f"{rate:.0f} records/s"


def test_count_and_duration_stop_the_capture(mock_kafka: MockCluster) -> None:
    sn = start_sniff(sniff_args(mock_kafka, "-c", "4", "--duration", "20"))
    produce(mock_kafka.bootstrap, 5)
    sn.proc.wait(timeout=20)
    assert sn.stop() == 0
    assert len(sn.messages()) == 4
    assert ", 4 messages," in sn.summary

    sn = start_sniff(sniff_args(mock_kafka, "--duration", "0.5"))
    t0 = time.monotonic()
    sn.proc.wait(timeout=20)
    assert time.monotonic() - t0 < 5
    assert sn.stop() == 0 and sn.messages() == []
    assert sn.summary.startswith("kdissect: 0 packets, 0 messages, 0 dropped by the kernel")
