"""The tables' analyst columns on a real local Spark: records' exact key/value bytes, headers,
producer and sequence facts, compression and Pulsar message ids against `kdissect export` of the
same captures; transactions' status; the column types in Parquet; partition pruning. One
SparkSession for the module."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES, capture_args, shared_path, sidecar_decode_as

pytest.importorskip("pyspark")

from test_spark_job import _java_ok  # noqa: E402

from kdissect.kafka.compression import CODECS  # noqa: E402
from kdissect.spark import job, session  # noqa: E402
from kdissect.spark.worker import Config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TRANSACTIONS = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
HEALTHY = CAPTURES / "kafka" / "expert_healthy.pcap"  # requests the capture ends before answering
PULSAR = sorted((CAPTURES / "pulsar").glob("*.pcap"))
INPUTS = [TRANSACTIONS, HEALTHY, *PULSAR]


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _java_ok(), reason="no Java 17+ for Spark")]


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    s = session.start("local[2]", {"spark.sql.shuffle.partitions": "4"}, log_path=str(log), fast_start=True)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def out(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three tables of INPUTS, written once for the module."""
    decode_as = {port: proto for p in INPUTS for port, proto in sidecar_decode_as(p, p.parent.name).items()}
    d = tmp_path_factory.mktemp("tables") / "out"
    job.run(spark, job.make_plan(spark, [str(p) for p in INPUTS]), str(d), Config(decode_as=decode_as))
    return d


def export(path: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "kdissect", "export", str(path), "-F", "jsonl", *capture_args(path)],
                          capture_output=True, text=True, check=True, timeout=120)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def table(spark: Any, out: Path, name: str, capture: Path) -> list[dict[str, Any]]:
    df = spark.read.parquet(str(out / name)).where(f"capture = '{capture}'")
    return [r.asDict(recursive=True) for r in df.collect()]


def b64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


# -- records against the export -------------------------------------------------------------

def kafka_batches(node: Any) -> Iterator[dict[str, Any]]:
    """The v2 record batches of an export's fields object."""
    if isinstance(node, dict):
        if "base_sequence" in node and isinstance(node.get("records"), list):
            yield node
            return
        for v in node.values():
            yield from kafka_batches(v)
    elif isinstance(node, list):
        for v in node:
            yield from kafka_batches(v)


def test_kafka_records_equal_the_export(spark: Any, out: Path) -> None:
    want = []
    for m in export(TRANSACTIONS):
        for batch in kafka_batches(m["fields"]):
            seq = batch["base_sequence"]
            for r in batch["records"]:
                ms = r["timestamp"] if r["timestamp"] > 0 else None  # a control record's 0: no time
                want.append((m["frame"], b64(r["key"]), b64(r["value"]),
                             {h["key"]: b64(h["value"]) for h in r["headers"]}, ms,
                             batch["producer_id"], batch["producer_epoch"], seq,
                             seq + r["offset_delta"] if seq >= 0 else None, CODECS[batch["attributes"] & 7]))
    got = [(r["frame"], r["key"], r["value"], r["headers"], r["timestamp_ms"], r["producer_id"],
            r["producer_epoch"], r["base_sequence"], r["sequence"], r["compression"])
           for r in sorted(table(spark, out, "records", TRANSACTIONS), key=lambda r: (r["frame"], r["index"]))]
    got = [(f, k and bytes(k), v and bytes(v), {a: b and bytes(b) for a, b in h.items()}, *rest)
           for f, k, v, h, *rest in got]
    assert len(want) == 17 and sorted(got, key=repr) == sorted(want, key=repr)
    assert any(h == {"txn": b"commit"} for _, _, _, h, *_ in got)
    assert {p for *_, p, _e, _b, _s, _c in got} == {755285000}


def test_record_text_and_time_columns(spark: Any, out: Path) -> None:
    recs = table(spark, out, "records", TRANSACTIONS)
    for r in recs:
        assert r["value_text"] == (None if r["value"] is None else bytes(r["value"]).decode())
        assert r["key_text"] == (None if r["key"] is None else bytes(r["key"]).decode())
    df = spark.read.parquet(str(out / "records"))
    assert df.where("timestamp IS NOT NULL").count() > 0
    assert df.where("unix_millis(timestamp) <=> timestamp_ms").count() == df.count()
    assert {r["value_text"] for r in recs} >= {"committed-0", "second topic, same transaction"}


def test_pulsar_message_ids_and_codecs_equal_the_export(spark: Any, out: Path) -> None:
    path = CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap"
    want = []
    for m in export(path):
        f = m["fields"]
        if m["info"].get("op") != "MESSAGE" or "messages" not in f:
            continue
        mid = f["message"]["message_id"]
        codec = f["metadata"].get("compression_name")
        want += [(m["frame"], mid["ledger_id"], mid["entry_id"], e["index"], codec and codec.lower(),
                  b64(e["payload"])) for e in f["messages"]]
    got = [(r["frame"], r["ledger_id"], r["entry_id"], r["batch_index"], r["compression"], bytes(r["value"]))
           for r in table(spark, out, "records", path) if r["op"] == "MESSAGE"]
    assert len(want) == 20 and sorted(got) == sorted(want)
    assert {c for *_, c, _ in got} == {None, "lz4", "zlib", "zstd", "snappy"}


# -- transactions -----------------------------------------------------------------------------

def expected_status(path: Path) -> Counter[str]:
    c: Counter[str] = Counter()
    for m in export(path):
        if m["kind"] == "response":
            c["answered" if m["match"] else "no-request"] += 1
        elif m["kind"] == "request" and not m["match"]:
            c["unanswered"] += 1
    return c


@pytest.mark.parametrize("path", [TRANSACTIONS, HEALTHY, *PULSAR], ids=lambda p: p.name)
def test_transaction_status_counts(spark: Any, out: Path, path: Path) -> None:
    rows = table(spark, out, "transactions", path)
    assert Counter(r["status"] for r in rows) == expected_status(path)
    for r in rows:
        answered = r["status"] == "answered"
        assert (r["response_frame"] is not None) == (r["status"] != "unanswered")
        assert (r["rtt_ms"] is not None) == answered


def test_transaction_times(spark: Any, out: Path) -> None:
    df = spark.read.parquet(str(out / "transactions"))
    for side in ("request", "response"):
        assert df.where(f"unix_micros({side}_time) <=> CAST(round({side}_ts * 1e6) AS BIGINT)").count() == df.count()


def test_unanswered_requests_are_rows(spark: Any, out: Path) -> None:
    rows = [r for r in table(spark, out, "transactions", HEALTHY) if r["status"] == "unanswered"]
    assert len(rows) == 3 and all(r["expects_response"] for r in rows)
    assert all(r["response_ts"] is None and r["response_time"] is None and r["error"] is None for r in rows)


def test_responses_without_their_request(spark: Any) -> None:
    path = shared_path("captures", "zookeeper", "twitter__zktraffic__fire_watches.pcap")
    df = spark.read.format("kdissect").option("layer", "transactions").load(str(path))
    got = Counter(r["status"] for r in df.collect())
    assert got == expected_status(path) and got["no-request"] == 6


# -- types and pruning ------------------------------------------------------------------------

def test_types_in_parquet(spark: Any, out: Path) -> None:
    import pyarrow.parquet as pq

    types = {n: spark.read.parquet(str(out / n)).schema for n in job.TABLES}
    rec = {f.name: f.dataType.simpleString() for f in types["records"].fields}
    assert (rec["key"], rec["value"], rec["headers"], rec["timestamp"], rec["date"]) == \
        ("binary", "binary", "map<string,binary>", "timestamp", "date")
    assert (rec["producer_id"], rec["sequence"], rec["ledger_id"], rec["batch_index"]) == \
        ("bigint", "bigint", "bigint", "int")
    tx = {f.name: f.dataType.simpleString() for f in types["transactions"].fields}
    assert (tx["status"], tx["request_time"], tx["response_time"], tx["date"]) == \
        ("string", "timestamp", "timestamp", "date")
    assert {f.name: f.dataType.simpleString() for f in types["messages"].fields}["date"] == "date"
    part = next((out / "records").rglob("*.parquet"))
    schema = pq.read_schema(part)
    assert str(schema.field("value").type) == "binary" and "timestamp" in str(schema.field("timestamp").type)


def plan_of(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_parquet_partitions_are_pruned(spark: Any, out: Path) -> None:
    day = spark.read.parquet(str(out / "records")).where("protocol = 'pulsar'").select("date").first()[0]
    df = spark.read.parquet(str(out / "records")).where(f"protocol = 'pulsar' AND date = DATE'{day}'")
    plan = plan_of(df)
    assert "PartitionFilters: [" in plan and "(protocol#" in plan and "(date#" in plan
    assert df.count() == spark.read.parquet(str(out / "records")).where("protocol = 'pulsar'").count() > 0


def test_data_source_takes_partition_filters(spark: Any, out: Path) -> None:
    paths = [str(p) for p in PULSAR]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = spark.read.format("kdissect").option("layer", "transactions").option("pushdown", "true") \
            .load(paths).where("protocol = 'pulsar' AND date >= DATE'2020-01-01' AND op = 'SEND'")
        plan = plan_of(df)
        n = df.count()
        none = spark.read.format("kdissect").option("pushdown", "true").load(paths) \
            .where("protocol = 'kafka'").count()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    want = sum(1 for p in PULSAR for r in table(spark, out, "transactions", p) if r["op"] == "SEND")
    assert n == want > 0 and none == 0
    assert "protocol" in plan and "op" in plan  # Spark still evaluates the condition on op
    plain = spark.read.format("kdissect").option("layer", "transactions").load(paths)
    assert plain.where("protocol = 'pulsar' AND op = 'SEND'").count() == want


def test_pushdown_reader_keeps_partition_conditions() -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In

    from kdissect.spark.datasource import PushdownReader
    from kdissect.spark.schema import layer_columns

    reader = PushdownReader({"path": str(TRANSACTIONS)})
    day = datetime.date(2026, 11, 22)
    op = EqualTo(("op",), "SEND")
    left = list(reader.pushFilters([In(("protocol",), ("pulsar", "kafka")), GreaterThanOrEqual(("date",), day), op]))
    assert left == [op]
    keep = reader.keep()
    assert keep is not None
    names = [name for name, _ in layer_columns("messages")]

    def row(protocol: str, date: datetime.date) -> tuple[Any, ...]:  # a messages row: its values in column order
        return tuple({"protocol": protocol, "date": date}.get(name) for name in names)
    assert keep(row("kafka", day)) and not keep(row("zookeeper", day))
    assert not keep(row("kafka", datetime.date(2026, 11, 21)))
