"""A tiny column-type language for the Spark tables, written once and rendered two ways: as a
Spark DDL string (for the driver and the data source's schema) and as an Arrow schema (for the
executors, which build Arrow record batches without asking the JVM).

A type is a Spark primitive name ("string", "int", "bigint", "double", "boolean", "binary",
"timestamp", "date"), ("array", T), ("map", "string", T) or ("struct", ((name, T), ...)).
Pure Python: pyarrow is imported only by `arrow_schema`.
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
    """`name TYPE, ...`: what DataFrame.mapInArrow, DataSource.schema and CREATE TABLE take."""
    return ", ".join(f"`{n}` {ddl_type(t)}" for n, t in cols)


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
