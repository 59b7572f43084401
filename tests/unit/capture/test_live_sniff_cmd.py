"""`kdissect sniff` and `kdissect interfaces` end to end through click, with the kernel capture
replaced by prepared frames (the real capture is exercised by tests/live)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pcapgen import TcpConn, ethernet, kafka_request, kafka_response

from kdissect.capture import live
from kdissect.capture.livepacket import Packet, Stats
from kdissect.capture.pcapfile import CaptureFile, RawFrame
from kdissect.cli import cli

APIVERSIONS_V0_BODY = struct.pack(">hi", 0, 1) + struct.pack(">hhh", 18, 0, 3)


def kafka_frames(pairs: int) -> list[RawFrame]:
    conn = TcpConn("127.0.0.1", "127.0.0.1", 40000, 9092)
    pkts = conn.handshake()
    for corr in range(1, pairs + 1):
        pkts.append(conn.segment(True, kafka_request(18, 0, corr, "live-test")))
        pkts.append(conn.segment(False, kafka_response(corr, APIVERSIONS_V0_BODY)))
    return [RawFrame(i + 1, 1000.0 + i * 0.001, 1, ethernet(p), len(ethernet(p))) for i, p in enumerate(pkts)]


class FakeLive:
    """LiveCapture's interface over prepared frames, two per batch; idles until stopped."""

    frames: list[RawFrame] = []
    opened: list[tuple[str, str, int]] = []

    def __init__(self, interface: str, bpf_filter: str = "", buffer_mib: int = 64) -> None:
        self.opened.append((interface, bpf_filter, buffer_mib))
        self.linktype = 1
        self.stats = Stats(received=len(self.frames), dropped=3)

    def __enter__(self) -> FakeLive:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def read_stats(self) -> Stats:
        return self.stats

    def batches(self, stop: Any) -> Any:
        pkts = [Packet(f, round(f.ts * 1e9)) for f in self.frames]
        for i in range(0, len(pkts), 2):
            yield pkts[i : i + 2]
        while not stop():
            yield []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeLive]:
    FakeLive.frames = kafka_frames(3)
    FakeLive.opened = []
    monkeypatch.setattr(live, "LiveCapture", FakeLive)
    return FakeLive


def test_sniff_jsonl_streams_matched_messages(fake: type[FakeLive], tmp_path: Path) -> None:
    out = tmp_path / "s.pcap"
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-f", "tcp port 9092", "--format", "jsonl",
                                   "--duration", "0.3", "-w", str(out)])
    assert res.exit_code == 0, res.output
    msgs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(m["kind"], m["info"]["corr"]) for m in msgs] == [
        ("request", 1), ("response", 1), ("request", 2), ("response", 2), ("request", 3), ("response", 3)]
    assert all(m["info"]["op"] == "ApiVersions" for m in msgs)
    responses = [m for m in msgs if m["kind"] == "response"]
    assert [r["match"]["frame"] for r in responses] == [4, 6, 8]
    assert all(r["match"]["rtt_ms"] == pytest.approx(1.0, abs=0.01) for r in responses)
    assert fake.opened == [("lo", "tcp port 9092", 64)]
    last = res.stderr.strip().splitlines()[-1]
    assert last == f"kdissect: 9 packets, 6 messages, 3 dropped by the kernel, 9 written to {out}"
    assert [f.data for f in CaptureFile(str(out))] == [f.data for f in fake.frames]


def test_sniff_count_stops_early(fake: type[FakeLive]) -> None:
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-F", "jsonl", "-c", "3"])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 3
    assert "3 messages" in res.stderr


def test_sniff_text_shows_response_time(fake: type[FakeLive]) -> None:
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "--no-color", "-c", "2"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "ApiVersions v0 request" in lines[0]
    assert lines[1].endswith("(1.0 ms)")


def test_interfaces_lists_loopback_and_any() -> None:
    res = CliRunner().invoke(cli, ["interfaces"])
    assert res.exit_code == 0
    names = [line.split()[1] if line.split()[0].isdigit() else line.split()[0] for line in res.stdout.splitlines()]
    assert "any" in names
    if "lo" in names:
        lo = next(line for line in res.stdout.splitlines() if " lo " in f" {line} ")
        assert "loopback" in lo and "127.0.0.1/8" in lo


def test_sniff_display_filter(fake: type[FakeLive]) -> None:
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-F", "jsonl", "--duration", "0.2",
                                   "-Y", "kafka.header.correlation_id == 2"])
    assert res.exit_code == 0, res.output
    msgs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(m["kind"], m["info"]["corr"]) for m in msgs] == [("request", 2), ("response", 2)]
    assert res.stderr.strip().splitlines()[-1] == \
        "kdissect: 9 packets, 6 messages, 2 shown, 3 dropped by the kernel"


def test_sniff_writes_a_ring_buffer_of_pcapng_files(fake: type[FakeLive], tmp_path: Path) -> None:
    out = tmp_path / "ring.pcapng"
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-F", "jsonl", "--duration", "0.3", "-w", str(out),
                                   "-b", "packets:4", "-b", "files:2"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in tmp_path.iterdir())
    # 9 packets, 4 a file: files 1 and 2 are full, file 3 holds the last one; file 1 was deleted
    assert [n.split("_")[1] for n in names] == ["00002", "00003"]
    assert all(n.startswith("ring_") and n.endswith(".pcapng") for n in names)
    frames = [f.data for n in names for f in CaptureFile(str(tmp_path / n))]
    assert frames == [f.data for f in fake.frames[4:]]
    assert res.stderr.strip().splitlines()[-1].endswith(
        f"9 written to 3 files (2 kept), the last {tmp_path / names[-1]}")


def test_sniff_dash_p_writes_pcap(fake: type[FakeLive], tmp_path: Path) -> None:
    out = tmp_path / "s.pcap"
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-F", "jsonl", "--duration", "0.2", "-w", str(out), "-P"])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:4] == struct.pack("=I", 0xA1B23C4D)
    assert [f.data for f in CaptureFile(str(out))] == [f.data for f in fake.frames]


def test_sniff_ring_buffer_needs_a_file(fake: type[FakeLive]) -> None:
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "-b", "filesize:10"])
    assert res.exit_code != 0 and "needs a file to write (-w FILE)" in str(res.exception)
    assert fake.opened == []  # refused before capturing


@pytest.mark.parametrize("seconds", ["nan", "inf", "1e400"])
def test_sniff_duration_must_end(seconds: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--duration nan (or inf) passed the range check and the capture never stopped."""
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the capture was opened")

    monkeypatch.setattr(live, "LiveCapture", never)
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "--duration", seconds])
    assert res.exit_code == 2 and "is not a number of seconds" in res.output


def test_sniff_backend_pcap_is_chosen(fake: type[FakeLive], monkeypatch: pytest.MonkeyPatch) -> None:
    from kdissect.capture import pcaplive

    class FakePcap(FakeLive):
        pass

    monkeypatch.setattr(pcaplive, "PcapCapture", FakePcap)
    FakePcap.opened = []
    res = CliRunner().invoke(cli, ["sniff", "-i", "en0", "--backend", "pcap", "-F", "jsonl", "-c", "2"])
    assert res.exit_code == 0, res.output
    assert FakePcap.opened == [("en0", "", 64)] and fake.opened == []
    assert len(res.stdout.splitlines()) == 2


def test_sniff_backend_pcap_without_libpcap(monkeypatch: pytest.MonkeyPatch) -> None:
    from kdissect.capture import bpf

    monkeypatch.setattr(bpf, "_libpcap", lambda: None)
    res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "--backend", "pcap"])
    assert res.exit_code != 0
    assert "the pcap backend needs libpcap" in str(res.exception)


def test_sniff_time_column(fake: type[FakeLive]) -> None:
    def times(*args: str) -> list[str]:
        res = CliRunner().invoke(cli, ["sniff", "-i", "lo", "--no-color", "--duration", "0.2", *args])
        assert res.exit_code == 0, res.output
        return [line.split()[1] for line in res.stdout.splitlines()]

    # frames 1 ms apart from 1000.0; the messages start at frame 4, after the handshake
    assert times() == ["0.003000", "0.004000", "0.005000", "0.006000", "0.007000", "0.008000"]
    corr2 = ("-Y", "kafka.header.correlation_id == 2")
    assert times("-t", "r", *corr2) == ["0.005000", "0.006000"]
    assert times("-t", "d", *corr2) == ["0.001000", "0.001000"]  # after response 1, shown or not
    assert times("-t", "dd", *corr2) == ["0.000000", "0.001000"]
    assert times("-t", "e", *corr2) == ["1000.005000", "1000.006000"]
