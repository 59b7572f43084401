"""The committed Kafka tables are exactly what tools/gen_kafka_schema.py writes from the shared
specification, and they agree with the specification's own API table."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from support import ROOT, shared_path

from kdissect.kafka.apis import APIS
from kdissect.kafka.schema_messages import EMBEDDED, REQUESTS, RESPONSES, FieldRow

PACKAGE = ROOT / "kdissect" / "kafka"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_kafka_schema", ROOT / "tools" / "gen_kafka_schema.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_kafka_schema"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_committed_tables_are_what_the_generator_writes() -> None:
    spec_dir = shared_path("kafka-spec", "message")
    files = _generator().generate(spec_dir)
    assert sorted(files) == ["apis.py", "schema_messages.py"]
    for name, text in files.items():
        assert (PACKAGE / name).read_text(encoding="utf-8") == text, f"{name}: regenerate with tools/gen_kafka_schema.py"


def test_generator_is_deterministic() -> None:
    spec_dir = shared_path("kafka-spec", "message")
    gen = _generator()
    assert gen.generate(spec_dir) == gen.generate(spec_dir)


def test_header_names_the_upstream_input() -> None:
    head = (PACKAGE / "schema_messages.py").read_text(encoding="utf-8").split('"""', 1)[0]
    assert "# Input: " in head and "sha256" in head
    assert "apache/kafka@" in head or "Upstream commit: not recorded" in head
    assert head == (PACKAGE / "apis.py").read_text(encoding="utf-8").split('"""', 1)[0]


def test_api_table_matches_the_specification() -> None:
    table = shared_path("kafka-spec", "API_TABLE.tsv")
    with table.open(encoding="utf-8", newline="") as fh:
        rows = {int(r["api_key"]): r for r in csv.DictReader(fh, delimiter="\t")}
    assert sorted(rows) == sorted(APIS)
    for key, api in APIS.items():
        assert rows[key]["name"] == api.name
        assert rows[key]["validVersions"] in (f"{api.lowest}-{api.newest}", f"{api.newest}"), key


def test_rows_are_named() -> None:
    produce = {f.name: f for f in REQUESTS[0]}
    acks = produce["acks"]
    assert isinstance(acks, FieldRow)
    assert (acks.type, acks.min_version, acks.tag, acks.children) == ("int16", 0, -1, None)
    topics = produce["topic_data"]
    assert topics.type == "[]struct" and topics.children is not None
    assert all(isinstance(f, FieldRow) for f in topics.children)
    assert set(REQUESTS) == set(RESPONSES) == set(APIS)
    assert EMBEDDED["ConsumerProtocolSubscription"].fields[0].name == "topics"


def test_generated_tables_only_under_the_package(tmp_path: Path) -> None:
    spec_dir = shared_path("kafka-spec", "message")
    assert _generator().main(["gen", str(spec_dir), str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apis.py", "schema_messages.py"]
