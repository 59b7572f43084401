"""Every diagnostic the Kafka dissector attaches to a message (see kdissect/diagnostics.py)."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue, decode_errors
from kdissect.model import Group, Severity

ERROR, WARNING, NOTE = Severity.ERROR, Severity.WARNING, Severity.NOTE

DIAGNOSTICS = Catalogue("kafka", "Kafka", (
    *decode_errors(),
    # the message and its header
    ("length_mismatch", ERROR, Group.MALFORMED,
     "the length prefix disagrees with the bytes present: decoding stops where the prefix says"),
    ("request_not_captured", WARNING, Group.UNDECODED,
     "a response whose request was not captured and whose body fits no single API: the body stays raw"),
    ("api_inferred", WARNING, Group.ASSUMPTION,
     "a response whose request was not captured, decoded as the only API (and versions) its body fits"),
    ("request_dropped", NOTE, Group.COMMENT,
     "a response whose request was dropped from the requests waiting for an answer (a client "
     "pipelined more than a connection keeps): decoded as that request's API and version, not "
     "linked to it"),
    ("correlation_mismatch", WARNING, Group.ASSUMPTION,
     "a response whose correlation id matches no request, paired with the oldest pending request "
     "because its body decodes as that request's response (a broker answers in order)"),
    # the body and its version
    ("unknown_api", WARNING, Group.UNDECODED,
     "an API key kdissect does not know (or a negative version): the body stays raw"),
    ("newer_version", WARNING, Group.ASSUMPTION,
     "an API version newer than the newest kdissect knows, decoded as the newest known"),
    ("newer_version_undecoded", WARNING, Group.UNDECODED,
     "an API version newer than the newest kdissect knows that does not decode as the newest known: "
     "the body stays raw"),
    ("removed_version", NOTE, Group.COMMENT,
     "an API version Kafka 4.0 removed (below its raised floor), decoded all the same"),
    ("api_versions_v0_body", NOTE, Group.COMMENT,
     "the broker answers an ApiVersions request of a version it does not support with a v0 body "
     "(UNSUPPORTED_VERSION, KIP-511)"),
    ("api_versions_error_body", WARNING, Group.PROTOCOL,
     "an UNSUPPORTED_VERSION ApiVersions response whose body follows neither the v0 layout nor that of "
     "the version asked: only its error code is decoded"),
    ("trailing_bytes", WARNING, Group.PROTOCOL,
     "bytes after a complete body (Kafka's parsers ignore them): kept raw"),
    ("array_cap", WARNING, Group.UNDECODED,
     "an array past the elements one message may decode: the first elements are shown, the rest of "
     "the message is not decoded"),
    ("records", ERROR, Group.MALFORMED,
     "a records field whose batches cannot be read at all: kept raw"),
    # inside a records field (record batches, legacy message sets)
    ("records.header_limit", WARNING, Group.UNDECODED,
     "a record with more headers than one message may decode: the first are shown, the rest of the "
     "record is not decoded"),
    ("records.limit", NOTE, Group.COMMENT,
     "more records and batches than one message, or the capture's messages together, may show: the "
     "rest are counted from their batch headers, not shown"),
    ("records.partial", NOTE, Group.COMMENT,
     "the last batch of a records field is cut short: a broker stops at the fetch size, so this is normal "
     "in a fetch response"),
    ("records.truncated", ERROR, Group.MALFORMED,
     "a batch, message or record that ends before its declared size"),
    ("records.bad_length", ERROR, Group.MALFORMED,
     "a batch or message length too small for its header: the rest of the records field is kept raw"),
    ("records.magic", ERROR, Group.MALFORMED,
     "an unknown record format (magic byte): the batch is kept raw"),
    ("records.count", ERROR, Group.MALFORMED,
     "a batch's records_count larger than its bytes can hold: only the records that fit are decoded"),
    ("records.crc", ERROR, Group.CHECKSUM,
     "a record batch's CRC32C (a legacy message's CRC32) does not match its bytes"),
    ("records.nested", ERROR, Group.MALFORMED,
     "a compressed legacy message inside a compressed message set, which Kafka does not allow"),
    ("records.trailing", WARNING, Group.MALFORMED,
     "bytes after a legacy message's value or after a batch's last record"),
    ("records.decompress", ERROR, Group.MALFORMED,
     "a compressed batch or message that does not decompress: its records are not decoded"),
    ("records.codec_unavailable", WARNING, Group.UNDECODED,
     "a compressed batch whose codec library is not installed: its records are not decoded"),
    ("records.decompression_cap", WARNING, Group.UNDECODED,
     "a compressed batch whose output would pass what is left of the message's or the capture's "
     "decompression budget (--max-decompressed; a decompression bomb?): its records are not decoded"),
    ("records.decompression_budget", WARNING, Group.UNDECODED,
     "the message or the capture has used its decompression budget (--max-decompressed): compressed "
     "records after this point are not decoded"),
))
