"""The Spark job behind `kdissect spark`: captures in, three tables out.

The driver lists the inputs (sizes only: of the captures it reads only the heads of big ones)
and plans units of work: small captures packed together, big ones read by parts (split.py).
Each task decodes its unit into combined rows (a message, its records, its transaction) as
Arrow batches. When every task can write the output directory (a local one) and the format is
Parquet, the tasks write the `messages`, `transactions` and `records` tables themselves,
partitioned by protocol and date as Spark would (tablefiles.py), and return their row counts.
Otherwise they return the batches, which are kept on the executors' disks (DISK_ONLY:
memory-bound caching of wide nested rows runs the JVM out of heap on big inputs) and written by
Spark.

The tables are written into a new sibling of the output directory, `OUT.kdissect-tmp-<random>`,
which becomes OUT only once all three are written (an OUT there before is replaced only then);
a failed or interrupted job removes it, so that OUT is either complete or untouched.

The plan reaches the tasks as data: a DataFrame with one row per unit (its pieces) in a
partition of its own. Local captures are opened by the tasks themselves. Captures on other file
systems are read through Spark's sources, so that the cluster's Hadoop configuration
(credentials, endpoints) applies: a big one in the blocks of its text source (split.py; a gzip
one named .gz inflated by it, in one block), a small one by binaryFile (as is a big one that
neither can read: shared by flow hash and read once per share).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kdissect.errors import KdissectError, UsageError
from kdissect.spark.inputs import FileList, driver_path, hadoop_files, hadoop_head
from kdissect.spark.progress import Counters, Progress
from kdissect.spark.schema import (
    LAYERS,
    PARTITION_COLUMNS,
    RECORD_MESSAGE_COLUMNS,
    combined_columns,
    layer_schema,
)
from kdissect.spark.session import cancel_on_interrupt, hadoop_errors
from kdissect.spark.split import Capture, capture, decode_ranges
from kdissect.spark.sqltypes import Columns, array, spark_schema, struct
from kdissect.spark.tablefiles import Writing
from kdissect.spark.units import Piece, Unit, plan, split_size
from kdissect.spark.worker import Config, combined, local_path

TABLES = LAYERS
STAGING = ".kdissect-tmp-"
ASIDE = ".kdissect-old-"
SETTLE_SECONDS = 10.0


@dataclass(slots=True)
class Plan:
    """The inputs: small captures packed into units, big ones read by byte ranges (`ranged`),
    and, once decoded, the bytes the ranges read (`ranges_read`, heads included) and the data
    Spark keeps for them until the tables are written (`cached`)."""

    files: FileList
    units: list[Unit]
    ranged: list[Capture] = field(default_factory=list)
    ranges_read: int = 0
    cached: list[Any] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(s for _, s in self.files)

    @property
    def tasks(self) -> int:
        return len(self.units) + sum(len(c.ranges) for c in self.ranged)


@dataclass(slots=True)
class Result:
    plan: Plan
    counts: dict[str, int]
    frames: dict[str, Any]  # table name -> DataFrame (cached)


def make_plan(spark: Any, inputs: list[str] | tuple[str, ...], split: int | None = None,
              max_shares: int | None = None) -> Plan:
    """A capture larger than the split size is read by parts (split.py): by byte ranges when
    it is local, else in the blocks of Spark's file source; streamed, as one part, when it
    cannot be cut (gzip); otherwise (on another file system, neither cut nor inflated by the
    file source) by flow-hash shares, each reading the whole file."""
    files = hadoop_files(spark, inputs)
    parallelism = spark.sparkContext.defaultParallelism
    size = split_size(sum(s for _, s in files), parallelism, split)
    ranged: list[Capture] = []
    rest: FileList = []
    for path, n in files:
        local = local_path(path)
        c = None
        if n > size:
            c = capture(local, n, size) if local is not None else \
                capture(path, n, size, hadoop_head(spark, path), blocks=True)
        if c is not None:
            ranged.append(c)
        else:
            rest.append((path, n))
    # The ranges' conversations are decoded by max(ranges, parallelism) tasks of the same stage.
    grouped = max(parallelism, sum(len(c.ranges) for c in ranged)) if ranged else 0
    return Plan(files, plan(rest, parallelism, size, max_shares, grouped), ranged)


def _counted(batches: Iterable[Any], pieces: Iterable[Piece], counters: Counters | None) -> Iterable[Any]:
    return batches if counters is None else counters.counted(batches, pieces)


# The work of local units, as data: one row per unit.
UNIT_COLUMNS: Columns = (("pieces", array(struct((("path", "string"), ("size", "bigint"), ("share", "int"),
                                                   ("shares", "int"))))),)


def _unit_rows(units: list[Unit]) -> list[tuple[Any, ...]]:
    return [([(p.path, p.size, p.share, p.shares) for p in u],) for u in units]


def _local_task(cfg: Config, counters: Counters | None) -> Any:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            for pieces in b.column(0).to_pylist():
                unit = [Piece(**p) for p in pieces]
                yield from _counted(combined(((p, None) for p in unit), cfg), unit, counters)
    return task


def _content_task(cfg: Config, counters: Counters | None) -> Any:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            cols = b.to_pydict()
            for path, content, share, shares in zip(cols["path"], cols["content"], cols["share"],
                                                    cols["shares"], strict=True):
                piece = Piece(_plain(path), len(content), share, shares)
                yield from _counted(combined([(piece, content)], cfg), [piece], counters)
    return task


def _plain(uri: str) -> str:
    return uri[5:] if uri.startswith("file:/") else uri


def decoded(spark: Any, p: Plan, cfg: Config, spark_io: bool = False, counters: Counters | None = None,
            writing: Writing | None = None) -> Any:
    """The combined DataFrame of a plan (lazy). spark_io: read even local captures through
    Spark's binaryFile source (what happens to captures on other file systems); counters:
    what the tasks add their bytes and messages to; writing: the tasks write the tables
    themselves, and the DataFrame holds what they counted (tablefiles.COUNT_COLUMNS)."""
    schema = spark_schema(combined_columns()) if writing is None else writing.schema()

    def task(t: Any, tag: str) -> Any:
        return t if writing is None else writing.wrap(t, tag)
    frames = []
    units = list(p.units)
    if p.ranged:
        ranged = decode_ranges(spark, [c.through_spark() if spark_io else c for c in p.ranged], cfg, counters,
                               writing)
        p.ranges_read = ranged.bytes_read
        p.cached += ranged.held
        frames.append(ranged.frame)
        units += [(Piece(c.path, c.size),) for c in ranged.whole]
    if units and not spark_io and all(local_path(piece.path) is not None for u in units for piece in u):
        work = spark.createDataFrame(spark.sparkContext.parallelize(_unit_rows(units), len(units)), spark_schema(UNIT_COLUMNS))
        frames.append(work.mapInArrow(task(_local_task(cfg, counters), "unit"), schema))
    elif units:
        frames.append(_binary_input(spark, units).mapInArrow(task(_content_task(cfg, counters), "read"), schema))
    df = frames[0]
    for more in frames[1:]:
        df = df.unionByName(more)
    return df


def _binary_input(spark: Any, units: list[Unit]) -> Any:
    from pyspark.sql import functions as F

    whole = [piece.path for u in units for piece in u if piece.shares == 1]
    parts = []
    if whole:
        parts.append(spark.read.format("binaryFile").load(whole)
                     .select("path", "content", F.lit(0).alias("share"), F.lit(1).alias("shares")))
    for u in units:
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

    message = [name for name, _ in RECORD_MESSAGE_COLUMNS]
    return {
        "messages": df.drop("_records", "_transaction"),
        "transactions": df.where(F.col("_transaction").isNotNull()).select("_transaction.*"),
        "records": df.select(*message, "date", F.explode("_records").alias("r")).select(*message, "r.*", "date"),
    }


def run(spark: Any, p: Plan, out: str, cfg: Config, fmt: str = "parquet", overwrite: bool = False,
        spark_io: bool = False, progress: Progress | None = None) -> Result:
    """Decode the plan and write the three tables to `out` (staged: see the module's text); an
    `out` that is not an empty directory is an error unless `overwrite`. The tables are also
    the session's temporary views."""
    from pyspark import StorageLevel

    counters = progress.counters if progress is not None else None
    with staged(spark, out, overwrite) as tmp, cancel_on_interrupt(spark) as check:
        local = driver_path(tmp, spark.sparkContext.master) if fmt == "parquet" else None
        if local is not None:  # the tasks write the tables as they decode
            counts = dict.fromkeys(TABLES, 0)
            local = os.path.abspath(local)  # (the executors' working directories are their own)
            for table, n in decoded(spark, p, cfg, spark_io, counters, Writing(local)).collect():
                counts[table] += n
            for name in TABLES:
                os.makedirs(f"{local}/{name}", exist_ok=True)
                open(f"{local}/{name}/_SUCCESS", "wb").close()
        else:
            df = decoded(spark, p, cfg, spark_io, counters).persist(StorageLevel.DISK_ONLY)
            counts = _write(df, tmp, fmt, check, progress)
            df.unpersist()  # (the views read the tables written)
    for held in p.cached:  # the combined rows are cached themselves
        held.unpersist()
    p.cached.clear()
    frames = {name: spark.read.schema(layer_schema(name)).format(fmt).load(f"{out}/{name}") for name in TABLES}
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    return Result(p, counts, frames)


def _write(df: Any, tmp: str, fmt: str, check: Callable[[], None], progress: Progress | None) -> dict[str, int]:
    """The three tables of the combined rows, written by Spark; their row counts."""
    from pyspark.sql import functions as F

    frames = tables(df)
    for name in TABLES:
        check()
        if progress is not None:
            progress.phase = f"writing {name}"
        frames[name].write.partitionBy(*PARTITION_COLUMNS).format(fmt).save(f"{tmp}/{name}")
    check()
    if progress is not None:
        progress.phase = "counting"
    row = df.agg(F.count(F.lit(1)).alias("messages"), F.count("_transaction").alias("transactions"),
                 F.sum(F.size("_records")).alias("records")).first()
    return {name: int(row[name] or 0) for name in TABLES}


# -- the output directory -----------------------------------------------------------------

class Dirs(Protocol):
    def exists(self, path: str) -> bool: ...
    def is_empty_dir(self, path: str) -> bool: ...
    def remove(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...


class LocalDirs:
    """The driver's own file system."""

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def is_empty_dir(self, path: str) -> bool:
        return os.path.isdir(path) and not os.listdir(path)

    def remove(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)


class HadoopDirs:
    """A Hadoop file system (hdfs://, s3a://, ...), through the driver's JVM."""

    def __init__(self, spark: Any, url: str) -> None:
        self.Path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
        self.fs = self.Path(url).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self.Path(path)))

    def is_empty_dir(self, path: str) -> bool:
        p = self.Path(path)
        return bool(self.fs.getFileStatus(p).isDirectory()) and len(self.fs.listStatus(p)) == 0

    def remove(self, path: str) -> None:
        self.fs.delete(self.Path(path), True)

    def rename(self, src: str, dst: str) -> None:
        if not self.fs.rename(self.Path(src), self.Path(dst)):
            raise KdissectError(f"cannot rename {src} to {dst}")


def check_out(out: str, overwrite: bool, master: str) -> None:
    """What can be checked of the output before Spark starts (a path on the driver's file
    system): it is absent or an empty directory, or `overwrite`; it is not a root; the nearest
    existing directory above it is writable. UsageError (one line) otherwise."""
    local = driver_path(out, master)
    if local is None:
        return
    _check_target(LocalDirs(), local, out, overwrite)
    path = os.path.abspath(local)
    parent = os.path.dirname(path)
    if parent == path:
        raise UsageError(f"{out} is a file system's root: write the tables into a directory below it")
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {out}: {parent} is not writable")


def _check_target(dirs: Dirs, path: str, out: str, overwrite: bool) -> None:
    if not overwrite and dirs.exists(path) and not dirs.is_empty_dir(path):
        raise UsageError(f"{out} already exists (--overwrite replaces it)")


def _dirs(spark: Any, out: str) -> tuple[Dirs, str]:
    local = driver_path(out, spark.sparkContext.master)
    if local is not None:
        return LocalDirs(), local.rstrip("/") or "/"
    with hadoop_errors(spark, out):
        return HadoopDirs(spark, out), out.rstrip("/")


@contextlib.contextmanager
def staged(spark: Any, out: str, overwrite: bool) -> Iterator[str]:
    """A new sibling of `out` for the block to write into (given as `out` is: a path or a URL);
    it becomes `out` when the block ends (replacing what was there only then), and is removed
    when the block fails or is interrupted."""
    dirs, path = _dirs(spark, out)
    suffix = STAGING + secrets.token_hex(4)
    tag = "kdissect" + suffix
    with hadoop_errors(spark, out):
        _check_target(dirs, path, out, overwrite)
    spark.sparkContext.addJobTag(tag)
    try:
        yield out.rstrip("/") + suffix
        with hadoop_errors(spark, out):
            _publish(dirs, path + suffix, path)
    except BaseException:
        _settle(spark, tag)
        with contextlib.suppress(Exception):
            dirs.remove(path + suffix)
        raise
    finally:
        with contextlib.suppress(Exception):  # the JVM may be going away
            spark.sparkContext.removeJobTag(tag)


def _publish(dirs: Dirs, tmp: str, path: str) -> None:
    if not dirs.exists(path):
        dirs.rename(tmp, path)
        return
    aside = path + ASIDE + secrets.token_hex(4)
    dirs.rename(path, aside)
    try:
        dirs.rename(tmp, path)
    except BaseException:
        dirs.rename(aside, path)
        raise
    dirs.remove(aside)


def _settle(spark: Any, tag: str) -> None:
    """Cancel the jobs with `tag` and wait a while for running stages to end, so that no task
    writes into a directory being removed."""
    sc = spark.sparkContext
    with contextlib.suppress(Exception):  # the JVM may be going away
        sc.cancelJobsWithTag(tag)
        tracker = sc.statusTracker()
        deadline = time.monotonic() + SETTLE_SECONDS
        while tracker.getActiveStageIds() and time.monotonic() < deadline:
            time.sleep(0.1)
