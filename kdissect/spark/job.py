"""The Spark job behind `kdissect spark`: captures in, three tables out.

The driver lists the inputs (sizes only: it reads no capture) and plans units of work; each
task decodes its unit and returns combined rows (a message, its records, its transaction) as
Arrow batches; the result is kept on the executors' disks (DISK_ONLY: memory-bound caching of
wide nested rows runs the JVM out of heap on big inputs) and written as the `messages`,
`transactions` and `records` tables, partitioned by protocol and date.

Local captures are opened by the tasks themselves (one task per unit: a Spark range with one
element per partition carries the unit's number). Captures on other file systems are read by
Spark's binaryFile source, so that the cluster's Hadoop configuration (credentials, endpoints)
applies; a shared big capture is read once per share.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kdissect.spark.inputs import FileList, hadoop_files
from kdissect.spark.schema import PARTITION_COLUMNS, combined_columns
from kdissect.spark.sqltypes import ddl
from kdissect.spark.units import Piece, Unit, plan
from kdissect.spark.worker import Config, combined, local_path

TABLES = ("messages", "transactions", "records")


@dataclass(slots=True)
class Plan:
    files: FileList
    units: list[Unit]

    @property
    def bytes(self) -> int:
        return sum(s for _, s in self.files)


@dataclass(slots=True)
class Result:
    plan: Plan
    counts: dict[str, int]
    frames: dict[str, Any]  # table name -> DataFrame (cached)


def make_plan(spark: Any, inputs: list[str] | tuple[str, ...], split: int | None = None,
              max_shares: int | None = None) -> Plan:
    files = hadoop_files(spark, inputs)
    parallelism = spark.sparkContext.defaultParallelism
    return Plan(files, plan(files, parallelism, split, max_shares))


def _local_task(units: list[Unit], cfg: Config) -> Any:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            for uid in b.column(0).to_pylist():
                yield from combined(((p, None) for p in units[uid]), cfg)
    return task


def _content_task(cfg: Config) -> Any:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            cols = b.to_pydict()
            for path, content, share, shares in zip(cols["path"], cols["content"], cols["share"],
                                                    cols["shares"], strict=True):
                piece = Piece(_plain(path), len(content), share, shares)
                yield from combined([(piece, content)], cfg)
    return task


def _plain(uri: str) -> str:
    return uri[5:] if uri.startswith("file:/") else uri


def decoded(spark: Any, p: Plan, cfg: Config, spark_io: bool = False) -> Any:
    """The combined DataFrame of a plan (lazy). spark_io: read even local captures through
    Spark's binaryFile source (what happens to captures on other file systems)."""
    schema = ddl(combined_columns())
    if not spark_io and all(local_path(piece.path) is not None for u in p.units for piece in u):
        n = len(p.units)
        return spark.range(0, n, 1, n).mapInArrow(_local_task(p.units, cfg), schema)
    return _binary_input(spark, p).mapInArrow(_content_task(cfg), schema)


def _binary_input(spark: Any, p: Plan) -> Any:
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1")  # one capture per batch
    whole = [piece.path for u in p.units for piece in u if piece.shares == 1]
    parts = []
    if whole:
        parts.append(spark.read.format("binaryFile").load(whole)
                     .select("path", "content", F.lit(0).alias("share"), F.lit(1).alias("shares")))
    for u in p.units:
        for piece in u:
            if piece.shares > 1:
                parts.append(spark.read.format("binaryFile").load(piece.path).select(
                    "path", "content", F.lit(piece.share).alias("share"), F.lit(piece.shares).alias("shares")))
    df = parts[0]
    for more in parts[1:]:
        df = df.unionByName(more)
    return df


def tables(df: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    return {
        "messages": df.drop("_records", "_transaction"),
        "transactions": df.where(F.col("_transaction").isNotNull()).select("_transaction.*"),
        "records": df.select(F.explode("_records").alias("r")).select("r.*"),
    }


def run(spark: Any, p: Plan, out: str, cfg: Config, fmt: str = "parquet", overwrite: bool = False,
        spark_io: bool = False) -> Result:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    df = decoded(spark, p, cfg, spark_io).persist(StorageLevel.DISK_ONLY)
    frames = tables(df)
    mode = "overwrite" if overwrite else "errorifexists"
    for name in TABLES:
        (frames[name].write.mode(mode).partitionBy(*PARTITION_COLUMNS).format(fmt)
         .save(f"{out.rstrip('/')}/{name}"))
    row = df.agg(F.count(F.lit(1)).alias("messages"), F.count("_transaction").alias("transactions"),
                 F.sum(F.size("_records")).alias("records")).first()
    counts = {name: int(row[name] or 0) for name in TABLES}
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    return Result(p, counts, frames)
