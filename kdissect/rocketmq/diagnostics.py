"""Every diagnostic the RocketMQ dissector attaches to a message (see kdissect/diagnostics.py)."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue, decode_errors
from kdissect.model import Group, Severity

ERROR, WARNING, NOTE = Severity.ERROR, Severity.WARNING, Severity.NOTE

DIAGNOSTICS = Catalogue("rocketmq", "RocketMQ", (
    *decode_errors(),
    # the frame and its header
    ("length", WARNING, Group.MALFORMED,
     "the frame's length prefix disagrees with the bytes present"),
    ("header_type", WARNING, Group.PROTOCOL,
     "a JSON header member of the wrong type (a code, version, opaque or flag that is not an integer "
     "or has more than 19 digits; extFields not an object)"),
    ("header_trailing", WARNING, Group.PROTOCOL,
     "bytes after the JSON or binary header, inside its declared length"),
    ("ext_limit", WARNING, Group.UNDECODED,
     "more ext-fields than one message may decode: the rest are not decoded"),
    ("unknown_code", NOTE, Group.UNDECODED,
     "a request code kdissect does not know"),
    ("error_response", WARNING, Group.PROTOCOL,
     "a response with an error code (its remark says why)"),
    ("partial_success", NOTE, Group.PROTOCOL,
     "a response whose code reports a partial success (a disk or slave flush timeout, a slave not available)"),
    # the body
    ("body_json", ERROR, Group.MALFORMED,
     "a JSON body that does not parse, or breaks part-way (what parsed stays)"),
    ("body_trailing", NOTE, Group.COMMENT,
     "bytes after a JSON body"),
    ("body_unmatched", NOTE, Group.UNDECODED,
     "a response body whose request is not in the capture: kept raw (its layout depends on the request)"),
    # stored messages (pull results, batches)
    ("message_malformed", ERROR, Group.MALFORMED,
     "a message of a list that breaks: the messages before it stay, the rest is kept raw"),
    ("message_trailing", NOTE, Group.COMMENT,
     "bytes after a message's properties"),
    ("message_limit", NOTE, Group.COMMENT,
     "more messages than one frame, or the capture's frames together, may show: the rest are not "
     "decoded"),
    ("body_crc", ERROR, Group.CHECKSUM,
     "a stored message's body CRC does not match its bytes"),
    ("decompress", ERROR, Group.MALFORMED,
     "a compressed message body that does not decompress: it stays compressed"),
    ("codec_unavailable", WARNING, Group.UNDECODED,
     "a compressed message body whose codec library is not installed: it stays compressed"),
    ("decompression_budget", WARNING, Group.UNDECODED,
     "the message or the capture has used its decompression budget (--max-decompressed): bodies "
     "after this point stay compressed"),
))
