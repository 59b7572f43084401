"""kdissect on a real local Spark: the job's tables equal the single-process decoding (also when
captures are shared between tasks by flow hash, and when Spark reads the bytes), the data
source, SQL, and the command. One SparkSession for the module."""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import SHARED_CAPTURES, shared_path

pytest.importorskip("pyspark")

from kdissect.errors import UsageError  # noqa: E402
from kdissect.pipeline import dissect_file  # noqa: E402
from kdissect.protocols import DissectorRegistry  # noqa: E402
from kdissect.spark import job, rows, session  # noqa: E402
from kdissect.spark.schema import layer_ddl  # noqa: E402
from kdissect.spark.worker import Config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHARED = SHARED_CAPTURES
PROJECT = REPO / "captures"


def _java_ok() -> bool:
    try:
        session.check_java()
    except UsageError:
        return False
    return True


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _java_ok(), reason="no Java 17+ for Spark")]


def inputs() -> list[str]:
    dirs = [str(d) for d in (SHARED, PROJECT) if d.is_dir() and glob.glob(str(d / "**" / "*.pcap*"), recursive=True)]
    if not dirs:
        pytest.skip("no captures (../shared/captures, captures/)")
    return dirs


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Spark's automatic data source lookup lists the Python path of its workers: the repository
    # root makes `pyspark_kdissect` visible even with an editable install.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    s = session.start("local[2]", {"spark.sql.shuffle.partitions": "4"}, log_path=str(log), fast_start=True)
    yield s
    s.stop()


# -- expected rows: the single-process pipeline ------------------------------------------

MAP_COLUMNS = ("info", "headers")  # rows give map entries as (key, value) lists, Spark as dicts


def _norm(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):  # rows give bytes, Spark bytearray
        return bytes(v).hex()
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


# Timestamps: rows give microseconds, Spark datetimes; the seconds and milliseconds they come
# from are compared.
TIMESTAMPS = ("time", "request_time", "response_time", "timestamp")


def _canon(row: dict[str, Any], drop: tuple[str, ...] = TIMESTAMPS) -> str:
    r = {k: _norm(dict(v)) if k in MAP_COLUMNS and isinstance(v, list) else _norm(v)
         for k, v in row.items() if k not in drop}
    if "date" in r:
        r["date"] = str(r["date"])
    for d in r.get("diagnostics") or []:
        d.setdefault("offset", None)
    return json.dumps(r, sort_keys=True, default=str)


def expected(files: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"messages": [], "transactions": [], "records": []}
    for path in files:
        for m in dissect_file(path, DissectorRegistry()):
            m.capture = path
            out["messages"].append(_canon(rows.message_row(m)))
            t = rows.transaction_row(m)
            if t is not None:
                out["transactions"].append(_canon(t))
            out["records"] += [_canon(r) for r in rows.record_rows(m)]
    return {k: sorted(v) for k, v in out.items()}


def written(spark: Any, out: Path, fmt: str = "parquet") -> dict[str, list[str]]:
    got = {}
    for name in job.TABLES:
        reader = spark.read.format(fmt).option("basePath", str(out / name))
        if fmt == "json":  # JSON has no schema of its own: maps would come back as structs
            reader = reader.schema(layer_ddl(name))
        df = reader.load(str(out / name))
        got[name] = sorted(_canon(r.asDict(recursive=True)) for r in df.collect())
    return got


@pytest.fixture(scope="module")
def baseline(spark: Any) -> tuple[job.Plan, dict[str, list[str]]]:
    p = job.make_plan(spark, inputs())
    return p, expected([f for f, _ in p.files])


# -- the job ------------------------------------------------------------------------------

@pytest.mark.parametrize("spark_io", [False, True], ids=["ranges", "blocks"])
def test_tables_equal_single_process_when_captures_are_read_by_parts(spark: Any, baseline: Any,
                                                                     tmp_path: Path, spark_io: bool) -> None:
    """Every capture over 8 KiB is cut into byte ranges, or into the blocks of Spark's file
    source (spark_io), many of them inside records: stream numbers, frame numbers and every
    value still equal the single-process run."""
    p0, want = baseline
    p = job.make_plan(spark, inputs(), split=8 * 1024)
    assert len(p.ranged) >= 5 and sum(len(c.ranges) for c in p.ranged) >= 4 * len(p.ranged)
    result = job.run(spark, p, str(tmp_path), Config(), spark_io=spark_io)
    assert result.counts == {k: len(v) for k, v in want.items()}
    assert written(spark, tmp_path) == want
    assert {d.name for d in (tmp_path / "messages").iterdir() if d.is_dir()} >= {"protocol=kafka", "protocol=zookeeper"}
    size = sum(c.size for c in p.ranged)
    assert size <= p.ranges_read  # the tasks' own count of what they read
    if spark_io:  # the files once, a newline each at most, and the heads the driver read
        assert p.ranges_read <= size + len(p.ranged) + sum(c.head_read for c in p.ranged)


@pytest.mark.parametrize("spark_io", [False, True], ids=["local", "text-source"])
def test_gzip_captures_are_read_once_and_decoded_by_conversation(spark: Any, tmp_path: Path, spark_io: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A big gzip capture is read from start to end by one task (through Spark's text source,
    which inflates it, when spark_io), and its conversations are decoded by the shuffle's
    groups: the tables equal the single process's, and each file is read once. One that is
    cut short is read to the cut, by the text source too, and then read whole."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("kafka/expert_consumer_lag", "kafka/expert_kip848_rebalance", "tls/kafka_tls13_aes128gcm"):
        (src / f"{Path(name).name}.pcap.gz").write_bytes(gzip.compress((PROJECT / f"{name}.pcap").read_bytes()))
    blob = gzip.compress((PROJECT / "kafka" / "expert_healthy.pcap").read_bytes())
    (src / "cut.pcap.gz").write_bytes(blob[:len(blob) * 2 // 3])
    p = job.make_plan(spark, [str(src)], split=8 * 1024)
    assert len(p.ranged) == 4 and all(c.streamed for c in p.ranged)
    whole: list[Any] = []

    def decode_ranges(*args: Any, **kwargs: Any) -> Any:
        out = decode_ranges_(*args, **kwargs)
        whole.extend(out.whole)
        return out
    decode_ranges_ = job.decode_ranges
    monkeypatch.setattr(job, "decode_ranges", decode_ranges)
    result = job.run(spark, p, str(tmp_path / "out"), Config(), spark_io=spark_io)
    assert [Path(c.path).name for c in whole] == (["cut.pcap.gz"] if spark_io else [])
    want = expected([f for f, _ in p.files])
    assert result.counts == {k: len(v) for k, v in want.items()}
    assert written(spark, tmp_path / "out") == want
    size = sum(c.size for c in p.ranged)
    assert size <= p.ranges_read <= size + sum(c.head_read for c in p.ranged)


def test_the_driver_reads_heads_through_hadoop(spark: Any) -> None:
    """A capture on another file system is planned from its head, read through Hadoop's client."""
    from kdissect.spark import split
    from kdissect.spark.inputs import hadoop_head

    path = str(PROJECT / "kafka" / "mock_ck_transactions.pcap")
    blob = Path(path).read_bytes()
    head = hadoop_head(spark, f"file://{path}")
    assert head(0, 24) == blob[:24] and head(100, 50) == blob[100:150] and head(len(blob) - 3, 10) == blob[-3:]
    remote = split.capture(f"file://{path}", len(blob), 8 * 1024, head, blocks=True)
    local = split.capture(path, len(blob), 8 * 1024)
    assert remote is not None and local is not None
    assert (remote.layout, remote.ranges, remote.head_read) == (local.layout, local.ranges, local.head_read)
    with pytest.raises(UsageError, match="no such file"):
        hadoop_head(spark, f"file://{path}.missing")(0, 10)


def test_spark_io_reads_the_same(spark: Any, tmp_path: Path) -> None:
    dirs = [d for d in (SHARED / "pulsar", SHARED / "rocketmq") if d.is_dir()]
    if not dirs:
        pytest.skip("../shared/captures is absent")
    p = job.make_plan(spark, [str(d) for d in dirs], split=16 * 1024, max_shares=2)
    job.run(spark, p, str(tmp_path), Config(), fmt="json", spark_io=True)
    assert written(spark, tmp_path, "json")["messages"] == expected([f for f, _ in p.files])["messages"]


def test_sql_over_the_tables(spark: Any, baseline: Any, tmp_path: Path) -> None:
    from kdissect.spark import report

    p, want = baseline
    job.run(spark, p, str(tmp_path), Config())
    tables = {t.title: t for t in report.run(spark)}
    per_api = tables["Per protocol and API"]
    row = next(r for r in per_api.rows if r[:2] == ("pulsar", "SEND"))
    sends = [json.loads(x) for x in want["messages"]]
    n_send = sum(1 for m in sends if m["protocol"] == "pulsar" and m["op"] == "SEND")
    n_tx = sum(1 for t in map(json.loads, want["transactions"])
               if t["protocol"] == "pulsar" and t["op"] == "SEND" and t["status"] == "answered")
    assert row[per_api.columns.index("messages")] == n_send and row[per_api.columns.index("transactions")] == n_tx
    topics = tables["Top topics by bytes"]
    assert topics.rows and all(r[topics.columns.index("records")] > 0 for r in topics.rows)
    n = spark.sql("SELECT count(*) FROM messages WHERE kafka.api_key = 0 AND kind = 'request'").first()[0]
    assert n == sum(1 for m in sends if m["op"] == "Produce" and m["kind"] == "request") > 0


# -- the data source ------------------------------------------------------------------------

def test_data_source_found_by_spark(spark: Any, baseline: Any) -> None:
    p, want = baseline
    kafka = str(shared_path("captures", "kafka"))
    for layer in ("messages", "transactions", "records"):
        df = spark.read.format("kdissect").option("layer", layer).load(inputs())
        assert df.count() == len(want[layer]), layer
    produce = "kafka.header.api_key == 0"
    from kdissect.filter import compile_filter

    keep = compile_filter(produce)
    n = sum(1 for f, _ in p.files for m in dissect_file(f, DissectorRegistry()) if keep(m))
    assert spark.read.format("kdissect").option("filter", produce).load(inputs()).count() == n > 0
    recs = spark.read.format("kdissect").option("layer", "records").option("split_size", "32768") \
        .option("max_shares", "2").load(kafka)
    assert recs.where("topic = 'basic' AND key_text = 'key-6'").count() >= 1


def test_data_source_in_sql(spark: Any) -> None:
    zk = shared_path("captures", "zookeeper")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW zk USING kdissect OPTIONS (path '{zk}', layer 'transactions')")
    ops = {r["op"]: r["n"] for r in spark.sql("SELECT op, count(*) AS n FROM zk GROUP BY op").collect()}
    want = sum(1 for f in sorted(glob.glob(str(zk / "*.pcap"))) for m in dissect_file(f) if rows.transaction_row(m))
    assert sum(ops.values()) == want and ops["create"] > 0


# -- the command ----------------------------------------------------------------------------

def test_command_writes_tables_and_reports(spark: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kdissect.cli import cli

    pulsar = shared_path("captures", "pulsar")
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["spark", str(pulsar), "--out", str(out), "--master", "local[2]",
                                   "--report", "--no-color", "-F", "json"])
    assert res.exit_code == 0, res.output
    assert "124 messages, 60 transactions, 38 records from 4 captures" in res.output
    assert "Per protocol and API" in res.output and "persistent://public/default/py-topic" in res.output
    assert list((out / "records" / "protocol=pulsar").iterdir())
    again = CliRunner().invoke(cli, ["spark", str(pulsar), "--out", str(out)])
    assert again.exit_code != 0 and "already exists" in str(again.exception)


def test_command_bad_capture_is_one_clear_error(spark: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kdissect.cli import cli

    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture\n")
    res = CliRunner().invoke(cli, ["spark", str(bad), "--out", str(tmp_path / "out")])
    assert isinstance(res.exception, UsageError)
    assert "not a pcap or pcapng capture" in str(res.exception)


def test_missing_java_is_exit_2_and_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "nojava")}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    proc = subprocess.run([sys.executable, "-m", "kdissect", "spark", str(tmp_path), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java 17" in lines[0] and "openjdk-17-jre-headless" in lines[0]


def test_spark_schema_is_what_spark_reads_in_the_ddl(spark: Any) -> None:
    """The StructTypes given to Spark (sqltypes.spark_schema) are the types of their DDL text,
    as Spark's SQL parser reads it: names, types, nullability, in every column set."""
    from pyspark.sql.types import _parse_datatype_string

    from kdissect.spark import split, tablefiles
    from kdissect.spark.schema import LAYERS, combined_columns, layer_columns
    from kdissect.spark.sqltypes import PRIMITIVES, ddl, spark_schema

    sets = [layer_columns(layer) for layer in LAYERS] + [
        combined_columns(), split.PACKET_COLUMNS, split.WORK_COLUMNS, split.LEARNED_COLUMNS,
        split.GROUPED_COLUMNS, split.OFFSET_COLUMNS, tablefiles.COUNT_COLUMNS, job.UNIT_COLUMNS,
        tuple((f"c{i}", t) for i, t in enumerate(PRIMITIVES)),
    ]
    for cols in sets:
        assert spark_schema(cols) == _parse_datatype_string(ddl(cols)), ddl(cols)
