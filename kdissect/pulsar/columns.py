"""The Pulsar column of the Spark messages table: its typed members and where each comes
from in the JSON export (the Projection language of dissect/base.py)."""

from __future__ import annotations

from kdissect.dissect.base import Projection

COLUMNS: Projection = (
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
