"""The expert run and its commands: every analyzer sees every message, the JSON document is
whole and strict, the catalogue is consistent and docs/findings.md is up to date."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from support import ROOT

from kdissect.cli import cli
from kdissect.cliutil import build, iter_capture
from kdissect.commands.catalog import findings_markdown
from kdissect.errors import UsageError
from kdissect.expert.analyzers import all_kinds
from kdissect.expert.catalogue import CATEGORIES, Finding, Kind, check
from kdissect.expert.engine import Expert
from kdissect.expert.series import Clock
from kdissect.model import Message, Severity

CAPTURE = ROOT / "captures" / "kafka" / "mock_ck_transactions.pcap"
DOC = ROOT / "docs" / "findings.md"


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_the_findings_document_is_up_to_date() -> None:
    assert DOC.read_text() == findings_markdown(all_kinds()), \
        "regenerate: kdissect fields --findings -F markdown > docs/findings.md"


def test_every_kind_is_declared_once_with_a_known_category() -> None:
    kinds = all_kinds()
    assert len({k.key for k in kinds}) == len(kinds)
    assert all(k.category in CATEGORIES and k.title and k.hint for k in kinds)
    twice = Kind("x.y", Severity.NOTE, "broker", "t", "h")
    with pytest.raises(ValueError, match="declared twice"):
        check([twice, twice])
    with pytest.raises(ValueError, match="unknown category"):
        check([Kind("x.z", Severity.NOTE, "elsewhere", "t", "h")])


class _Recorder:
    """An analyzer that keeps what it was given, and finds one thing per stream."""

    KINDS: ClassVar[tuple[Kind, ...]] = (Kind("test.stream", Severity.WARNING, "network", "a stream", "look"),)

    def __init__(self, clock: Clock) -> None:
        self.frames: list[int] = []
        self.ended: list[int] = []

    def add(self, m: Message) -> None:
        self.frames.append(m.frame)

    def conversation_ended(self, conv: Any) -> None:
        self.ended.append(conv.index)

    def finish(self) -> list[Finding]:
        return [self.KINDS[0].finding(f"stream {s}", "kafka", 0.0, streams=[s], frames=range(100)) for s in self.ended]

    def charts(self) -> dict[str, Any]:
        return {"recorded": len(self.frames)}


def test_every_message_and_conversation_end_reaches_the_analyzers() -> None:
    registry, opts = build((), 0, 64 << 20, False)
    expert = Expert(analyzers=[_Recorder])
    result = expert.add_all(iter_capture([str(CAPTURE)], registry, opts, observers=[expert]))
    frames = [m.frame for m in iter_capture([str(CAPTURE)], *build((), 0, 64 << 20, False))]
    recorder = expert.analyzers[0]
    assert isinstance(recorder, _Recorder)
    assert recorder.frames == frames and result.messages == len(frames)
    assert sorted(recorder.ended) == sorted({m.stream for m in iter_capture([str(CAPTURE)], registry, opts)})
    assert result.charts["recorded"] == len(frames)
    assert result.charts["time"]["origin"] == result.first_ts
    first = result.findings[0]
    assert first.frames == list(range(20)) and first.count == 1  # evidence is capped


def test_expert_json_is_strict_and_whole() -> None:
    r = _run("expert", "-F", "json", str(CAPTURE))
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert set(data) == {"messages", "first_ts", "last_ts", "findings", "charts"}
    assert data["messages"] > 0
    charts = data["charts"]
    assert charts["time"]["bins"] == len(charts["io"]["messages"]["kafka"])
    assert sum(charts["io"]["messages"]["kafka"]) == data["messages"]
    for f in data["findings"]:
        assert set(f) >= {"key", "severity", "category", "summary", "frames", "streams", "values", "hint"}


def test_expert_text_and_output_file(tmp_path: Path) -> None:
    r = _run("expert", "--no-color", str(CAPTURE))
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith(f"{CAPTURE}: ")
    out = tmp_path / "findings.json"
    r = _run("expert", "-F", "json", "-o", str(out), "--severity", "error", str(CAPTURE))
    assert r.exit_code == 0 and r.output == ""
    assert all(f["severity"] == "error" for f in json.loads(out.read_text())["findings"])


def test_report_refuses_without_output_or_over_a_file(tmp_path: Path) -> None:
    r = _run("report", str(CAPTURE))
    assert isinstance(r.exception, UsageError) and "needs -o FILE" in str(r.exception)
    there = tmp_path / "r.html"
    there.write_text("keep")
    r = _run("report", "-o", str(there), str(CAPTURE))
    assert isinstance(r.exception, UsageError) and "--overwrite" in str(r.exception)
    assert there.read_text() == "keep"


def test_the_display_filter_limits_what_the_analyzers_see() -> None:
    anomalies = ROOT / "captures" / "kafka" / "expert_producer_anomalies.pcap"
    every = json.loads(_run("expert", "-F", "json", str(anomalies)).output)
    one = json.loads(_run("expert", "-F", "json", "-Y", 'kafka.client_id == "producer-acks0"', str(anomalies)).output)
    assert len({f["key"] for f in every["findings"]}) > 1
    assert [f["key"] for f in one["findings"]] == ["kafka.producer.acks_zero"]
    assert one["messages"] < every["messages"]


def test_client_and_member_ids_are_kept_cut(tmp_path: Path) -> None:
    """The tables kept client, member and transactional ids whole: 300 connections of a Produce
    and a JoinGroup with 32 KB ids (39 MB) gave 21 MB of `expert -F json` (now 0.9 MB) and 1,500
    of them 1.05 GB resident (now 0.79 GB). They are cut as stats cuts names (short_name)."""
    import struct

    from pcapgen import Pkt, TcpConn, ethernet, write_pcap

    def s16(b: bytes) -> bytes:
        return struct.pack(">h", len(b)) + b

    def request(api_key: int, version: int, cid: bytes, body: bytes) -> bytes:
        payload = struct.pack(">hhi", api_key, version, 1) + s16(cid) + body
        return struct.pack(">i", len(payload)) + payload

    pkts = []
    for i in range(3):
        ident = b"%d" % i * 16_000
        c = TcpConn(cport=30000 + i)
        join = s16(b"g") + struct.pack(">ii", 10000, 300000) + s16(ident) + s16(ident) + s16(b"consumer")
        join += struct.pack(">i", 1) + s16(b"range") + struct.pack(">i", 0)
        produce = s16(ident) + struct.pack(">hi", 1, 30000) + struct.pack(">i", 0)
        for p in [*c.handshake(), c.segment(True, request(0, 3, ident, produce)),
                  c.segment(True, request(11, 5, ident, join))]:
            pkts.append(Pkt(1.0 + len(pkts) / 1000, ethernet(p)))
    path = tmp_path / "ids.pcap"
    write_pcap(str(path), pkts)
    res = _run("expert", "-F", "json", str(path))
    assert res.exit_code == 0, res.output
    found = json.loads(res.output)

    def strings(v: Any) -> list[str]:
        if isinstance(v, str):
            return [v]
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else []
        return [s for x in items for s in strings(x)]

    assert found["findings"]
    assert max(len(s) for s in strings(found)) < 1300  # an id cut to 1,024 characters in a sentence
