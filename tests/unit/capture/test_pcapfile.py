from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from pcapgen import (
    Pkt,
    TcpConn,
    ethernet,
    pcapng_epb,
    pcapng_idb,
    pcapng_section,
    sll,
    tcp_ip,
    write_pcap,
)

from kdissect.capture.pcapfile import CaptureFile
from kdissect.errors import UsageError


def _pkts() -> list[Pkt]:
    conn = TcpConn()
    return [Pkt(1700000000.123456 + i, ethernet(p)) for i, p in enumerate(conn.handshake())]


@pytest.mark.parametrize("nano", [False, True])
@pytest.mark.parametrize("big_endian", [False, True])
def test_pcap_variants(tmp_path: Path, nano: bool, big_endian: bool) -> None:
    path = tmp_path / "c.pcap"
    pkts = _pkts()
    write_pcap(str(path), pkts, nano=nano, big_endian=big_endian)
    with CaptureFile(str(path)) as cap:
        frames = list(cap)
        assert cap.warnings == []
    assert [f.number for f in frames] == [1, 2, 3]
    assert frames[0].data == pkts[0].data
    assert frames[0].linktype == 1
    assert abs(frames[1].ts - pkts[1].ts) < 1e-6


def test_gzip_capture(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    write_pcap(str(path), _pkts())
    gz = tmp_path / "c.pcap.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    with CaptureFile(str(gz)) as cap:
        assert len(list(cap)) == 3


def test_cut_file_decodes_up_to_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    write_pcap(str(path), _pkts())
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with CaptureFile(str(path)) as cap:
        frames = list(cap)
        assert len(frames) == 2
        assert len(cap.warnings) == 1 and "cut" in cap.warnings[0]


def test_snaplen_keeps_wire_length(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    pkt = ethernet(tcp_ip("10.0.0.1", "10.0.0.2", 1, 9092, 1, 1, 0x18, b"x" * 500))
    write_pcap(str(path), [Pkt(1.0, pkt)], snaplen=100)
    with CaptureFile(str(path)) as cap:
        (frame,) = list(cap)
    assert len(frame.data) == 100 and frame.wirelen == len(pkt)


def test_pcapng_interfaces_and_sections(tmp_path: Path) -> None:
    ip = _pkts()[0].data[14:]
    blob = (
        pcapng_section() + pcapng_idb(1) + pcapng_idb(113, tsresol=9)
        + pcapng_epb(0, 10.5, ethernet(ip)) + pcapng_epb(1, 11.25, sll(ip), ticks_per_s=1e9)
        + pcapng_section() + pcapng_idb(101, tsresol=3)
        + pcapng_epb(0, 12.0, ip, ticks_per_s=1e3)
    )
    path = tmp_path / "c.pcapng"
    path.write_bytes(blob)
    with CaptureFile(str(path)) as cap:
        frames = list(cap)
        assert cap.warnings == []
    assert [f.linktype for f in frames] == [1, 113, 101]
    assert [round(f.ts, 6) for f in frames] == [10.5, 11.25, 12.0]


def test_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "x.pcap"
    path.write_text("hello world")
    with pytest.raises(UsageError, match="not a pcap"):
        CaptureFile(str(path))


def test_missing_file() -> None:
    with pytest.raises(UsageError, match="cannot open"):
        CaptureFile("/nonexistent/file.pcap")
