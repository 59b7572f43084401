"""kdissect on Apache Spark: the three tables (messages, transactions, records), the job behind
`kdissect spark`, and the `kdissect` data source.

The row and schema modules (schema, sqltypes, values, records, rows, units, inputs) are pure
Python; pyspark is imported only by `datasource` and inside the job and session functions.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `kdissect` data source with a session by hand (Spark also finds it by
    itself when kdissect is installed as a regular package)."""
    from kdissect.spark.datasource import register as _register

    _register(spark)
