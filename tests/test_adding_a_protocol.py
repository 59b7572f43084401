"""Adding a protocol is one package and one line in kdissect/protocols.py: a toy protocol
(tests/toyproto: its about.py and its dissector), registered by that one line, shows in read, export, display filters,
`kdissect fields`, `kdissect protocols` and the Spark rows and schema."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from pcapgen import Pkt, TcpConn, ethernet, write_pcap
from toyproto.about import ABOUT
from toyproto.dissector import DISSECTOR as TOY

from kdissect import protocols
from kdissect.cli import cli
from kdissect.pipeline import dissect_file


def _toy(op: int, ident: int, text: str) -> bytes:
    body = struct.pack(">bi", op, ident) + text.encode()
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def toy_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(protocols, "PROTOCOLS", (*protocols.PROTOCOLS, ABOUT))  # the registration line
    c = TcpConn(sport=7777)
    pkts = c.handshake()
    pkts += [c.segment(True, _toy(1, 7, "hello")), c.segment(False, _toy(1, 7, "hello")),
             c.segment(True, _toy(2, 8, "again")), c.segment(False, _toy(2, 8, "again"))]
    path = tmp_path / "toy.pcap"
    write_pcap(str(path), [Pkt(1000.0 + i * 0.01, ethernet(p)) for i, p in enumerate(pkts)])
    return path


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_read_shows_the_toy_protocol(toy_capture: Path) -> None:
    lines = _run("read", str(toy_capture), "--no-color").splitlines()
    assert len(lines) == 4
    assert "TOY" in lines[0] and "ping request id=7 'hello'" in lines[0]
    assert "echo response id=8 'again'" in lines[3] and "ms)" in lines[3]


def test_export_and_filters_know_its_keys(toy_capture: Path) -> None:
    rows = [json.loads(x) for x in _run("export", str(toy_capture), "-F", "jsonl").splitlines()]
    assert [(r["protocol"], r["kind"], r["fields"]["op"]) for r in rows] == [
        ("toy", "request", 1), ("toy", "response", 1), ("toy", "request", 2), ("toy", "response", 2)]
    echo = _run("export", str(toy_capture), "-F", "jsonl", "-Y", "toy.op_name == \"echo\" && toy.id == 8")
    assert len(echo.splitlines()) == 2
    assert len(_run("read", str(toy_capture), "-Y", "toy").splitlines()) == 4
    fields = _run("export", str(toy_capture), "-F", "fields", "-e", "toy.text", "-e", "toy.id")
    assert fields.splitlines()[0].split("\t") == ["hello", "7"]


def test_fields_and_protocols_list_it(toy_capture: Path) -> None:
    assert "toy.op_name\tstring" in _run("fields", "toy")
    assert any(line.startswith("toy ") for line in _run("protocols").splitlines())
    assert "toy.truncated\terror\tmalformed\t" in _run("fields", "--diagnostics", "toy")


def test_a_message_that_breaks_gets_its_malformed_diagnostic() -> None:
    from kdissect.dissect.base import DEFAULT_OPTIONS, run_dissector
    from kdissect.model import Message, Pdu

    msg = Message(Pdu(_toy(1, 7, "")[:6], [1], 1.0, 1.0, True), 1, "a:1", "b:7777", "toy")
    run_dissector(TOY, msg, TOY.new_state(), DEFAULT_OPTIONS)
    assert [(d.key, d.severity.value, d.group.value) for d in msg.diagnostics] == [
        ("toy.truncated", "error", "malformed")]


def test_spark_rows_and_schema_carry_its_column(toy_capture: Path) -> None:
    from kdissect.spark import rows
    from kdissect.spark.schema import layer_ddl, message_columns

    assert ("toy", ("struct", (("op", "int"), ("op_name", "string"), ("id", "int"), ("text", "string")))) \
        in message_columns()
    assert "`toy` STRUCT<`op`: INT" in layer_ddl("messages")
    row = rows.message_row(next(iter(dissect_file(str(toy_capture)))))
    assert row["toy"] == {"op": 1, "op_name": "ping", "id": 7, "text": "hello"}
    assert row["kafka"] is None
