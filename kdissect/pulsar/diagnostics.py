"""Every diagnostic the Pulsar dissector attaches to a message (see kdissect/diagnostics.py)."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue, decode_errors
from kdissect.model import Group, Severity

ERROR, WARNING, NOTE = Severity.ERROR, Severity.WARNING, Severity.NOTE

DIAGNOSTICS = Catalogue("pulsar", "Pulsar", (
    *decode_errors(),
    # the command
    ("unknown_command", WARNING, Group.UNDECODED,
     "a command type unknown to protocol version 21"),
    ("missing_body", WARNING, Group.MALFORMED,
     "a BaseCommand without the body field its type requires"),
    ("trailing", WARNING, Group.UNDECODED,
     "bytes after a command that carries no payload: kept raw"),
    ("error", WARNING, Group.PROTOCOL,
     "a command that reports an error (its ServerError and message)"),
    # protobuf
    ("field_limit", WARNING, Group.UNDECODED,
     "more protobuf fields than one message may decode: the rest are not decoded"),
    ("malformed_field", ERROR, Group.MALFORMED,
     "a nested protobuf message that does not decode: kept raw, its siblings still decode"),
    ("unknown_field", NOTE, Group.UNDECODED,
     "a protobuf field unknown to protocol version 21, or with an unexpected wire type: kept raw"),
    ("missing_required", WARNING, Group.MALFORMED,
     "a protobuf message without a field its schema marks required"),
    # the payload of SEND and MESSAGE
    ("payload", ERROR, Group.MALFORMED,
     "the payload section breaks: what was decoded before the break stays, the rest is kept raw"),
    ("no_checksum", NOTE, Group.PROTOCOL,
     "a payload without the magic 0x0e01 and its checksum (a client before protocol version 6)"),
    ("checksum", ERROR, Group.CHECKSUM,
     "the payload's CRC32-C does not match its bytes"),
    ("encrypted", NOTE, Group.COMMENT,
     "an end-to-end encrypted payload (its encryption keys are named): its content is not decoded"),
    ("decompress_cap", WARNING, Group.UNDECODED,
     "a compressed payload whose announced uncompressed size passes what is left of the message's or "
     "the capture's decompression budget (--max-decompressed): not decompressed"),
    ("codec_unavailable", WARNING, Group.UNDECODED,
     "a compressed payload whose codec library is not installed: not decoded"),
    ("decompress", ERROR, Group.MALFORMED,
     "a compressed payload that does not decompress, or not to the size its metadata announces"),
    ("batch_limit", NOTE, Group.COMMENT,
     "a batch with more messages than one message, or the capture's messages together, may show: the "
     "first entries are shown"),
    ("batch", ERROR, Group.MALFORMED,
     "a batch entry that breaks: the entries before it stay, the rest is kept raw"),
    ("batch_trailing", WARNING, Group.MALFORMED,
     "bytes after a batch's last entry"),
))
