"""The `-w` file of `kdissect sniff`: pcapng with the interface described, classic pcap with -P,
and dumpcap-style ring buffers (-b filesize/duration/packets/files), without a live capture."""

from __future__ import annotations

import shutil
import struct
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pcapgen import ethernet, tcp_ip

from kdissect.capture.pcapfile import CaptureFile
from kdissect.capture.pcapwriter import PcapngWriter
from kdissect.capture.ring import CaptureWriter, RingSpec, opener, parse_ring, ring_name
from kdissect.errors import UsageError

PKT = ethernet(tcp_ip("127.0.0.1", "127.0.0.1", 40000, 9092, 1, 1, 0x18, b"x" * 200))
T0 = 1_700_000_000_123_456_789


class Clock:
    """A monotonic clock and a wall clock that the test moves."""

    def __init__(self) -> None:
        self.t = 0.0
        self.wall = datetime(2024, 5, 6, 7, 8, 9)

    def mono(self) -> float:
        return self.t

    def now(self) -> datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.wall += timedelta(seconds=seconds)


def blocks(path: Path) -> list[tuple[int, bytes]]:
    """(type, body) of each block of a little-endian pcapng file."""
    raw = path.read_bytes()
    out, p = [], 0
    while p < len(raw):
        btype, blen = struct.unpack_from("<II", raw, p)
        assert blen >= 12 and blen % 4 == 0 and struct.unpack_from("<I", raw, p + blen - 4)[0] == blen
        out.append((btype, raw[p + 8 : p + blen - 4]))
        p += blen
    assert p == len(raw)
    return out


def options(body: bytes) -> dict[int, bytes]:
    out, p = {}, 0
    while p + 4 <= len(body):
        code, length = struct.unpack_from("<HH", body, p)
        if code == 0:
            break
        out[code] = body[p + 4 : p + 4 + length]
        p += 4 + length + (-length % 4)
    return out


# -- parsing -b ------------------------------------------------------------------------------


def test_parse_ring_options() -> None:
    assert parse_ring(()) is None
    assert parse_ring(["filesize:100", "files:3"]) == RingSpec(filesize_kb=100, files=3)
    assert parse_ring(["duration:1.5", "packets:10"]) == RingSpec(duration_s=1.5, packets=10)
    assert parse_ring(["filesize:1", "filesize:7"]) == RingSpec(filesize_kb=7)  # the last one counts


@pytest.mark.parametrize(("opts", "message"), [
    (["filesize"], "expected KEY:VALUE"),
    (["size:10"], "unknown ring buffer option 'size'"),
    (["filesize:0"], "at least 1"),
    (["filesize:1.5"], "at least 1"),
    (["packets:-3"], "at least 1"),
    (["duration:0"], "above 0"),
    (["duration:nan"], "above 0"),
    (["duration:inf"], "above 0"),
    (["files:3"], "needs -b filesize:KB"),
])
def test_parse_ring_refuses_bad_options(opts: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_ring(opts)


def test_ring_names_follow_dumpcap() -> None:
    when = datetime(2024, 1, 2, 3, 4, 5)
    assert ring_name("/tmp/out.pcapng", 1, when) == "/tmp/out_00001_20240102030405.pcapng"
    assert ring_name("cap", 42, when) == "cap_00042_20240102030405"
    assert ring_name("a.b/c.pcap", 100_001, when) == "a.b/c_00001_20240102030405.pcap"


# -- the pcapng file -----------------------------------------------------------------------------


def test_pcapng_names_the_interface_and_keeps_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "one.pcapng"
    with CaptureWriter(str(path), opener(False, 1, "lo", "tcp port 9092")) as w:
        w.write(PKT, len(PKT), T0)
        w.write(PKT[:40], 1500, T0 + 1)
    kinds = blocks(path)
    assert [b[0] for b in kinds] == [0x0A0D0D0A, 1, 6, 6]
    idb = kinds[1][1]
    linktype, _, snaplen = struct.unpack_from("<HHI", idb)
    assert (linktype, snaplen) == (1, 0)
    assert options(idb[8:]) == {2: b"lo", 11: b"\0tcp port 9092", 9: b"\x09"}
    epb = kinds[2][1]
    iface, hi, lo, caplen, wirelen = struct.unpack_from("<IIIII", epb)
    assert (iface, hi << 32 | lo, caplen, wirelen) == (0, T0, len(PKT), len(PKT))
    frames = list(CaptureFile(str(path)))
    assert [(f.linktype, f.data, f.wirelen) for f in frames] == [(1, PKT, len(PKT)), (1, PKT[:40], 1500)]
    assert frames[0].ts == pytest.approx(T0 / 1e9)
    assert w.describe() == str(path)


def test_pcap_with_dash_p(tmp_path: Path) -> None:
    path = tmp_path / "one.pcap"
    with CaptureWriter(str(path), opener(True, 101, "tun0", "")) as w:
        w.write(PKT[14:], len(PKT) - 14, T0)
    raw = path.read_bytes()
    assert struct.unpack_from("=I", raw)[0] == 0xA1B23C4D  # pcap, nanosecond timestamps
    (frame,) = CaptureFile(str(path))
    assert (frame.linktype, frame.data) == (101, PKT[14:])


def test_pcapng_writer_time_units(tmp_path: Path) -> None:
    path = tmp_path / "us.pcapng"
    with PcapngWriter(str(path)) as w:  # microseconds unless told
        w.write_ns(PKT, len(PKT), T0, 1)
        w.write(PKT, len(PKT), 1.5, 1)
    epbs = [struct.unpack_from("<IIIII", b) for t, b in blocks(path) if t == 6]
    assert [hi << 32 | lo for _, hi, lo, _, _ in epbs] == [T0 // 1000, 1_500_000]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_the_interface_name(tmp_path: Path) -> None:
    path = tmp_path / "t.pcapng"
    with CaptureWriter(str(path), opener(False, 1, "eth7", "port 1")) as w:
        w.write(PKT, len(PKT), T0)
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.interface_name",
                          "-e", "frame.time_epoch", "-e", "tcp.len"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["eth7", "1700000000.123456789", "200"]


# -- ring buffers --------------------------------------------------------------------------------


def ring(tmp_path: Path, spec: RingSpec, clock: Clock) -> CaptureWriter:
    return CaptureWriter(str(tmp_path / "r.pcapng"), opener(False, 1, "lo", ""), spec, clock.mono, clock.now)


def files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def test_filesize_switches_after_the_packet_that_reaches_it(tmp_path: Path) -> None:
    clock = Clock()
    w = ring(tmp_path, RingSpec(filesize_kb=1), clock)  # 1000 bytes
    big = ethernet(tcp_ip("127.0.0.1", "127.0.0.1", 40000, 9092, 1, 1, 0x18, b"x" * 400))
    for i in range(7):  # headers 92 bytes, each packet 488: a file switches after its second
        w.write(big, len(big), T0 + i)
        clock.advance(1)
    w.close()
    names = files(tmp_path)
    assert names == ["r_00001_20240506070809.pcapng", "r_00002_20240506070810.pcapng",
                     "r_00003_20240506070812.pcapng", "r_00004_20240506070814.pcapng"]
    sizes = [(tmp_path / n).stat().st_size for n in names]
    assert sizes == [1068, 1068, 1068, 580]
    counts = [len(list(CaptureFile(str(tmp_path / n)))) for n in names]
    assert counts == [2, 2, 2, 1] and w.packets == 7
    assert [f.ts for n in names for f in CaptureFile(str(tmp_path / n))] == \
        pytest.approx([(T0 + i) / 1e9 for i in range(7)])
    assert w.describe() == f"4 files, the last {tmp_path / names[-1]}"


def test_files_keeps_the_last_n(tmp_path: Path) -> None:
    clock = Clock()
    w = ring(tmp_path, RingSpec(packets=2, files=2), clock)
    for i in range(9):
        w.write(PKT, len(PKT), T0 + i)
        clock.advance(1)
    w.close()
    # 9 packets, 2 a file: files 1-4 are full, file 5 holds the last packet; 1-3 were deleted.
    names = files(tmp_path)
    assert [n.split("_")[1] for n in names] == ["00004", "00005"]
    assert [len(list(CaptureFile(str(tmp_path / n)))) for n in names] == [2, 1]
    assert (w.opened, w.deleted) == (5, 3)
    assert w.describe().startswith("5 files (2 kept), the last ")


def test_duration_switches_even_without_packets(tmp_path: Path) -> None:
    clock = Clock()
    w = ring(tmp_path, RingSpec(duration_s=2.0), clock)
    w.write(PKT, len(PKT), T0)
    clock.advance(1.9)
    w.tick()
    assert w.opened == 1
    clock.advance(0.1)
    w.tick()
    assert w.opened == 2
    clock.advance(2.5)
    w.tick()  # an idle file is closed too, as dumpcap does
    w.write(PKT, len(PKT), T0 + 5)
    w.close()
    assert [len(list(CaptureFile(str(tmp_path / n)))) for n in files(tmp_path)] == [1, 0, 1]


def test_unwritable_ring_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write"):
        CaptureWriter(str(tmp_path / "no" / "r.pcapng"), opener(False, 1, "lo", ""), RingSpec(packets=1))
