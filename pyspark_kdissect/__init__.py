"""Spark's automatic discovery of the `kdissect` data source: Spark imports modules named
`pyspark_*` and registers their `DefaultSource` (see kdissect.spark.datasource)."""

from __future__ import annotations

from kdissect.spark.datasource import KdissectDataSource as DefaultSource

__all__ = ["DefaultSource"]
