from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from support import SHARED

from kdissect.pulsar.schema_table import ENUMS, MESSAGES, PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[3]
PROTO = SHARED / "pulsar-spec" / "PulsarApi.proto"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_pulsar_schema", ROOT / "tools" / "gen_pulsar_schema.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_pulsar_schema"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_checked_in_table_is_what_the_generator_writes(tmp_path: Path) -> None:
    if not PROTO.exists():
        pytest.skip("shared Pulsar spec not available")
    gen = _generator()
    out = tmp_path / "schema_table.py"
    assert gen.main(["gen", str(PROTO), str(out)]) == 0
    assert out.read_text() == (ROOT / "kdissect" / "pulsar" / "schema_table.py").read_text()


def test_every_base_command_type_has_a_body_field() -> None:
    types = ENUMS["BaseCommand.Type"]
    base = MESSAGES["BaseCommand"]
    assert PROTOCOL_VERSION == 21
    assert len(types) == 70
    for code in types:
        name, kind, typ, label, _ = base[code]
        assert kind == "message" and typ in MESSAGES and label == "optional", (code, name)


def test_spot_facts() -> None:
    assert MESSAGES["MessageIdData"][1] == ("ledger_id", "scalar", "uint64", "required", False)
    assert MESSAGES["MessageIdData"][5][:4] == ("ack_set", "scalar", "int64", "repeated")
    assert MESSAGES["CommandSubscribe"][3][:3] == ("sub_type", "enum", "CommandSubscribe.SubType")
    assert MESSAGES["CommandLookupTopicResponse"][1][0] == "broker_service_url"
    assert MESSAGES["BaseCommand"][20][0] == "redeliver_unacknowledged_messages"
    assert ENUMS["CompressionType"] == {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}
    assert ENUMS["ServerError"][11] == "TopicNotFound"
    # oneof members are optional fields of their message
    assert MESSAGES["CommandWatchScalableTopicsUpdate"][3][:4] == ("diff", "message", "ScalableTopicsDiff", "optional")


def test_names_are_snake_case() -> None:
    for fields in MESSAGES.values():
        for entry in fields.values():
            assert re.fullmatch(r"[a-z][a-z0-9_]*", entry[0]), entry


def test_generator_parses_nested_messages_and_packed() -> None:
    gen = _generator()
    schema = gen.Parser("""
        syntax = "proto2";
        message Outer {
            message Inner { optional sint64 v = 1; }
            enum Kind { A = 0; B = 5; }
            repeated int32 xs = 2 [packed = true];
            optional Inner inner = 3;
            optional Kind kind = 4 [default = B];
            oneof pick { string s = 5; bytes b = 6; }
        }
    """).parse()
    assert schema.enums["Outer.Kind"] == {0: "A", 5: "B"}
    fields = {f.number: f for f in schema.messages["Outer"].fields}
    assert fields[2].packed and fields[2].label == "repeated"
    assert gen.resolve(schema, "Outer", "Inner") == ("message", "Outer.Inner")
    assert gen.resolve(schema, "Outer", "Kind") == ("enum", "Outer.Kind")
    assert fields[6].label == "optional"
    assert schema.messages["Outer.Inner"].fields[0].type == "sint64"
