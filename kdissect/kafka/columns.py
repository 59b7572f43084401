"""The Kafka column of the Spark messages table: its typed members and where each comes
from in the JSON export (the Projection language of dissect/base.py)."""

from __future__ import annotations

from kdissect.dissect.base import Projection

COLUMNS: Projection = (
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
    ("topics", ("array", "string"), ("info.topics",)),
)
