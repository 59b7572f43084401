from __future__ import annotations

import struct

import pytest

from kdissect.errors import BadLength, Truncated
from kdissect.rocketmq import encode as enc
from kdissect.rocketmq.header import decode_binary, decode_json


def _binary(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes, ext: list[tuple[bytes, bytes]]) -> bytes:
    """A binary header built field by field from the documented layout (not by the encoder)."""
    out = struct.pack(">hBhii", code, lang, version, opaque, flag)
    out += struct.pack(">i", len(remark)) + remark
    entries = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return out + struct.pack(">i", len(entries)) + entries


def test_binary_header_fields_and_offsets() -> None:
    raw = _binary(310, 1, 401, 77, 0, b"", [(b"b", b"orders"), (b"e", b"3"), (b"n", b"")])
    buf = b"\x00" * 8 + raw
    h = decode_binary(buf, 8, len(buf))
    assert (h.code, h.language, h.version, h.opaque, h.flag, h.remark) == (310, 1, 401, 77, 0, None)
    assert [(e.key, e.value) for e in h.ext] == [("b", "orders"), ("e", "3"), ("n", None)]
    assert h.fields["opaque"].offset == 8 + 5 and h.fields["opaque"].length == 4
    assert h.ext[0].offset == 8 + 13 + 4 + 4  # after the fixed part, remark length and ext length
    assert h.language_code == 1


def test_encoder_agrees_with_hand_built_header() -> None:
    ext = {"topic": "t", "queueId": "1"}
    assert enc.binary_header(11, 0, 5, 9, 2, "why", ext) == _binary(
        11, 0, 5, 9, 2, b"why", [(b"topic", b"t"), (b"queueId", b"1")])


def test_binary_duplicate_key_last_wins() -> None:
    raw = _binary(10, 0, 0, 1, 0, b"", [(b"topic", b"a"), (b"topic", b"b")])
    h = decode_binary(raw, 0, len(raw))
    assert h.ext_value("topic") == "b"


def test_binary_negative_and_long_lengths() -> None:
    raw = struct.pack(">hBhii", 10, 0, 0, 1, 0) + struct.pack(">i", -5)
    with pytest.raises(BadLength):
        decode_binary(raw, 0, len(raw))
    raw = struct.pack(">hBhii", 10, 0, 0, 1, 0) + struct.pack(">i", 100) + b"x"
    with pytest.raises(Truncated):
        decode_binary(raw, 0, len(raw))


def test_binary_entry_overrunning_ext_length() -> None:
    entries = struct.pack(">h", 1) + b"k" + struct.pack(">i", 50) + b"v"
    raw = struct.pack(">hBhii", 10, 0, 0, 1, 0) + struct.pack(">i", 0) + struct.pack(">i", len(entries)) + entries
    with pytest.raises(Truncated):
        decode_binary(raw, 0, len(raw))


def test_json_header_cpp_style() -> None:
    text = (b'{"code":11,"extFields":{"maxMsgNums":32,"queueId":0,"topic":"T"},"flag":0,'
            b'"language":"CPP","opaque":15,"remark":"","version":63}\n')
    h = decode_json(text, 8)
    assert (h.code, h.language, h.opaque, h.version, h.remark) == (11, "CPP", 15, 63, "")
    assert h.language_code == 1
    assert h.ext_value("maxMsgNums") == 32
    assert h.diagnostics == []


def test_json_header_unknown_keys_and_trailing_garbage() -> None:
    h = decode_json(b'{"code":0,"flag":1,"opaque":3,"serializeTypeCurrentRPC":"JSON"}xx', 8)
    assert [f.name for f in h.extra] == ["serialize_type_current_rpc"]
    assert [d.key for d in h.diagnostics] == ["rocketmq.header_trailing"]


def test_json_header_wrong_types_are_diagnosed() -> None:
    h = decode_json(b'{"code":"ten","opaque":1,"extFields":[1]}', 8)
    assert h.code is None
    assert {d.key for d in h.diagnostics} == {"rocketmq.header_type"}


def test_json_header_integers_past_a_long_are_diagnosed_not_read() -> None:
    # An opaque of 4,300 digits was read as an exact int (int() and str() of it taking time
    # growing with the square of the digits), matched responses by it and named the code
    # UNKNOWN_ and 4,300 digits in the summary line.
    long_, past = b"-" + b"9" * 18, b"9" * 4300
    h = decode_json(b'{"code":10,"opaque":' + past + b',"version":' + long_ + b',"extFields":{"a":' + past + b"}}", 8)
    assert (h.code, h.opaque, h.version) == (10, None, -999999999999999999)
    assert [d.message for d in h.diagnostics] == ["header opaque is not an integer of 19 digits at most"]
    assert h.ext_value("a") == float("inf")


def test_json_nested_ext_value_kept_as_text() -> None:
    h = decode_json(b'{"code":1,"opaque":2,"extFields":{"a":{"b":[1]},"c":null}}', 8)
    assert [(e.key, e.value) for e in h.ext] == [("a", '{"b":[1]}'), ("c", None)]


def test_ext_field_numbers_with_control_whitespace_are_read_or_left_as_text() -> None:
    from kdissect.rocketmq.extfields import _as_int

    assert _as_int("179533018606\x1f") == 179533018606  # str.strip() removes \x1f; int() does not
    assert _as_int(" 42 ") == 42
    assert _as_int("4 2") is None and _as_int(None) is None and _as_int(True) is None
