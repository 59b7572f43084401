"""The Spark data source `kdissect` (pyspark >= 4.0 Python DataSource API):

    spark.read.format("kdissect").option("layer", "records").load("captures/*.pcap")
    CREATE TABLE kafka_records USING kdissect OPTIONS (path 'captures/', layer 'records')

Spark finds it by itself once kdissect is installed (the top-level module `pyspark_kdissect`
exports it as `DefaultSource`, the name Spark looks for in modules named `pyspark_*`);
`register(spark)` registers it by hand (needed with an editable install, whose modules Spark's
lookup cannot list).

Options: layer (messages | transactions | records; default messages), path / paths, decode_as
("9093=kafka,9094=kafka"), filter (a display filter, docs/filters.md), max_bytes,
max_decompressed, show_secrets, split_size (bytes per partition), parallelism (the cores to plan
for; default this machine's), max_shares, pushdown ("true": take WHERE conditions on the
partition columns `protocol` and `date` into the read, which then drops the other rows before
Spark sees them; Spark asks for it with spark.sql.python.filterPushdown.enabled=true, and
fails a read of a source that takes filters without that setting, hence the option).
This module imports pyspark: import it only where Spark runs.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from kdissect.dissect.base import DEFAULT_OPTIONS, MAX_DECOMPRESSED
from kdissect.errors import UsageError
from kdissect.protocols import parse_decode_as
from kdissect.spark.inputs import python_files
from kdissect.spark.rows import Values
from kdissect.spark.schema import LAYERS, PARTITION_COLUMNS, layer_columns, layer_schema
from kdissect.spark.units import Unit, plan
from kdissect.spark.worker import Config, RowTest, compiled_filter, read_unit

NAME = "kdissect"


def _layer(options: dict[str, str]) -> str:
    layer = options.get("layer", "messages").lower()
    if layer not in LAYERS:
        raise UsageError(f"kdissect data source: layer must be one of {', '.join(LAYERS)}, not {layer!r}")
    return layer


def _paths(options: dict[str, str]) -> list[str]:
    if options.get("paths"):
        return [str(p) for p in json.loads(options["paths"])]
    if options.get("path"):
        return [options["path"]]
    raise UsageError("kdissect data source: no input (load(PATH) or option('path', ...))")


D = TypeVar("D", int, None)


def _int(options: dict[str, str], name: str, default: D, lo: int = 1, hi: int = 1 << 62) -> int | D:
    """An integer option from lo to hi (default when not given); anything else is a usage error."""
    v = options.get(name)
    if v in (None, ""):
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise UsageError(f"kdissect data source: option {name} takes an integer from {lo} to {hi}, not {v!r}")
    return n


def config(options: dict[str, str]) -> Config:
    specs = [s for s in options.get("decode_as", "").split(",") if s.strip()]
    return Config(
        decode_as=parse_decode_as(specs),
        max_bytes=_int(options, "max_bytes", 256, lo=0),
        max_decompressed=_int(options, "max_decompressed", DEFAULT_OPTIONS.max_decompressed, lo=1024,
                              hi=MAX_DECOMPRESSED),
        show_secrets=options.get("show_secrets", "false").lower() == "true",
        display_filter=options.get("filter") or None,
    )


class UnitPartition(InputPartition):
    def __init__(self, unit: Unit) -> None:
        super().__init__(unit)
        self.unit = unit


class KdissectReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.layer = _layer(options)
        self.cfg = config(options)

    def partitions(self) -> list[InputPartition]:
        compiled_filter(self.cfg.display_filter)  # a bad filter fails here, before any task
        files = python_files(_paths(self.options))
        cores = _int(self.options, "parallelism", os.cpu_count() or 1)
        units = plan(files, cores, _int(self.options, "split_size", None), _int(self.options, "max_shares", None))
        return [UnitPartition(u) for u in units]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, UnitPartition)
        yield from read_unit(partition.unit, self.cfg, self.layer, self.keep())

    def keep(self) -> RowTest | None:
        return None


# The conditions on a partition column a read takes itself: the filter's class -> the test.
PUSHED: dict[type[Filter], Callable[[Any, Any], bool]] = {
    EqualTo: operator.eq,
    In: lambda v, values: v in values,
    GreaterThan: operator.gt,
    GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt,
    LessThanOrEqual: operator.le,
}

Condition = tuple[str, type[Filter], Any]  # column, filter class, value


class PushdownReader(KdissectReader):
    """A reader that takes the conditions on `protocol` and `date` (PUSHED) from Spark's plan
    and keeps only the rows that meet them all; Spark evaluates the rest."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.conditions: list[Condition] = []

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 (pyspark's name)
        for f in filters:
            column: tuple[str, ...] = getattr(f, "attribute", ())
            if type(f) in PUSHED and len(column) == 1 and column[0] in PARTITION_COLUMNS:
                self.conditions.append((column[0], type(f), getattr(f, "value", None)))
            else:
                yield f

    def keep(self) -> RowTest | None:
        conditions = tuple((name, PUSHED[kind], value) for name, kind, value in self.conditions)
        if not conditions:
            return None

        names = [name for name, _ in layer_columns(self.layer)]
        at = tuple((names.index(name), met, value) for name, met, value in conditions)

        def test(row: Values) -> bool:
            return all(row[i] is not None and met(row[i], value) for i, met, value in at)
        return test


class KdissectDataSource(DataSource):
    """Decoded broker traffic from pcap/pcapng captures, one layer per read."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> Any:
        return layer_schema(_layer(dict(self.options)))

    def reader(self, schema: Any) -> KdissectReader:
        options = dict(self.options)
        if options.get("pushdown", "false").lower() == "true":
            return PushdownReader(options)
        return KdissectReader(options)


def register(spark: Any) -> None:
    spark.dataSource.register(KdissectDataSource)
