"""The ZooKeeper column of the Spark messages table: its typed members and where each comes
from in the JSON export (the Projection language of dissect/base.py)."""

from __future__ import annotations

from kdissect.dissect.base import Projection

COLUMNS: Projection = (
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
