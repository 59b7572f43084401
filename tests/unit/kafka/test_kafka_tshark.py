"""Differential check against tshark's Kafka dissector on the shared captures, for the
non-flexible versions tshark decodes: api keys, correlation ids, topic names, partition ids and
error codes per frame."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from kafka_captures import capture, messages, ports

from kdissect.model import Field, Message

CAPTURES = [
    "ajbanjara__Wireshark__kafka-testcases-v4__fetch.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__metadata.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__offset-commit.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__offset-fetch.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__produce.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__join-group.pcapng",
    "ajbanjara__Wireshark__kafka-testcases-v4__create-topics.pcapng",
    "arkime__arkime__kafka.pcap",
    "deepflowio__deepflow__00-produce-v2.pcap",
    "gen__mock_kp_api_0_8_2.pcap",
    "gen__mock_kp_api_0_10.pcap",
    "gen__mock_ck_old_protocol_v0.pcap",
    "segmentio__kafka-go__v1-v1.pcapng",
]
FIELDS = ["frame.number", "kafka.api_key", "kafka.correlation_id", "kafka.topic_name",
          "kafka.partition_id", "kafka.error"]
# tshark files CreateTopics' partition count under kafka.partition_id as well.
PARTITION_NAMES = {"partition", "partition_index", "index", "partition_id", "num_partitions"}
PARTITION_ARRAYS = {"partitions", "partition_indexes"}


# tshark's own mistakes, checked against the bytes: (capture, frame) -> what tshark gets wrong.
TSHARK_DEFECTS = {
    ("ajbanjara__Wireshark__kafka-testcases-v4__create-topics.pcapng", 4):
        "reads the second assignment's broker-id count (3) as its partition id (1)",
}


def tshark(name: str) -> dict[int, list[str]]:
    path = capture(name)
    cmd = ["tshark", "-r", str(path), "-Y", "kafka", "-T", "fields", "-E", "occurrence=a"]
    for p in ports(path) or {9092: "kafka"}:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    rows: dict[int, list[str]] = {}
    for line in out.splitlines():
        cols = line.split("\t")
        rows[int(cols[0])] = cols[1:]
    return rows


def walk(fields: list[Field], out: dict[str, set[Any]]) -> None:
    for f in fields:
        if f.children is not None:
            walk(f.children, out)
            if f.name in PARTITION_ARRAYS and f.children and f.children[0].children is None:
                out["partitions"].update(c.value for c in f.children)
        elif f.name in PARTITION_NAMES and isinstance(f.value, int):
            out["partitions"].add(f.value)
        elif f.name.endswith("error_code") and isinstance(f.value, int):
            out["errors"].add(f.value)


def ours(m: Message) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {"partitions": set(), "errors": set()}
    walk(m.fields, out)
    return out


def ints(col: str) -> set[int]:
    return {int(x) for x in col.split(",") if x.lstrip("-").isdigit()}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", CAPTURES)
def test_same_as_tshark(name: str) -> None:
    rows = tshark(name)
    compared = 0
    for m in messages(name):
        row = rows.get(m.frames[-1])
        if row is None or not row[0] or "op_code" not in m.info:
            continue
        api, corr, topics, parts, errors = row
        assert int(api.split(",")[0]) == m.info["op_code"], m
        assert int(corr.split(",")[0]) == m.info["corr"], m
        if topics:
            assert {t for t in topics.split(",") if t} <= set(m.info.get("topics", [])), m
        mine = ours(m)
        if (name, m.frame) not in TSHARK_DEFECTS:
            assert ints(parts) <= mine["partitions"], m
        assert ints(errors) - {0} <= mine["errors"], m
        compared += 1
    assert compared
