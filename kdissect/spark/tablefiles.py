"""The three tables written by the tasks themselves, so that their rows never pass through the JVM.

A task's combined batches (schema.combined_columns: a message, its records, its transaction)
are split into the rows of the `messages`, `transactions` and `records` tables and written as
Parquet files in the layout Spark's own partitioned writer gives and reads back:
`<root>/<table>/protocol=<p>/date=<yyyy-mm-dd>/part-<name>.parquet`, the partition columns in
the directory names only. One file per table and partition and task, named after the task
(`name`), so that a task run again after a failure writes the same files over its first
attempt's. The task returns only how many rows it wrote (COUNT_COLUMNS). pyarrow is imported
here, never by kdissect's core.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from kdissect.spark.schema import LAYERS, PARTITION_COLUMNS, RECORD_MESSAGE_COLUMNS, layer_columns
from kdissect.spark.sqltypes import Columns, arrow_schema, spark_schema

COUNT_COLUMNS: Columns = (("table", "string"), ("rows", "bigint"))
MESSAGE_OF_RECORD = tuple(name for name, _ in RECORD_MESSAGE_COLUMNS)


def split(batch: Any) -> dict[str, Any]:
    """A combined batch as the three tables' record batches (each with its table's columns, in
    their order): the message rows; the transaction of each row that has one; a row per record,
    with its message's columns around it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    names = batch.schema.names
    messages = [batch.column(i) for i, n in enumerate(names) if n not in ("_records", "_transaction")]
    out["messages"] = pa.RecordBatch.from_arrays(messages, schema=_schema("messages"))
    tx = batch.column("_transaction")
    tx = tx.filter(pc.is_valid(tx))
    out["transactions"] = pa.RecordBatch.from_arrays(tx.flatten(), schema=_schema("transactions"))
    recs = batch.column("_records")
    parents = pc.list_parent_indices(recs)
    flat = pc.list_flatten(recs)
    record = [batch.column(n).take(parents) for n in MESSAGE_OF_RECORD]
    out["records"] = pa.RecordBatch.from_arrays([*record, *flat.flatten(), batch.column("date").take(parents)],
                                                schema=_schema("records"))
    return out


@functools.cache
def _schema(table: str) -> Any:
    return arrow_schema(layer_columns(table))


class TableFiles:
    """The Parquet files one task writes under `root` (see the module's text)."""

    def __init__(self, root: str, name: str) -> None:
        self.root = root
        self.name = name
        self.counts = dict.fromkeys(LAYERS, 0)
        self._writers: dict[tuple[Any, ...], Any] = {}

    def add(self, batch: Any) -> None:
        """One combined batch."""
        for table, rows in split(batch).items():
            if rows.num_rows:
                self._write(table, rows)
                self.counts[table] += rows.num_rows

    def _write(self, table: str, rows: Any) -> None:
        import pyarrow.compute as pc

        keys = [rows.column(name) for name in PARTITION_COLUMNS]
        data = rows.select([n for n in rows.schema.names if n not in PARTITION_COLUMNS])
        single = [k.unique() for k in keys]
        if all(len(u) == 1 for u in single):  # one partition (the common case): no masks
            self._writer(table, tuple(u[0].as_py() for u in single), data.schema).write_batch(data)
            return
        for values in sorted(set(zip(*(k.to_pylist() for k in keys), strict=True)), key=repr):
            mask = None
            for key, value in zip(keys, values, strict=True):
                m = pc.is_null(key) if value is None else pc.equal(key, value)
                mask = m if mask is None else pc.and_(mask, m)
            self._writer(table, values, data.schema).write_batch(data.filter(mask))

    def _writer(self, table: str, values: tuple[Any, ...], schema: Any) -> Any:
        import pyarrow.parquet as pq

        key = (table, *values)
        w = self._writers.get(key)
        if w is None:
            parts = [f"{name}={_partition_value(v)}" for name, v in zip(PARTITION_COLUMNS, values, strict=True)]
            folder = os.path.join(self.root, table, *parts)
            os.makedirs(folder, exist_ok=True)
            w = self._writers[key] = pq.ParquetWriter(
                os.path.join(folder, f"part-{self.name}.snappy.parquet"), schema, compression="snappy")
        return w

    def close(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def count_batch(self) -> Any:
        import pyarrow as pa

        return pa.RecordBatch.from_pydict({"table": list(self.counts), "rows": list(self.counts.values())},
                                          schema=arrow_schema(COUNT_COLUMNS))


def _partition_value(v: Any) -> str:
    """A partition directory's value as Spark writes it (protocol names and ISO dates need no
    escaping; a null is Hive's default partition)."""
    return "__HIVE_DEFAULT_PARTITION__" if v is None else str(v)


Task = Callable[[Iterator[Any]], Iterator[Any]]  # a mapInArrow function


@dataclass(frozen=True)
class Writing:
    """Tasks that write the tables under `root` (a local path every task sees) and return
    their counts, in place of tasks that return combined rows."""

    root: str

    columns: ClassVar[Columns] = COUNT_COLUMNS

    def schema(self) -> Any:
        """The StructType of the tasks' rows (COUNT_COLUMNS)."""
        return spark_schema(COUNT_COLUMNS)

    def wrap(self, task: Task, tag: str) -> Task:
        """`task` (combined batches out), writing: its files are named after `tag` and Spark's
        partition number."""
        root = self.root

        def written(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            files = TableFiles(root, f"{tag}-{ctx.partitionId() if ctx is not None else 0:05d}")
            try:
                for b in task(batches):
                    files.add(b)
            finally:
                files.close()
            yield files.count_batch()
        return written
