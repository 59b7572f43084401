"""export --format fields, conversations, follow, protocols and fields on real captures, checked
against the JSON export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_support import capture, export, run
from click.testing import CliRunner
from pcapgen import Pkt, TcpConn, api_versions_with_tags, ethernet, write_pcap

from kdissect.analysis.fieldkeys import MAX_KEYS
from kdissect.cli import cli
from kdissect.commands.fieldsout import parse_format
from kdissect.errors import UsageError


def test_fields_output_matches_the_json_export() -> None:
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    out = run("export", str(path), "-F", "fields", "-E", "header=y", "-e", "kdissect.frame", "-e", "kafka.op",
              "-e", "kafka.topic_data.partition_data.index", "-e", "kdissect.rtt_ms",
              "-e", "kafka.responses.partition_responses.error_code_name", "-e", "kafka.header.client_id")
    lines = out.splitlines()
    assert lines[0].split("\t")[0] == "kdissect.frame"
    rows = [line.split("\t") for line in lines[1:]]
    msgs = export(path)
    assert len(rows) == len(msgs)
    for row, d in zip(rows, msgs, strict=True):
        assert len(row) == 6
        assert row[0] == str(d["frame"])
        assert row[1] == d["info"].get("op", "")
        parts = [str(p["index"]) for t in d["fields"].get("topic_data", []) for p in t["partition_data"]]
        assert row[2] == ",".join(parts)
        assert row[3] == ("" if d["match"] is None else str(d["match"]["rtt_ms"]))
        names = [p["error_code_name"] for t in d["fields"].get("responses", []) for p in t["partition_responses"]]
        assert row[4] == ",".join(names)
        assert row[5] == (d["fields"].get("header", {}).get("client_id") or "")


def test_fields_options() -> None:
    fmt = parse_format(["separator=/s", "aggregator=;", "quote=d", "occurrence=f", "header=n"])
    assert (fmt.separator, fmt.aggregator, fmt.quote, fmt.occurrence, fmt.header) == (" ", ";", '"', "f", False)
    with pytest.raises(UsageError):
        parse_format(["colour=y"])
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    out = run("export", str(path), "-F", "fields", "-e", "kafka.topic_data.partition_data.records.records.key",
              "-E", "occurrence=l", "-E", "quote=s", "-Y", "kdissect.frame == 33")
    (d,) = export(path, "-Y", "kdissect.frame == 33")
    last = d["fields"]["topic_data"][-1]["partition_data"][-1]["records"][-1]["records"][-1]["key_text"]
    assert last.startswith("key-")
    assert out == f"'{last}'\n"


def test_conversations_match_the_export() -> None:
    path = capture("kafka/gen__mock_ck_consumer_group.pcap")
    rows = json.loads(run("conversations", str(path), "-F", "json"))
    msgs = export(path)
    streams = sorted({d["stream"] for d in msgs})
    decoded = [r for r in rows if r["protocol"] == "kafka"]
    assert [r["stream"] for r in decoded] == streams
    for r in decoded:
        mine = [d for d in msgs if d["stream"] == r["stream"]]
        assert r["messages"] == r["matched_messages"] == len(mine)
        assert r["requests"] == sum(d["kind"] == "request" for d in mine)
        first = mine[0]
        client = first["src"] if first["kind"] == "request" else first["dst"]
        assert r["client"] == client
    only = json.loads(run("conversations", str(path), "-F", "json", "-Y", "kafka.op == JoinGroup"))
    join_streams = sorted({d["stream"] for d in msgs if d["info"].get("op") == "JoinGroup"})
    assert [r["stream"] for r in only] == join_streams


def test_follow_prints_one_stream_in_order() -> None:
    path = capture("zookeeper/gen__zk_kazoo_basic.pcap")
    msgs = [d for d in export(path) if d["stream"] == 0]
    out = run("follow", str(path), "--stream", "0", "--no-color").splitlines()
    assert out[0].startswith("Stream 0: zookeeper ")
    frames = [int(line.split()[0]) for line in out[1:-1]]
    assert frames == [d["frame"] for d in msgs]
    assert out[-1].startswith(f"{len(msgs)} messages:")
    verbose = run("follow", str(path), "--stream", "0", "--no-color", "-V")
    assert "    path: " in verbose


def test_protocols_and_fields() -> None:
    protos = json.loads(run("protocols", "-F", "json"))
    assert "kafka" in {p["name"] for p in protos}
    keys = {k["key"]: k for k in json.loads(run("fields", "kafka", "-F", "json"))}
    assert "Produce request" in keys["kafka.topic_data.partition_data.index"]["used_by"]
    assert "kafka.responses.partition_responses.error_code_name" in keys
    assert "kafka.header.api_key" in keys
    zk = {k["key"] for k in json.loads(run("fields", "zookeeper", "-F", "json"))}
    assert {"zookeeper.path", "zookeeper.stat.mzxid", "zookeeper.acl.id.scheme", "zookeeper.xid",
            "zookeeper.err_name", "zookeeper.acl.perms_name"} <= zk
    assert "zookeeper.mzxid" not in zk  # Stat is only ever nested
    common = run("fields", "kdissect")
    assert "kdissect.rtt_ms\t" in common


def test_fields_from_a_capture_lists_a_bounded_number_of_keys(tmp_path: Path) -> None:
    # Kafka names an unknown tagged field by its tag (kafka.tag_N): 5 requests of 4,000 tags each,
    # 80 KB, would make 20,000 keys. The first MAX_KEYS are listed, a note says what was not.
    c = TcpConn()
    pkts = [Pkt(0.0, ethernet(p)) for p in c.handshake()]
    for i in range(5):
        pkts.append(Pkt(0.1 + i, ethernet(c.segment(True, api_versions_with_tags(i, 4000, 1000 + 4000 * i)))))
    path = tmp_path / "tags.pcap"
    write_pcap(str(path), pkts)
    res = CliRunner().invoke(cli, ["fields", "kafka", "--from", str(path), "-F", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    keys = json.loads(res.stdout)
    assert len(keys) == MAX_KEYS and sum(k["key"].startswith("kafka.tag_") for k in keys) > MAX_KEYS - 20
    unlisted = 20_000 - sum(k["key"].startswith("kafka.tag_") for k in keys)
    assert res.stderr == f"kdissect: note: {unlisted} values of keys seen after the first {MAX_KEYS:,} are not listed\n"


def test_zookeeper_table_keys_cover_a_capture() -> None:
    """Every key a real capture shows at the root of a ZooKeeper record is in the table walk."""
    path = capture("zookeeper/gen__zk_kazoo_basic.pcap")
    table = {k["key"] for k in json.loads(run("fields", "zookeeper", "-F", "json"))}
    seen = {k["key"] for k in json.loads(run("fields", "zookeeper", "--from", str(path), "-F", "json"))
            if not k["type"].startswith("info:")}
    missing = seen - table
    assert len(seen) > 20
    # Outside the record tables: four-letter words, undecoded bytes.
    four_letter = {"zookeeper.four_letter_word", "zookeeper.lines", "zookeeper.text"}
    assert missing <= four_letter | {"zookeeper.body", "zookeeper.trailing", "zookeeper.event"}, missing


def test_fields_from_a_capture() -> None:
    path = capture("zookeeper/gen__zk_kazoo_basic.pcap")
    keys = {k["key"]: k for k in json.loads(run("fields", "zookeeper", "--from", str(path), "-F", "json"))}
    msgs = export(path)
    # A field where the message has one, else the info fact (responses carry their request's path).
    assert keys["zookeeper.path"]["count"] == sum("path" in d["fields"] or "path" in d["info"] for d in msgs)
    assert keys["zookeeper.xid"]["count"] == sum("xid" in d["fields"] for d in msgs)
