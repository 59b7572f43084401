"""The pure-Python side of the Spark tables: rows, records, projections, units, the flow
filter. No Spark needed."""

from __future__ import annotations

import datetime
import glob
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect.dissect.base import Options, run_dissector
from kdissect.errors import UsageError
from kdissect.model import Message, Pdu
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.render.jsonout import dumps, message_dict
from kdissect.spark import rows
from kdissect.spark.schema import LAYERS, combined_columns, layer_ddl, message_columns, protocol_columns
from kdissect.spark.session import java_major
from kdissect.spark.sqltypes import arrow_schema, ddl_type
from kdissect.spark.units import Piece, flow_hash, plan, share_filter, split_size
from kdissect.spark.values import COERCE, json_map, json_text, utc_date

REPO = Path(__file__).resolve().parents[2]
SHARED = SHARED_CAPTURES


def shared(rel: str) -> str:
    p = SHARED / rel
    if not p.exists():
        pytest.skip("../shared/captures is absent")
    return str(p)


def shared_all() -> list[str]:
    files = sorted(glob.glob(str(SHARED / "*" / "*.pcap*")))
    if not files:
        pytest.skip("../shared/captures is absent")
    return files


KAFKA_BASIC_PORTS = {42445: "kafka", 42851: "kafka", 35483: "kafka"}


def messages(rel: str, decode_as: dict[int, str] | None = None) -> list:
    return list(dissect_file(shared(rel), DissectorRegistry(decode_as=decode_as or {})))


# -- message rows: the export contract, losslessly --------------------------------------

def test_message_row_holds_the_whole_json_export() -> None:
    for path in shared_all()[::3]:
        for m in dissect_file(path):
            d = message_dict(m)
            row = rows.message_row(m)
            for key in ("frame", "frames", "ts", "stream", "src", "dst", "protocol", "kind", "summary",
                        "length", "diagnostics", "match"):
                assert row[key] == d[key], (path, key)
            assert json.loads(row["fields"]) == json.loads(dumps(d["fields"]))
            assert {k: json.loads(v) for k, v in row["info"]} == json.loads(dumps(d["info"]))
            assert set(row) == {n for n, _ in message_columns()}


def test_kafka_request_columns() -> None:
    ms = messages("kafka/deepflowio__deepflow__00-produce-v9.pcap", {36333: "kafka"})
    req = rows.message_row(ms[0])
    assert (req["op"], req["op_code"], req["version"], req["corr"]) == ("Produce", 0, 9, "47")
    k = req["kafka"]
    assert (k["api_key"], k["api_version"], k["correlation_id"], k["client_id"], k["acks"]) == \
        (0, 9, 47, "console-producer", 1)
    assert req["zookeeper"] is None and req["pulsar"] is None and req["rocketmq"] is None
    resp = rows.message_row(ms[1])
    assert resp["kind"] == "response" and resp["kafka"]["api_key"] == 0 and resp["kafka"]["throttle_time_ms"] == 0


def test_zookeeper_and_rocketmq_structs() -> None:
    zk = [rows.message_row(m) for m in messages("zookeeper/gen__zk_kazoo_basic.pcap")]
    create = next(r for r in zk if r["zookeeper"]["opcode_name"] == "create")
    assert create["zookeeper"]["path"] == "/app" and create["zookeeper"]["flags_name"] == "PERSISTENT"
    rmq = [rows.message_row(m) for m in messages("rocketmq/gen__rocketmq_cpp_produce.pcap")]
    send = next(r for r in rmq if r["op"] == "SEND_MESSAGE")
    assert (send["rocketmq"]["code"], send["rocketmq"]["topic"], send["rocketmq"]["queue_id"]) == (10, "TopicGen", 0)
    assert send["rocketmq"]["producer_group"] == "PID-gen-group"


def test_time_columns() -> None:
    m = messages("kafka/deepflowio__deepflow__00-produce-v9.pcap", {36333: "kafka"})[0]
    row = rows.message_row(m)
    assert row["ts_us"] == round(m.ts * 1e6) and row["time"] == row["ts_us"]
    assert abs(row["ts_ns"] - m.ts * 1e9) < 1000
    assert row["date"] == utc_date(m.ts)
    assert utc_date(0.0) == datetime.date(1970, 1, 1) and utc_date(86400 * 365.0) == datetime.date(1971, 1, 1)


# -- records ---------------------------------------------------------------------------

def test_kafka_records_with_headers_and_null_value() -> None:
    ms = messages("kafka/gen__mock_ck_produce_basic.pcap", KAFKA_BASIC_PORTS)
    produce = next(m for m in ms if m.info.get("op") == "Produce" and m.kind == "request")
    recs = rows.record_rows(produce)
    first = recs[0]
    assert (first["topic"], first["partition"], first["offset"], first["key"]) == ("basic", 1, 0, b"key-6")
    assert first["value_size"] is None and first["value"] is None  # a null value
    assert dict(first["headers"]) == {"h1": b"v1", "trace-id": b"6", "empty": b"", "nullhdr": None}
    assert recs[1]["key_text"] == "key-16" and recs[1]["value_size"] == 63 and recs[1]["headers"] == []
    assert [r["index"] for r in recs] == list(range(len(recs)))


def test_kafka_fetch_records_take_topic_and_partition_from_around_them() -> None:
    ms = messages("kafka/ajbanjara__Wireshark__kafka-testcases-v4__fetch.pcapng")
    recs = [r for m in ms for r in rows.record_rows(m)]
    assert recs and {r["op"] for r in recs} == {"Fetch"} and {r["kind"] for r in recs} == {"response"}
    assert recs[0]["topic"] == "topic1" and recs[0]["partition"] == 0
    assert [r["offset"] for r in recs[:3]] == [0, 1, 2]


def test_pulsar_and_rocketmq_records() -> None:
    pulsar = [r for m in messages("pulsar/gen__pulsar_py_produce_consume.pcap") for r in rows.record_rows(m)]
    send = next(r for r in pulsar if r["op"] == "SEND")
    assert send["topic"] == "persistent://public/default/py-topic" and send["key"] == b"key-0"
    assert dict(send["headers"]) == {"k": b"v0", "idx": b"0"} and send["timestamp_ms"] == 1700000000000
    assert {r["op"] for r in pulsar} == {"SEND", "MESSAGE"}
    rmq = [r for m in messages("rocketmq/gen__rocketmq_cpp_produce.pcap") for r in rows.record_rows(m)]
    first = rmq[0]
    assert (first["topic"], first["partition"], first["key_text"], first["value_size"]) == ("TopicGen", 0, "key-0", 16)
    assert dict(first["headers"])["TAGS"] == b"TagA"


def test_no_records_in_zookeeper() -> None:
    assert not [r for m in messages("zookeeper/gen__zk_kazoo_basic.pcap") for r in rows.record_rows(m)]


# -- transactions ----------------------------------------------------------------------

def test_transaction_rows_pair_request_and_response() -> None:
    ms = messages("pulsar/deepflowio__deepflow__pulsar-producer.pcap")
    txs = [t for m in ms if (t := rows.transaction_row(m)) is not None and t["status"] == "answered"]
    assert len(txs) == sum(1 for m in ms if m.peer is not None)
    send = next(t for t in txs if t["op"] == "SEND")  # the request's operation, not SEND_RECEIPT
    assert send["response_summary"].startswith("SEND_RECEIPT")
    assert send["rtt_ms"] == pytest.approx((send["response_ts"] - send["request_ts"]) * 1000, abs=0.01)
    assert send["client"].endswith(":36422") and send["server"].endswith(":6650")


# -- flow shares: identical to the whole ---------------------------------------------------

def canon(path: str, flow_filter=None, registry=None, opts=None) -> list[str]:
    return [dumps({**message_dict(m), "number": 0})
            for m in dissect_file(path, registry, opts, flow_filter=flow_filter)]


@pytest.mark.parametrize("shares", [2, 3])
def test_flow_shares_together_equal_the_whole_capture(shares: int) -> None:
    for path in shared_all():
        whole = canon(path)
        parts = [line for k in range(shares) for line in canon(path, share_filter(k, shares))]
        assert sorted(parts) == sorted(whole), path


@pytest.mark.parametrize("shares", [2, 3])
def test_flow_shares_of_the_projects_captures(shares: int) -> None:
    # Kafka topic ids learned on one connection name topics on another: each share decodes the
    # other shares' Kafka conversations quietly, so the shares still add up to the whole.
    for p in sorted(CAPTURES.rglob("*.pcap")):
        registry = DissectorRegistry(decode_as=sidecar_decode_as(p, p.parent.name))
        opts = Options(tls_keylog=sidecar_keylog(p))
        whole = canon(str(p), None, registry, opts)
        parts = [line for k in range(shares) for line in canon(str(p), share_filter(k, shares), registry, opts)]
        assert sorted(parts) == sorted(whole), p


def test_flow_hash_is_the_same_in_every_process() -> None:
    a, b = (b"\x7f\x00\x00\x01", 9092), (b"\x7f\x00\x00\x01", 50000)
    assert flow_hash(a, b) == 0x41DA67A7  # CRC-32 of 7f000001 2384 7f000001 c350
    assert share_filter(0, 1) is None


def test_plan_packs_small_files_and_shares_big_ones() -> None:
    mb = 1 << 20
    files = [("a", 3 * mb), ("b", 3 * mb), ("big", 300 * mb), ("c", 1 * mb)]
    units = plan(files, parallelism=4, target=5 * mb)
    assert [p.share for u in units[:4] for p in u] == [0, 1, 2, 3]
    assert all(p.shares == 4 and p.path == "big" for u in units[:4] for p in u)
    # 5 MB packs would be two ((a), (b, c)); three fill the second round of four tasks
    assert units[4:] == [(Piece("a", 3 * mb),), (Piece("b", 3 * mb),), (Piece("c", mb),)]
    assert split_size(600 * mb, 2) == 100 * mb and split_size(60 * mb, 2) == 16 * mb  # three a core
    assert split_size(10 << 30, 2) == 128 * mb
    one_core = plan(files, parallelism=1, target=5 * mb)  # nobody to share with: whole files
    assert [[p.path for p in u] for u in one_core] == [["a"], ["b"], ["big"], ["c"]]


def test_plan_fills_the_last_round() -> None:
    """Packs are as many as make the job's tasks a whole number of rounds of one task a core
    when the files allow it: a last round of one task on two cores leaves a core idle."""
    mb = 1 << 20
    parts = [(f"p{i}", 16 * mb) for i in range(8)]
    greedy = plan(parts, parallelism=2, target=57 * mb)  # 3 + 3 + 2 files by size alone
    assert [len(u) for u in greedy] == [2, 2, 2, 2]
    assert [p.path for u in greedy for p in u] == [p for p, _ in parts]  # input order kept
    assert [len(u) for u in plan(parts, parallelism=2, target=57 * mb, planned=1)] == [3, 3, 2]
    assert [len(u) for u in plan(parts, parallelism=2, target=57 * mb, planned=4)] == [2, 2, 2, 2]
    assert len(plan(parts, parallelism=3, target=57 * mb)) == 3  # a whole round already
    assert len(plan(parts[:2], parallelism=4, target=57 * mb)) == 2  # no more packs than files
    lopsided = [("a", 1 * mb), ("huge", 40 * mb), ("b", 1 * mb)]  # each file in the pack of its middle
    assert [[p.path for p in u] for u in plan(lopsided, parallelism=4, target=57 * mb)] == \
        [["a"], ["huge"], ["b"]]


# -- types and values ----------------------------------------------------------------------

def test_schema_renders_as_ddl_and_arrow() -> None:
    pa = pytest.importorskip("pyarrow")
    for layer in LAYERS:
        assert layer_ddl(layer).startswith("`capture` STRING")
    schema = arrow_schema(combined_columns())
    assert schema.field("info").type == pa.map_(pa.string(), pa.string())
    assert schema.field("time").type == pa.timestamp("us", tz="UTC")
    assert ddl_type(("map", "string", "string")) == "MAP<STRING, STRING>"
    assert set(protocol_columns()) == {"kafka", "zookeeper", "pulsar", "rocketmq"}


def test_json_map_is_json_dumps_per_value() -> None:
    d = {"s": 'q"\u00e9\n', "i": -3, "b": True, "n": None, "l": [1, {"x": b"ab"}], "f": 1.5, "big": 1 << 70}
    assert json_map(d) == [(k, json_text(v)) for k, v in d.items()]
    assert [json.loads(v) for _, v in json_map(d)][:4] == ['q"\u00e9\n', -3, True, None]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


@given(st.one_of(JSON_VALUES, st.from_regex(r"\s*-*[0-9\u00b2\u0660-\u0669]{1,30}\s*", fullmatch=True)))
def test_column_coercion_never_raises(v: object) -> None:
    for name, conv in COERCE.items():
        out = conv(v)
        assert out is None or isinstance(out, {"int": int, "bigint": int, "string": str, "double": float,
                                               "boolean": bool}[name])


def test_text_that_int_refuses_is_no_integer_column() -> None:
    """A RocketMQ ext-field is text: one that only looks like a number projects to null."""
    from kdissect.rocketmq import encode as enc
    from kdissect.rocketmq.dissector import DISSECTOR

    for text, want in (("--5", None), ("\u00b2", None), ("9" * 5000, None), (" 12 ", 12), ("-3", -3)):
        data = enc.frame(11, opaque=7, ext={"topic": "orders", "queueId": text})
        msg = Message(Pdu(data, [1], 0.0, 0.0, True), 0, "c:1", "s:10911", "rocketmq")
        run_dissector(DISSECTOR, msg, DISSECTOR.new_state(), Options())
        assert rows.message_row(msg)["rocketmq"]["queue_id"] == want, text


def test_java_version_parsing() -> None:
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_392"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("no version here") is None


def test_parse_size_and_conf() -> None:
    from kdissect.commands.spark import parse_conf, parse_size

    assert parse_size("64M") == 64 << 20 and parse_size("1g") == 1 << 30 and parse_size("4096") == 4096
    for bad in ("lots", "9" * 5000 + "M"):
        with pytest.raises(UsageError):
            parse_size(bad)
    assert parse_conf(("spark.a=1", "b=x=y")) == {"spark.a": "1", "b": "x=y"}
    with pytest.raises(UsageError):
        parse_conf(("novalue",))


def test_decrypted_messages_carry_their_tls_column_into_arrow() -> None:
    pytest.importorskip("pyarrow")
    from kdissect.spark.rows import combined_values
    from kdissect.spark.worker import batches

    path = CAPTURES / "tls" / "kafka_tls12_cbc_etm.pcap"
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    msgs = list(dissect_file(str(path), registry, Options(tls_keylog=sidecar_keylog(path))))
    tls = [rows.message_row(m)["tls"] for m in msgs]
    assert {"version": "TLS 1.2", "cipher": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "sni": None} in tls
    assert None in tls  # the clear leg of the same traffic
    table = [b for b in batches((combined_values(m) for m in msgs), combined_columns())]
    values = [v for b in table for v in b.column("tls").to_pylist()]
    assert values == tls


@pytest.mark.parametrize(("name", "value"), [("max_decompressed", str(1 << 63)), ("max_decompressed", "100"),
                                             ("max_bytes", "-1"), ("max_decompressed", "lots")])
def test_the_data_sources_integer_options_are_checked(name: str, value: str) -> None:
    """An option out of its range is a one-line usage error before any task runs (2**63 as
    max_decompressed overflowed the codecs, as --max-decompressed did)."""
    pytest.importorskip("pyspark.sql.datasource")
    from kdissect.errors import UsageError
    from kdissect.spark.datasource import config

    with pytest.raises(UsageError, match=f"option {name} takes an integer from"):
        config({name: value})
    assert config({"max_decompressed": "2048", "max_bytes": "0"}).max_decompressed == 2048


def test_a_batch_holds_a_bounded_number_of_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch ends at the row whose records reach BATCH_RECORDS: a message may carry 100,000
    records of a few bytes (8 MB of Pulsar batch entries of 4 bytes took 2.3 GB in one batch of
    40 rows); the rows and their records are the same."""
    pytest.importorskip("pyarrow")
    from kdissect.spark import worker
    from kdissect.spark.rows import combined_values

    monkeypatch.setattr(worker, "BATCH_RECORDS", 4)
    path = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
    msgs = list(dissect_file(str(path), DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))))
    rows_ = [combined_values(m) for m in msgs]
    counts = [len(r[-2]) for r in rows_]  # (the records, then the transaction)
    assert sum(counts) > 12 and max(counts) <= 4
    got = list(worker.batches(iter(rows_), combined_columns()))
    assert sum(b.num_rows for b in got) == len(rows_)
    held = [sum(len(x) for x in b.column("_records").to_pylist()) for b in got]
    assert len(got) > 3 and all(n < 4 + max(counts) for n in held)  # the row reaching 4 ends its batch
    assert sum(held) == sum(counts)


def test_times_no_column_holds_are_nulls(tmp_path: Path) -> None:
    """A pcapng file's 64-bit timestamps reach far past what Spark's columns hold: a message of
    the year 3000 has no nanosecond time (BIGINT), one of the year 300,000 no TIMESTAMP and no
    DATE either (Spark's years end at 9999); `ts` keeps the seconds."""
    pa = pytest.importorskip("pyarrow")
    from pcapgen import (
        TcpConn,
        ethernet,
        kafka_request,
        kafka_response,
        pcapng_epb,
        pcapng_idb,
        pcapng_section,
    )

    from kdissect.spark.worker import Config, combined

    year_3000, far = 32_503_680_000.0, 9.5e12
    conn = TcpConn()
    body = pcapng_section() + pcapng_idb(1)
    for ts in (year_3000, far):
        packets = [*conn.handshake(), conn.segment(True, kafka_request(18, 0, 1)), conn.segment(False, kafka_response(1))]
        body += b"".join(pcapng_epb(0, ts + i * 1e-3, ethernet(p)) for i, p in enumerate(packets))
        conn = TcpConn(cport=conn.cport + 1)
    path = tmp_path / "far.pcapng"
    path.write_bytes(body)
    table = pa.Table.from_batches(list(combined([(Piece(str(path), len(body)), None)], Config())))
    got = [(r["ts"] // 1e6, r["ts_ns"], r["ts_us"], r["time"], r["date"], r["_transaction"] and r["_transaction"]["time"])
           for r in table.to_pylist()]
    assert [g[0] for g in got] == [year_3000 // 1e6] * 2 + [far // 1e6] * 2
    assert all(g[1] is None for g in got)  # past 2262
    assert got[0][2] is not None and got[0][4] == datetime.date(3000, 1, 1) and got[1][5] is not None
    assert all(g[2:] == (None, None, None, None) for g in got[2:])
