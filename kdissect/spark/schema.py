"""The three Spark tables (messages, transactions, records) as data. Pure Python.

Column names follow the JSON export (kdissect.render.jsonout.message_dict): `frame`, `frames`,
`ts`, `stream`, `src`, `dst`, `protocol`, `kind`, `summary`, `length`, `info`, `fields`,
`diagnostics`, `match`. Added for SQL: the capture, integer timestamps, the flat facts of
`info` as typed columns, one typed struct per protocol, and the `date` partition column.
The `number` of the JSON export (the position in one process's output) has no meaning once
work is spread over executors and is left out; order by (capture, frame) instead.
"""

from __future__ import annotations

from kdissect.spark.sqltypes import Columns, SqlType, array, ddl, map_of, struct

# (column, type, paths): the first path that holds a value of the right type wins. A path is
# dotted through the `fields` object of the JSON export; "info." reads the `info` object; "*"
# matches any member (the first one that has the rest of the path).
Projection = tuple[tuple[str, SqlType, tuple[str, ...]], ...]

KAFKA: Projection = (
    ("api_key", "int", ("header.api_key", "info.op_code")),
    ("api_key_name", "string", ("header.api_key_name", "info.op")),
    ("api_version", "int", ("header.api_version", "info.version")),
    ("correlation_id", "int", ("header.correlation_id",)),
    ("client_id", "string", ("header.client_id", "info.client_id")),
    ("throttle_time_ms", "int", ("throttle_time_ms",)),
    ("error_code", "int", ("error_code",)),
    ("error_code_name", "string", ("error_code_name",)),
    ("acks", "int", ("acks",)),
    ("transactional_id", "string", ("transactional_id",)),
    ("group_id", "string", ("group_id", "info.group")),
    ("member_id", "string", ("member_id",)),
    ("generation_id", "int", ("generation_id",)),
    ("replica_id", "int", ("replica_id",)),
    ("session_id", "int", ("session_id",)),
    ("session_epoch", "int", ("session_epoch",)),
    ("isolation_level", "int", ("isolation_level",)),
    ("max_wait_ms", "int", ("max_wait_ms",)),
    ("timeout_ms", "int", ("timeout_ms",)),
    ("topics", array("string"), ("info.topics",)),
)

ZOOKEEPER: Projection = (
    ("xid", "int", ("xid",)),
    ("zxid", "bigint", ("zxid", "info.zxid")),
    ("opcode", "int", ("opcode", "info.op_code")),
    ("opcode_name", "string", ("opcode_name", "info.op")),
    ("err", "int", ("err",)),
    ("err_name", "string", ("err_name",)),
    ("path", "string", ("path", "info.path")),
    ("session_id", "bigint", ("session_id", "info.session_id")),
    ("time_out", "int", ("time_out",)),
    ("protocol_version", "int", ("protocol_version",)),
    ("last_zxid_seen", "bigint", ("last_zxid_seen",)),
    ("version", "int", ("version",)),
    ("watch", "boolean", ("watch",)),
    ("flags", "int", ("flags",)),
    ("flags_name", "string", ("flags_name",)),
    ("type", "int", ("type",)),
    ("type_name", "string", ("type_name",)),
    ("state", "int", ("state",)),
    ("state_name", "string", ("state_name", "info.state")),
    ("event", "string", ("info.event",)),
    ("data_length", "int", ("stat.data_length",)),
    ("four_letter_word", "string", ("four_letter_word",)),
)

PULSAR: Projection = (
    ("type", "int", ("type",)),
    ("type_name", "string", ("type_name", "info.op")),
    ("producer_id", "bigint", ("info.producer_id", "*.producer_id")),
    ("consumer_id", "bigint", ("info.consumer_id", "*.consumer_id")),
    ("request_id", "bigint", ("*.request_id",)),
    ("sequence_id", "bigint", ("*.sequence_id",)),
    ("ledger_id", "bigint", ("*.message_id.ledger_id",)),
    ("entry_id", "bigint", ("*.message_id.entry_id",)),
    ("producer_name", "string", ("metadata.producer_name",)),
    ("publish_time", "bigint", ("metadata.publish_time",)),
    ("event_time", "bigint", ("metadata.event_time",)),
    ("partition_key", "string", ("metadata.partition_key",)),
    ("num_messages", "int", ("metadata.num_messages_in_batch",)),
    ("checksum_status", "string", ("checksum_status",)),
    ("total_size", "int", ("total_size",)),
    ("command_size", "int", ("command_size",)),
    ("metadata_size", "int", ("metadata_size",)),
)

ROCKETMQ: Projection = (
    ("code", "int", ("code",)),
    ("code_name", "string", ("code_name",)),
    ("flag", "int", ("flag",)),
    ("flag_name", "string", ("flag_name",)),
    ("language", "int", ("language",)),
    ("language_name", "string", ("language_name",)),
    ("opaque", "int", ("opaque",)),
    ("version", "int", ("version",)),
    ("serialize_type", "int", ("serialize_type",)),
    ("serialize_type_name", "string", ("serialize_type_name",)),
    ("header_length", "int", ("header_length",)),
    ("remark", "string", ("remark",)),
    ("topic", "string", ("ext_fields.topic", "info.topic")),
    ("queue_id", "int", ("ext_fields.queue_id", "info.queue_id")),
    ("queue_offset", "bigint", ("ext_fields.queue_offset",)),
    ("producer_group", "string", ("ext_fields.producer_group",)),
    ("consumer_group", "string", ("ext_fields.consumer_group",)),
    ("group", "string", ("info.group",)),
    ("msg_id", "string", ("ext_fields.msg_id",)),
    ("born_timestamp", "bigint", ("ext_fields.born_timestamp",)),
    ("sys_flag", "int", ("ext_fields.sys_flag",)),
    ("response_code", "int", ("info.response_code",)),
    ("messages", "int", ("info.messages",)),
)

# protocol name (the JSON `protocol` value) -> its struct column. A new protocol adds one line.
PROTOCOLS: dict[str, Projection] = {
    "kafka": KAFKA,
    "zookeeper": ZOOKEEPER,
    "pulsar": PULSAR,
    "rocketmq": ROCKETMQ,
}

DIAGNOSTIC: SqlType = struct((
    ("severity", "string"), ("group", "string"), ("key", "string"), ("message", "string"),
    ("offset", "int"),
))
MATCH: SqlType = struct((("frame", "bigint"), ("kind", "string"), ("rtt_ms", "double")))


def projection_type(p: Projection) -> SqlType:
    return struct(tuple((name, t) for name, t, _ in p))


MESSAGE_COLUMNS: Columns = (
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
    *((name, projection_type(p)) for name, p in PROTOCOLS.items()),
    ("date", "string"),
)

TRANSACTION_COLUMNS: Columns = (
    ("capture", "string"),
    ("stream", "int"),
    ("protocol", "string"),
    ("op", "string"),
    ("op_code", "int"),
    ("version", "int"),
    ("corr", "string"),
    ("topic", "string"),
    ("client", "string"),
    ("server", "string"),
    ("request_frame", "bigint"),
    ("response_frame", "bigint"),
    ("request_ts", "double"),
    ("response_ts", "double"),
    ("time", "timestamp"),
    ("rtt_ms", "double"),
    ("error_code", "int"),
    ("error", "string"),
    ("request_summary", "string"),
    ("response_summary", "string"),
    ("request_length", "int"),
    ("response_length", "int"),
    ("date", "string"),
)

RECORD_COLUMNS: Columns = (
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
    ("index", "int"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp_ms", "bigint"),
    ("key", "string"),
    ("value_size", "int"),
    ("headers", map_of("string")),
    ("date", "string"),
)

LAYERS: dict[str, Columns] = {
    "messages": MESSAGE_COLUMNS,
    "transactions": TRANSACTION_COLUMNS,
    "records": RECORD_COLUMNS,
}
PARTITION_COLUMNS = ("protocol", "date")

# What one executor task returns: a message row plus its records and, for a response, its
# transaction, so that one pass over the captures feeds all three tables.
COMBINED_COLUMNS: Columns = (
    *MESSAGE_COLUMNS,
    ("_records", array(struct(RECORD_COLUMNS))),
    ("_transaction", struct(TRANSACTION_COLUMNS)),
)


def layer_ddl(layer: str) -> str:
    return ddl(LAYERS[layer])
