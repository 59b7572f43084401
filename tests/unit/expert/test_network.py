"""The network analyzer and the transport facts under it: retransmissions, zero windows and
resets counted per conversation agree frame for frame with tshark's TCP analysis
(tcp.analysis.retransmission, tcp.analysis.zero_window, tcp.flags.reset) on the own and shared
captures, on shuffled copies of one (drops, duplicates, reordering) and on a built capture with
one case of each; the findings name the stream, the endpoints, the side and the frames."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import dpkt
import pytest
from pcapgen import ACK, FIN, PSH, RST, SYN, Pkt, ethernet, write_pcap
from support import CAPTURES, SHARED_CAPTURES, shared_path, sidecar_decode_as

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import CaptureFile
from kdissect.dissect.base import Options
from kdissect.expert.analyzers import network
from kdissect.expert.analyzers.network import (
    RESET,
    RESET_AFTER_CLOSE,
    RETRANSMISSIONS,
    ZERO_WINDOW,
    Network,
    Record,
)
from kdissect.expert.catalogue import Finding
from kdissect.expert.engine import Expert, Result
from kdissect.model import Severity
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.stream import flow
from kdissect.stream.flow import Trouble
from kdissect.stream.tracker import Tracker

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
FILTERS = {"retransmissions": "tcp.analysis.retransmission", "zero_windows": "tcp.analysis.zero_window",
           "resets": "tcp.flags.reset==1"}
PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq", "tls")
OWN = sorted(p for p in CAPTURES.glob("*/*") if ".pcap" in p.name)
SHARED = sorted(p for d in PROTOCOLS if (SHARED_CAPTURES / d).is_dir()
                for p in (SHARED_CAPTURES / d).iterdir() if ".pcap" in p.name)
CLIENT, BROKER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)


# -- helpers -----------------------------------------------------------------------------------

def analyse(path: Path) -> Result:
    expert = Expert(analyzers=[Network])
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
    return expert.add_all(dissect_file(str(path), registry, Options(), observers=[expert]))


def of(result: Result, key: str) -> list[Finding]:
    return [f for f in result.findings if f.kind.key == key]


class _Upper:
    def opened(self, conv: Any) -> None: ...

    def events(self, conv: Any, side: int, events: Any) -> None: ...

    def closed(self, conv: Any) -> None: ...


def tracked(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[int]]:
    """The frames of each kind of trouble the tracker counts over a capture (every frame named)."""
    monkeypatch.setattr(flow, "MAX_TROUBLE_FRAMES", 1 << 30)
    tracker: Tracker[Any] = Tracker(_Upper())
    troubles: dict[int, Trouble] = {}
    with CaptureFile(str(path)) as cap:
        for frame in cap:
            seg = decode(frame)
            if seg is not None:
                conv = tracker.segment(seg)
                if conv.trouble is not None:
                    troubles[id(conv.trouble)] = conv.trouble
    return {kind: {n for t in troubles.values() for n in getattr(t, kind).frames} for kind in FILTERS}


def tshark(path: Path) -> dict[str, set[int]]:
    """The frames tshark flags with each filter of FILTERS (one run)."""
    fields = ["-e", "frame.number", "-e", "tcp.analysis.retransmission", "-e", "tcp.analysis.zero_window",
              "-e", "tcp.flags.reset"]
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", *fields], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    got: dict[str, set[int]] = {kind: set() for kind in FILTERS}
    for line in out.splitlines():
        number, retransmission, zero_window, reset = (line.split("\t") + ["", "", ""])[:4]
        for kind, value in (("retransmissions", retransmission), ("zero_windows", zero_window),
                            ("resets", reset)):
            if value and value not in ("0", "False"):
                got[kind].add(int(number))
    return got


def segment(ts: float, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
            payload: bytes = b"", window: int = 64000) -> Pkt:
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, ack=ack, flags=flags, win=window, data=payload)
    ip = dpkt.ip.IP(src=bytes(map(int, src[0].split("."))), dst=bytes(map(int, dst[0].split("."))), p=6,
                    data=tcp)
    ip.len = 20 + len(bytes(tcp))
    return Pkt(ts, ethernet(bytes(ip)))


def api_versions(corr: int) -> tuple[bytes, bytes]:
    """A Kafka ApiVersions v0 request and its response."""
    body = struct.pack(">hhih", 18, 0, corr, 1) + b"t"
    resp = struct.pack(">ihi", corr, 0, 0)
    return struct.pack(">i", len(body)) + body, struct.pack(">i", len(resp)) + resp


def built(path: Path) -> Path:
    """Stream 0: a request retransmitted (frame 6), the broker's zero window (frame 8), the
    broker's reset (frame 12). Stream 1: a reset by the client after the FIN exchange (frame 23)."""
    req1, resp1 = api_versions(1)
    req2, resp2 = api_versions(2)
    c, b = CLIENT, BROKER
    pkts = [
        segment(1.0, c, b, 100, 0, SYN), segment(1.001, b, c, 900, 101, SYN | ACK),
        segment(1.002, c, b, 101, 901, ACK),
        segment(2.0, c, b, 101, 901, PSH | ACK, req1),
        segment(2.1, b, c, 901, 101, ACK),  # the ACK is too early: it leaves req1 unacknowledged
        segment(2.5, c, b, 101, 901, PSH | ACK, req1),  # 6: retransmitted
        segment(2.501, b, c, 901, 101 + len(req1), PSH | ACK, resp1),
        segment(2.6, b, c, 901 + len(resp1), 101 + len(req1), ACK, window=0),  # 8: zero window
        segment(2.7, b, c, 901 + len(resp1), 101 + len(req1), ACK),
        segment(3.0, c, b, 101 + len(req1), 901 + len(resp1), PSH | ACK, req2),
        segment(3.001, b, c, 901 + len(resp1), 101 + 2 * len(req1), PSH | ACK, resp2),
        segment(3.1, b, c, 901 + 2 * len(resp1), 0, RST),  # 12: reset by the broker
    ]
    c = (CLIENT[0], 40001)
    s, a = 5000, 7000
    pkts += [
        segment(4.0, c, b, s, 0, SYN), segment(4.001, b, c, a, s + 1, SYN | ACK),
        segment(4.002, c, b, s + 1, a + 1, ACK),
        segment(4.1, c, b, s + 1, a + 1, PSH | ACK, req1),
        segment(4.101, b, c, a + 1, s + 1 + len(req1), PSH | ACK, resp1),
        segment(4.2, c, b, s + 1 + len(req1), a + 1 + len(resp1), ACK),
        segment(5.0, c, b, s + 1 + len(req1), a + 1 + len(resp1), FIN | ACK),
        segment(5.001, b, c, a + 1 + len(resp1), s + 2 + len(req1), FIN | ACK),
        segment(5.002, c, b, s + 2 + len(req1), a + 2 + len(resp1), ACK),
        segment(5.1, c, b, s + 2 + len(req1), 0, RST),  # 22
        segment(5.2, c, b, s + 2 + len(req1), 0, RST),  # 23
    ]
    write_pcap(str(path), pkts)
    return path


def shuffled(src: Path, dst: Path, seed: int) -> Path:
    """A copy of a capture with 3% of its frames dropped, 5% sent again a few frames later and
    3% swapped with the one before; the timestamps stay in order, spaced 0.1 ms to 200 ms."""
    rnd = random.Random(seed)
    with CaptureFile(str(src)) as cap:
        frames = [(f.linktype, f.data) for f in cap]
    out: list[bytes] = []
    later: list[tuple[int, bytes]] = []
    for i, (_, data) in enumerate(frames):
        x = rnd.random()
        if x < 0.03:
            continue
        if x < 0.08:
            later.append((i + rnd.randint(1, 8), data))
        out.insert(len(out) - 1 if x < 0.11 and out else len(out), data)
        out += [d for when, d in later if when == i]
        later = [(when, d) for when, d in later if when != i]
    ts, pkts = 1000.0, []
    for data in out:
        ts += rnd.choice((0.0001, 0.001, 0.01, 0.2))
        pkts.append(Pkt(ts, data))
    write_pcap(str(dst), pkts, linktype=frames[0][0])
    return dst


# -- the transport facts against tshark --------------------------------------------------------

@needs_tshark
@pytest.mark.parametrize("path", OWN + SHARED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_trouble_frames_are_tsharks(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracked(path, monkeypatch) == tshark(path)


@needs_tshark
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_trouble_frames_of_a_shuffled_capture(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shuffled(CAPTURES / "kafka" / "scripted_ck_sasl.pcap", tmp_path / "shuffled.pcap", seed)
    ours = tracked(path, monkeypatch)
    assert ours == tshark(path)
    assert ours["retransmissions"]


@needs_tshark
def test_the_built_capture_is_tsharks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = built(tmp_path / "built.pcap")
    assert tracked(path, monkeypatch) == tshark(path) == {
        "retransmissions": {6}, "zero_windows": {8}, "resets": {12, 22, 23}}


def test_trouble_survives_the_conversations_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The RSTs after the FIN exchange come to a conversation that has ended: they count in it."""
    frames = tracked(built(tmp_path / "built.pcap"), monkeypatch)
    assert {22, 23} <= frames["resets"]


# -- the findings ------------------------------------------------------------------------------

def test_findings_of_the_built_capture(tmp_path: Path) -> None:
    result = analyse(built(tmp_path / "built.pcap"))
    client, broker = "10.0.0.1:40000", "10.0.0.2:9092"
    [retransmitted] = of(result, RETRANSMISSIONS.key)
    assert retransmitted.frames == [6] and retransmitted.streams == [0]
    assert retransmitted.severity == Severity.NOTE  # 1 of 12 segments: too few to be a warning
    assert retransmitted.values == {"stream": 0, "client": client, "server": broker, "retransmissions": 1,
                                    "segments": 12, "share": 0.0833, "by_client": 1, "by_broker": 0}
    assert "1 of its 12 segments retransmitted (8.3%), 1 by the client" in retransmitted.summary
    [zero] = of(result, ZERO_WINDOW.key)
    assert zero.frames == [8] and zero.values["slow"] == "broker" and zero.values["by_broker"] == 1
    assert f"the broker {broker} (1 segment) advertised a zero window" in zero.summary
    [reset] = of(result, RESET.key)
    assert reset.severity == Severity.WARNING and reset.frames == [12] and reset.values["reset_by"] == "broker"
    assert reset.summary == f"kafka stream 0 (client {client}, broker {broker}) was reset by the broker (frame 12)"
    [closed] = of(result, RESET_AFTER_CLOSE.key)
    assert closed.severity == Severity.CHAT and closed.frames == [22, 23] and closed.streams == [1]
    assert closed.values["reset_by"] == "client" and closed.count == 2
    assert result.charts["tcp"] == [
        {"stream": 0, "protocol": "kafka", "client": client, "server": broker, "retransmissions": 1,
         "zero_windows": 1, "reset_by": "broker"},
        {"stream": 1, "protocol": "kafka", "client": "10.0.0.1:40001", "server": broker, "retransmissions": 0,
         "zero_windows": 0, "reset_by": "client"},
    ]


def test_resets_of_a_real_kafka_capture() -> None:
    """A SASL session the client aborts (stream 0), and three it resets after closing them."""
    result = analyse(CAPTURES / "kafka" / "scripted_ck_sasl.pcap")
    [reset] = of(result, RESET.key)
    assert (reset.streams, reset.frames, reset.values["reset_by"]) == ([0], [16], "client")
    closed = sorted((f.streams[0], f.frames) for f in of(result, RESET_AFTER_CLOSE.key))
    assert closed == [(3, [77]), (4, [68]), (7, [136, 138])]
    assert not of(result, RETRANSMISSIONS.key) and not of(result, ZERO_WINDOW.key)


def test_a_real_zookeeper_retransmission() -> None:
    path = shared_path("captures", "zookeeper", "twitter__zktraffic__setwatches.pcap")
    result = analyse(path)
    [retransmitted] = of(result, RETRANSMISSIONS.key)
    assert retransmitted.frames == [7] and retransmitted.protocol == "zookeeper"
    assert retransmitted.values["by_client"] == 1 and retransmitted.values["segments"] == 8
    [reset] = of(result, RESET.key)
    assert reset.values["reset_by"] == "both" and reset.frames == [4, 5, 6, 8]
    assert "server 127.0.0.1:2181" in reset.summary


def test_a_real_pulsar_capture_reset_by_the_broker_after_close() -> None:
    path = shared_path("captures", "pulsar", "deepflowio__deepflow__pulsar-producer.pcap")
    closed = of(analyse(path), RESET_AFTER_CLOSE.key)
    assert sorted((f.streams[0], f.frames, f.values["reset_by"]) for f in closed) == [
        (0, [62, 63], "broker"), (1, [68, 69], "broker")]


def test_a_healthy_capture_has_no_finding() -> None:
    result = analyse(CAPTURES / "kafka" / "expert_healthy.pcap")
    assert result.findings == [] and result.charts["tcp"] == []


def _record(retransmissions: int, segments: int) -> Record:
    trouble = Trouble()
    for i in range(retransmissions):
        trouble.retransmissions.add(0, i + 1, float(i))
    return Record(0, "kafka", "c:1", "b:2", "broker", 0, segments, trouble)


@pytest.mark.parametrize(("count", "segments", "severity"), [
    (1, 100, Severity.NOTE), (1, 99, Severity.NOTE), (3, 299, Severity.WARNING), (3, 300, Severity.NOTE),
    (9, 10_000, Severity.NOTE), (10, 10_000, Severity.WARNING)])
def test_retransmission_severity(count: int, segments: int, severity: Severity) -> None:
    finding = network._retransmissions(RETRANSMISSIONS, _record(count, segments))
    assert finding is not None and finding.severity == severity and finding.count == count
    assert finding.frames == list(range(1, min(count, flow.MAX_TROUBLE_FRAMES) + 1))


def test_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_FINDINGS connections of a kind share one finding; past MAX_TROUBLED they are
    only counted; past MAX_CONNECTIONS the oldest are read at once."""
    monkeypatch.setattr(network, "MAX_CONNECTIONS", 5)
    monkeypatch.setattr(network, "MAX_TROUBLED", 30)
    analyzer = Network(Expert(analyzers=[]).clock)
    for index in range(40):
        conv: flow.Conversation[Any] = flow.Conversation(index, (b"\x0a\x00\x00\x01", 40000 + index), (b"\x0a\x00\x00\x02", 9092))
        conv.client, conv.packets = 0, 50
        conv.troubles().resets.add(1, 100 + index, float(index))
        conv.app = type("App", (), {"dissector": type("D", (), {"name": "kafka"})(), "quiet": False})()
        analyzer.conversation_ended(conv)
        assert len(analyzer.open) <= 5
    findings = analyzer.finish()
    assert len(findings) == network.MAX_FINDINGS + 1
    rest = findings[-1]
    assert rest.values == {"connections": 20, "segments": 20} and rest.severity == Severity.WARNING
    assert len(analyzer.charts()["tcp"]) == 30


def test_a_conversation_without_a_protocol_is_left_out() -> None:
    analyzer = Network(Expert(analyzers=[]).clock)
    conv: flow.Conversation[Any] = flow.Conversation(0, (b"\x0a\x00\x00\x01", 1), (b"\x0a\x00\x00\x02", 2))
    conv.troubles().resets.add(0, 1, 0.0)
    analyzer.conversation_ended(conv)
    analyzer.conversation_ended(object())
    assert analyzer.finish() == [] and analyzer.charts() == {"tcp": []}
