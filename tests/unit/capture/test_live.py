"""Live capture pieces that run without privileges: ring block parsing, the pcap writer, the
interface list, the error messages and the capture thread's queue."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from pcapgen import ethernet, tcp_ip

from kdissect.capture import live
from kdissect.capture.ifaces import ARPHRD_LOOPBACK, list_interfaces
from kdissect.capture.live import Drainer, parse_block
from kdissect.capture.livepacket import Packet
from kdissect.capture.pcapfile import CaptureFile, RawFrame
from kdissect.capture.pcapwriter import PcapWriter
from kdissect.errors import UsageError

PKT = ethernet(tcp_ip("127.0.0.1", "127.0.0.1", 40000, 9092, 1, 1, 0x18, b"hello"))


def tpacket3(data: bytes, sec: int, nsec: int, wirelen: int, status: int = 0, tci: int = 0,
             tpid: int = 0, last: bool = False) -> bytes:
    """One tpacket3_hdr + sockaddr_ll + packet, laid out as the kernel does (mac at offset 82)."""
    mac = 82
    size = (mac + len(data) + 15) & ~15
    hdr = struct.pack("=IIIIIIHHIIHH", 0 if last else size, sec, nsec, len(data), wirelen, status, mac, mac,
                      0, tci, tpid, 0)
    return (hdr + bytes(mac - len(hdr)) + data).ljust(size, b"\0")


def block(*pkts: bytes) -> bytes:
    head = struct.pack("=IIIII", 1, 0, live.TP_STATUS_USER, len(pkts), 48)
    return (head + bytes(48 - len(head)) + b"".join(pkts)).ljust(4096, b"\0")


def test_parse_block_frames_and_times() -> None:
    buf = block(tpacket3(PKT, 1_700_000_000, 123_456_789, len(PKT)),
                tpacket3(PKT[:20], 1_700_000_001, 5, 1500, last=True))
    pkts = parse_block(buf, 0, len(buf), live.LINKTYPE_ETHERNET, 7)
    assert [p.frame.number for p in pkts] == [7, 8]
    assert pkts[0].frame.data == PKT and pkts[0].frame.wirelen == len(PKT)
    assert pkts[0].ts_ns == 1_700_000_000_123_456_789
    assert pkts[0].frame.ts == pytest.approx(1_700_000_000.123456789)
    assert pkts[1].frame.data == PKT[:20] and pkts[1].frame.wirelen == 1500


def test_parse_block_puts_back_a_stripped_vlan_tag() -> None:
    status = live.TP_STATUS_VLAN_VALID | live.TP_STATUS_VLAN_TPID_VALID
    buf = block(tpacket3(PKT, 1, 0, len(PKT), status=status, tci=0x2064, tpid=0x88A8, last=True))
    (pkt,) = parse_block(buf, 0, len(buf), live.LINKTYPE_ETHERNET, 1)
    assert pkt.frame.data == PKT[:12] + b"\x88\xa8\x20\x64" + PKT[12:]
    assert pkt.frame.wirelen == len(PKT) + 4


def test_parse_block_stops_at_the_block_end() -> None:
    buf = block(tpacket3(PKT, 1, 0, len(PKT)), tpacket3(PKT, 2, 0, len(PKT), last=True))
    cut = 48 + len(tpacket3(PKT, 1, 0, len(PKT))) + 60  # the second packet's bytes are past `end`
    assert len(parse_block(buf, 0, cut, live.LINKTYPE_ETHERNET, 1)) == 1


def test_pcap_writer_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "live.pcap"
    with PcapWriter(str(path), live.LINKTYPE_ETHERNET) as w:
        w.write(PKT, len(PKT), 1_700_000_000_000_000_001)
        w.write(PKT[:30], 9000, 1_700_000_002_500_000_000)
    frames = list(CaptureFile(str(path)))
    assert [(f.number, f.linktype, f.data, f.wirelen) for f in frames] == [
        (1, 1, PKT, len(PKT)), (2, 1, PKT[:30], 9000)]
    assert frames[0].ts == 1_700_000_000 + 1 * 1e-9
    assert frames[1].ts == 1_700_000_002.5


def test_pcap_writer_unwritable_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write"):
        PcapWriter(str(tmp_path / "no" / "such" / "dir.pcap"), 1)


def test_interfaces_include_loopback() -> None:
    lo = [i for i in list_interfaces() if i.hatype == ARPHRD_LOOPBACK]
    if not lo:
        pytest.skip("no loopback interface")
    assert lo[0].index == socket.if_nametoindex(lo[0].name)
    assert lo[0].up and lo[0].ethernet_framing and lo[0].link == "loopback"
    assert any(a.startswith("127.") and a.endswith("/8") for a in lo[0].addresses)


def test_no_such_interface() -> None:
    with pytest.raises(UsageError, match="no such interface: 'kd-none0'"):
        live.LiveCapture("kd-none0")


def test_no_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    lo = next((i.name for i in list_interfaces() if i.hatype == ARPHRD_LOOPBACK and i.up), None)
    if lo is None:
        pytest.skip("no loopback interface")

    def denied(*args: object) -> socket.socket:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(live.socket, "socket", denied)
    with pytest.raises(UsageError, match="no permission to capture on .*CAP_NET_RAW"):
        live.LiveCapture(lo)


class FakeCapture:
    """Stands in for LiveCapture: hands out prepared batches, then idles until stopped."""

    def __init__(self, batches: list[list[Packet]]) -> None:
        self.todo = batches
        self.after_stop = 0

    def batches(self, stop: object) -> object:
        assert callable(stop)
        yield from self.todo
        while not stop():
            time.sleep(0.01)
            yield []
        self.after_stop += 1


def packets(n: int, first: int = 1) -> list[Packet]:
    return [Packet(RawFrame(first + i, float(i), 1, PKT, len(PKT)), i) for i in range(n)]


def test_drainer_hands_out_batches_in_order_and_ends_after_stop() -> None:
    stop = threading.Event()
    cap = FakeCapture([packets(2), packets(3, 3)])
    d = Drainer(cap, stop.is_set)  # type: ignore[arg-type]
    got: list[int] = []
    for batch in d.batches(poll_s=0.01):
        got += [p.frame.number for p in batch]
        if len(got) == 5:
            stop.set()
    d.close()
    assert got == [1, 2, 3, 4, 5]
    assert cap.after_stop == 1 and d.overflow == 0 and d.backlog == 0


def test_drainer_counts_what_overflows_the_backlog() -> None:
    stop = threading.Event()
    d = Drainer(FakeCapture([packets(2), packets(2, 3)]), stop.is_set,  # type: ignore[arg-type]
                max_backlog=3 * len(PKT))
    deadline = time.monotonic() + 10
    while d.overflow < 2 and time.monotonic() < deadline:  # nothing is taken until both are offered
        time.sleep(0.01)
    stop.set()
    got = [p.frame.number for batch in d.batches(poll_s=0.01) for p in batch]
    d.close()
    assert got == [1, 2]
    assert d.overflow == 2
