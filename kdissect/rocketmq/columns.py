"""The RocketMQ column of the Spark messages table: its typed members and where each comes
from in the JSON export (the Projection language of dissect/base.py)."""

from __future__ import annotations

from kdissect.dissect.base import Projection

COLUMNS: Projection = (
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
