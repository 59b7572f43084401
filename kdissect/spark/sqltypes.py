"""A tiny column-type language for the Spark tables, written once and rendered three ways: as a
Spark DDL string (CREATE TABLE, documentation), as pyspark's StructType (what the driver and the
data source give Spark: the JVM reads it as JSON, where a DDL string goes through its SQL
parser, whose first parses of schemas this size take seconds) and as an Arrow schema (for the
executors, which build Arrow record batches without asking the JVM).

A type is a Spark primitive name ("string", "int", "bigint", "double", "boolean", "binary",
"timestamp", "date"), ("array", T), ("map", "string", T) or ("struct", ((name, T), ...)).
Pure Python: pyspark and pyarrow are imported only by `spark_schema` and `arrow_schema`.
"""

from __future__ import annotations

from typing import Any

SqlType = str | tuple[Any, ...]
Columns = tuple[tuple[str, SqlType], ...]

PRIMITIVES = ("string", "int", "bigint", "double", "boolean", "binary", "timestamp", "date")


def array(t: SqlType) -> SqlType:
    return ("array", t)


def map_of(t: SqlType) -> SqlType:
    return ("map", "string", t)


def struct(cols: Columns) -> SqlType:
    return ("struct", cols)


def ddl_type(t: SqlType) -> str:
    if isinstance(t, str):
        return t.upper()
    kind = t[0]
    if kind == "array":
        return f"ARRAY<{ddl_type(t[1])}>"
    if kind == "map":
        return f"MAP<{ddl_type(t[1])}, {ddl_type(t[2])}>"
    inner = ", ".join(f"`{n}`: {ddl_type(ct)}" for n, ct in t[1])
    return f"STRUCT<{inner}>"


def ddl(cols: Columns) -> str:
    """`name TYPE, ...`: what CREATE TABLE takes; the type spark_schema gives, as text."""
    return ", ".join(f"`{n}` {ddl_type(t)}" for n, t in cols)


def spark_type(t: SqlType) -> Any:
    """pyspark's type for t, nullable throughout (as Spark reads the DDL type)."""
    from pyspark.sql import types as T

    prim = {
        "string": T.StringType, "int": T.IntegerType, "bigint": T.LongType, "double": T.DoubleType,
        "boolean": T.BooleanType, "binary": T.BinaryType, "timestamp": T.TimestampType, "date": T.DateType,
    }
    if isinstance(t, str):
        return prim[t]()
    kind = t[0]
    if kind == "array":
        return T.ArrayType(spark_type(t[1]), True)
    if kind == "map":
        return T.MapType(spark_type(t[1]), spark_type(t[2]), True)
    return spark_schema(t[1])


def spark_schema(cols: Columns) -> Any:
    """The StructType of the columns: what DataFrame.mapInArrow, createDataFrame,
    DataFrameReader.schema and DataSource.schema take."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(n, spark_type(t), True) for n, t in cols])


def arrow_type(t: SqlType) -> Any:
    import pyarrow as pa

    prim = {
        "string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "double": pa.float64(),
        "boolean": pa.bool_(), "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
    }
    if isinstance(t, str):
        return prim[t]
    kind = t[0]
    if kind == "array":
        return pa.list_(arrow_type(t[1]))
    if kind == "map":
        return pa.map_(arrow_type(t[1]), arrow_type(t[2]))
    return pa.struct([pa.field(n, arrow_type(ct)) for n, ct in t[1]])


def arrow_schema(cols: Columns) -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(n, arrow_type(t)) for n, t in cols])
