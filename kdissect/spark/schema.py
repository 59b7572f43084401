"""The three Spark tables (messages, transactions, records) as data. Pure Python.

Column names follow the JSON export (kdissect.render.jsonout.message_dict): `frame`, `frames`,
`ts`, `stream`, `src`, `dst`, `protocol`, `kind`, `summary`, `length`, `info`, `fields`,
`diagnostics`, `match`, `tls`. Added for SQL: the capture, integer timestamps, the flat facts of
`info` as typed columns, one typed struct per protocol, and the `date` partition column.
The `number` of the JSON export (the position in one process's output) has no meaning once
work is spread over executors and is left out; order by (capture, frame) instead.
"""

from __future__ import annotations

from typing import Any

from kdissect import protocols
from kdissect.dissect.base import Projection
from kdissect.spark import records
from kdissect.spark.sqltypes import Columns, SqlType, array, ddl, map_of, spark_schema, struct


def protocol_columns() -> dict[str, Projection]:
    """Protocol name (the JSON `protocol` value) -> its struct column, which each protocol's
    package declares (Dissector.columns)."""
    return {d.name: d.columns for d in protocols.dissectors()}


DIAGNOSTIC: SqlType = struct((
    ("severity", "string"), ("group", "string"), ("key", "string"), ("message", "string"),
    ("offset", "int"),
))
MATCH: SqlType = struct((("frame", "bigint"), ("kind", "string"), ("rtt_ms", "double")))
TLS: SqlType = struct((("version", "string"), ("cipher", "string"), ("sni", "string")))


def projection_type(p: Projection) -> SqlType:
    return struct(tuple((name, t) for name, t, _ in p))


def message_columns() -> Columns:
    return (*MESSAGE_BASE, *((name, projection_type(p)) for name, p in protocol_columns().items()),
            ("date", "date"))


MESSAGE_BASE: Columns = (
    ("capture", "string"),
    ("frame", "bigint"),
    ("frames", array("bigint")),
    ("ts", "double"),
    ("ts_us", "bigint"),
    ("ts_ns", "bigint"),
    ("time", "timestamp"),
    ("stream", "int"),
    ("src", "string"),
    ("dst", "string"),
    ("protocol", "string"),
    ("kind", "string"),
    ("summary", "string"),
    ("length", "int"),
    ("op", "string"),
    ("op_code", "int"),
    ("version", "int"),
    ("corr", "string"),
    ("error_code", "int"),
    ("error", "string"),
    ("topic", "string"),
    ("info", map_of("string")),
    ("fields", "string"),  # JSON text: one encode per message, and cheap to store
    ("diagnostics", array(DIAGNOSTIC)),
    ("match", MATCH),
    ("tls", TLS),  # null unless decrypted from TLS
)

TRANSACTION_STATUS = ("answered", "unanswered", "no-request")

TRANSACTION_COLUMNS: Columns = (
    ("capture", "string"),
    ("stream", "int"),
    ("protocol", "string"),
    ("status", "string"),  # one of TRANSACTION_STATUS
    ("op", "string"),
    ("op_code", "int"),
    ("version", "int"),
    ("corr", "string"),
    ("topic", "string"),
    ("client", "string"),
    ("server", "string"),
    ("expects_response", "boolean"),
    ("request_frame", "bigint"),
    ("response_frame", "bigint"),
    ("request_ts", "double"),
    ("response_ts", "double"),
    ("request_time", "timestamp"),
    ("response_time", "timestamp"),
    ("time", "timestamp"),
    ("rtt_ms", "double"),
    ("error_code", "int"),
    ("error", "string"),
    ("request_summary", "string"),
    ("response_summary", "string"),
    ("request_length", "int"),
    ("response_length", "int"),
    ("date", "date"),
)

RECORD_MESSAGE_COLUMNS: Columns = (  # each record's message
    ("capture", "string"),
    ("frame", "bigint"),
    ("stream", "int"),
    ("ts", "double"),
    ("ts_us", "bigint"),
    ("time", "timestamp"),
    ("protocol", "string"),
    ("kind", "string"),
    ("op", "string"),
    ("src", "string"),
    ("dst", "string"),
)

RECORD_COLUMNS: Columns = (*RECORD_MESSAGE_COLUMNS, *records.COLUMNS, ("date", "date"))

LAYERS = ("messages", "transactions", "records")
PARTITION_COLUMNS = ("protocol", "date")


def layer_columns(layer: str) -> Columns:
    if layer == "messages":
        return message_columns()
    return TRANSACTION_COLUMNS if layer == "transactions" else RECORD_COLUMNS


def combined_columns() -> Columns:
    """What one executor task returns: a message row plus its records and, for a response, its
    transaction, so that one pass over the captures feeds all three tables. A record holds its
    own columns only: the records table takes its message's (RECORD_MESSAGE_COLUMNS, date)
    from the row around it."""
    return (
        *message_columns(),
        ("_records", array(struct(records.COLUMNS))),
        ("_transaction", struct(TRANSACTION_COLUMNS)),
    )


def layer_ddl(layer: str) -> str:
    return ddl(layer_columns(layer))


def layer_schema(layer: str) -> Any:
    """The layer's StructType (sqltypes.spark_schema)."""
    return spark_schema(layer_columns(layer))
