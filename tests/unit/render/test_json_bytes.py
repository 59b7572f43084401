"""The JSON contract for byte strings (docs/json.md): the exact bytes in base64, a `<name>_text`
sibling when they are printable UTF-8, whole unless --max-bytes cuts them; on real captures, the
bytes come back exactly from every exported value."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from click.testing import CliRunner
from support import CAPTURES, capture_args

from kdissect.cli import cli
from kdissect.dissect.base import Options
from kdissect.model import BYTES, Column, Field, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.render.jsonout import bytes_text, bytes_value, fields_dict, message_dict, row_dict, text_or_hex
from kdissect.rocketmq.props import properties_from_text


def test_bytes_are_base64_with_a_text_form_when_printable() -> None:
    assert bytes_value(b"hello", 0) == "aGVsbG8=" and bytes_text(b"hello", 0) == "hello"
    assert bytes_value(b"\x00\xff", 0) == "AP8=" and bytes_text(b"\x00\xff", 0) is None
    # "abcd" as text and as the hex of two bytes are no longer the same JSON
    assert fields_dict([Field("v", b"abcd")], 0) == {"v": "YWJjZA==", "v_text": "abcd"}
    assert fields_dict([Field("v", bytes.fromhex("abcd"))], 0) == {"v": "q80="}
    assert text_or_hex(b"\xab\xcd", 0) == "abcd"


def test_cut_values_say_how_much_was_left_out() -> None:
    assert bytes_value(b"abcdef", 4) == "YWJjZA==…(+2 bytes)"
    assert bytes_text(b"abcde", 4) == "abcd…(+1 byte)"


def test_rows_and_fields_agree() -> None:
    columns: tuple[Column, ...] = (("key", BYTES), ("value", BYTES))
    row = Row("record", columns, (b"k1", b"\x01\x02"), None)
    want = {"key": "azE=", "key_text": "k1", "value": "AQI="}
    assert row_dict(row, 0) == want
    _ = row.children  # the materialized row gives the same dict
    assert fields_dict(row.children or [], 0) == want


def _byte_fields(fields: list[Field], out: list[Field]) -> None:
    for f in fields:
        if isinstance(f.value, (bytes, bytearray)) and f.hint != "raw" and not f.children:
            out.append(f)
        _byte_fields(f.children or [], out)


def test_every_exported_byte_string_decodes_to_the_captured_bytes() -> None:
    seen = 0
    for path in sorted((CAPTURES / "kafka").glob("*.pcap")):
        seen += _check_bytes(path)
    assert seen >= 50


def _check_bytes(path: Path) -> int:
    registry = DissectorRegistry(decode_as={int(a.split("=")[0]): "kafka" for a in capture_args(path)[1::2]})
    seen = 0
    for m in dissect_file(str(path), registry, Options(max_bytes=0)):
        d = message_dict(m, 0)
        text = json.dumps(d)
        found: list[Field] = []
        _byte_fields(m.fields, found)
        for f in found:
            b64 = base64.b64encode(bytes(f.value)).decode()
            assert f'"{f.name}": "{b64}"' in text
            seen += 1
    return seen


def test_export_keeps_whole_values_unless_told(tmp_path: Path) -> None:
    path = CAPTURES / "kafka" / "mock_ck_large_values.pcap"
    args = ["export", str(path), "-F", "jsonl", *capture_args(path)]
    whole = CliRunner().invoke(cli, args).stdout
    cut = CliRunner().invoke(cli, [*args, "--max-bytes", "256"]).stdout
    assert "…(+" not in whole and "…(+" in cut
    assert len(whole) > 3 * len(cut)


def test_rocketmq_property_names_are_kept_exactly() -> None:
    f, props = properties_from_text("prop-0\x01a\x02prop_0\x01b\x02TAGS\x01t\x02", "properties", 0, 10)
    assert fields_dict([f], 0) == {"properties": {"prop-0": "a", "prop_0": "b", "TAGS": "t"}}
    assert props == {"prop-0": "a", "prop_0": "b", "TAGS": "t"}
