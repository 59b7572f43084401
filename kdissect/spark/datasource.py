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
for; default this machine's), max_shares.
This module imports pyspark: import it only where Spark runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kdissect.errors import UsageError
from kdissect.protocols import parse_decode_as
from kdissect.spark.inputs import python_files
from kdissect.spark.schema import LAYERS, layer_ddl
from kdissect.spark.units import Unit, plan
from kdissect.spark.worker import Config, compiled_filter, read_unit

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


def _int(options: dict[str, str], name: str, default: int | None) -> int | None:
    v = options.get(name)
    return default if v in (None, "") else int(str(v))


def config(options: dict[str, str]) -> Config:
    specs = [s for s in options.get("decode_as", "").split(",") if s.strip()]
    return Config(
        decode_as=parse_decode_as(specs),
        max_bytes=_int(options, "max_bytes", 256) or 0,
        max_decompressed=_int(options, "max_decompressed", 64 * 1024 * 1024) or 64 * 1024 * 1024,
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
        cores = _int(self.options, "parallelism", os.cpu_count() or 1) or 1
        units = plan(files, cores, _int(self.options, "split_size", None), _int(self.options, "max_shares", None))
        return [UnitPartition(u) for u in units]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, UnitPartition)
        yield from read_unit(partition.unit, self.cfg, self.layer)


class KdissectDataSource(DataSource):
    """Decoded broker traffic from pcap/pcapng captures, one layer per read."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return layer_ddl(_layer(dict(self.options)))

    def reader(self, schema: Any) -> KdissectReader:
        return KdissectReader(dict(self.options))


def register(spark: Any) -> None:
    spark.dataSource.register(KdissectDataSource)
