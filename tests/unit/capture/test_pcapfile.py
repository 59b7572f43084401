from __future__ import annotations

import gzip
import io
import struct
import tracemalloc
import zlib
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

from kdissect.capture import pcapfile
from kdissect.capture.pcapfile import CaptureFile, RawFrame
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


def _pcap_bytes(tmp_path: Path, pkts: list[Pkt] | None = None) -> bytes:
    path = tmp_path / "src.pcap"
    write_pcap(str(path), pkts if pkts is not None else _many_pkts())
    return path.read_bytes()


def _many_pkts() -> list[Pkt]:
    conn = TcpConn()
    ips = conn.handshake() + [conn.segment(i % 2 == 0, bytes([i]) * (50 + i)) for i in range(200)]
    return [Pkt(1700000000.0 + i, ethernet(p)) for i, p in enumerate(ips)]


def _read(data: bytes, name: str = "c.pcap") -> tuple[list[RawFrame], list[str]]:
    with CaptureFile(name, io.BytesIO(data)) as cap:
        return list(cap), cap.warnings


def test_corrupt_gzip_decodes_up_to_the_damage(tmp_path: Path) -> None:
    plain = _pcap_bytes(tmp_path)
    gz = bytearray(gzip.compress(plain))
    bad = len(gz) // 2
    gz[bad : bad + 8] = b"\xff" * 8  # damage in the middle of the deflate stream
    frames, warnings = _read(bytes(gz), "c.pcap.gz")
    whole, _ = _read(plain)
    assert 0 < len(frames) < len(whole)
    # Every frame inflated from the bytes before the damage is there (deflate may notice the
    # damage some bytes after it: what it inflated meanwhile is delivered too).
    intact = len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(bytes(gz[:bad])))
    ends = [24 + sum(16 + len(f.data) for f in whole[: i + 1]) for i in range(len(whole))]
    good = sum(1 for e in ends if e <= intact)
    assert len(frames) >= good > 0
    assert [f.data for f in frames[:good]] == [f.data for f in whole[:good]]
    # Bytes inflated from damaged data may also look like a bad record before zlib notices.
    assert len(warnings) == 1 and ("corrupt gzip data" in warnings[0] or "stopped" in warnings[0])


def test_damaged_second_gzip_member_keeps_every_frame_of_the_first(tmp_path: Path) -> None:
    plain = _pcap_bytes(tmp_path)
    whole, _ = _read(plain)
    cut = 24 + sum(16 + len(f.data) for f in whole[:150])
    second = bytearray(gzip.compress(plain[cut:]))
    second[3] = 0xE0  # reserved header flags: zlib stops at once
    frames, warnings = _read(gzip.compress(plain[:cut]) + bytes(second), "c.pcap.gz")
    assert [f.data for f in frames] == [f.data for f in whole[:150]]
    assert len(warnings) == 1 and "corrupt gzip data" in warnings[0] and "up to the damage" in warnings[0]
    assert f"after {cut} bytes" in warnings[0]


@pytest.mark.parametrize("keep", [0.3, 0.7, 0.999])
def test_cut_gzip_decodes_up_to_the_cut(tmp_path: Path, keep: float) -> None:
    gz = gzip.compress(_pcap_bytes(tmp_path))
    frames, warnings = _read(gz[: int(len(gz) * keep)], "c.pcap.gz")
    assert frames
    assert len(warnings) == 1 and "cut" in warnings[0]


def test_gzip_members_and_padding(tmp_path: Path) -> None:
    plain = _pcap_bytes(tmp_path)
    half = 24 + 16 * 3 + sum(len(p.data) for p in _many_pkts()[:3])  # header and three records
    gz = gzip.compress(plain[:half]) + b"\x00" * 7 + gzip.compress(plain[half:])
    frames, warnings = _read(gz, "c.pcap.gz")
    assert len(frames) == len(_many_pkts()) and warnings == []


@pytest.mark.parametrize("at", [-8, -1])  # the CRC-32, and the length (its last byte ends the stream)
def test_gzip_with_a_bad_trailer_reports_once(tmp_path: Path, at: int) -> None:
    gz = bytearray(gzip.compress(_pcap_bytes(tmp_path)))
    gz[at] ^= 0xFF
    frames, warnings = _read(bytes(gz), "c.pcap.gz")
    assert len(frames) == len(_many_pkts())
    assert len(warnings) == 1 and "corrupt gzip data" in warnings[0]


def test_gzip_damaged_before_the_capture_header(tmp_path: Path) -> None:
    gz = bytearray(gzip.compress(_pcap_bytes(tmp_path)))
    gz[10:20] = b"\xff" * 10
    with pytest.raises(UsageError, match="not a readable capture"):
        _read(bytes(gz), "c.pcap.gz")


class _Pipe(io.RawIOBase):
    """A non-seekable stream that hands out a few bytes at a time, like a pipe."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        n = min(len(b), 3, len(self._data))
        b[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


@pytest.mark.parametrize("gz", [False, True])
def test_non_seekable_input(tmp_path: Path, gz: bool) -> None:
    plain = _pcap_bytes(tmp_path)
    data = gzip.compress(plain) if gz else plain
    stream = io.BufferedReader(_Pipe(data), 7)
    assert not stream.seekable()
    with CaptureFile("-", stream) as cap:  # type: ignore[arg-type]
        frames = list(cap)
        assert cap.warnings == [] and cap.position() == len(data)
    assert len(frames) == len(_many_pkts())


def _idb_with(options: bytes) -> bytes:
    body = struct.pack("<HHI", 1, 0, 262144) + options
    return struct.pack("<II", 1, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def _raw_block(btype: int, body: bytes) -> bytes:
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


@pytest.mark.parametrize("cut", range(0, 12))
def test_pcapng_interface_option_cut_by_the_block_end(cut: int) -> None:
    """if_tsoffset (8 bytes) and if_tsresol whose value runs past the end of the block."""
    ip = _pkts()[0].data
    tsoffset = struct.pack("<HHq", 14, 8, 1000)[: 4 + cut]
    tsresol = struct.pack("<HHB", 9, 1, 9)[: 4 + cut]
    for opt in (tsoffset, tsresol):
        blob = pcapng_section() + _idb_with(opt) + pcapng_epb(0, 10.5, ip)
        frames, warnings = _read(blob, "c.pcapng")
        assert len(frames) == 1 and warnings == []


@pytest.mark.parametrize("body_len", range(0, 8))
def test_pcapng_interface_block_too_short(body_len: int) -> None:
    ip = _pkts()[0].data
    blob = pcapng_section() + _raw_block(1, b"\x01" * body_len) + pcapng_epb(0, 1.0, ip)
    frames, warnings = _read(blob, "c.pcapng")
    assert frames == [] and len(warnings) == 1 and "1 packet block skipped" in warnings[0]


@pytest.mark.parametrize("btype", [6, 3, 2])
def test_pcapng_packet_blocks_of_every_length(btype: int) -> None:
    """Packet blocks cut to every body length, and packets on an interface never described."""
    ip = _pkts()[0].data
    full = pcapng_epb(0, 1.0, ip)[8:-4]
    for n in range(len(full)):
        blob = pcapng_section() + pcapng_idb(1) + _raw_block(btype, full[:n])
        _read(blob, "c.pcapng")
    on_iface_5 = struct.pack("<I", 5) + full[4:]
    frames, warnings = _read(pcapng_section() + pcapng_idb(1) + _raw_block(6, on_iface_5), "c.pcapng")
    assert frames == [] and "1 packet block skipped" in warnings[0]


def test_pcapng_bad_byte_order_magic() -> None:
    shb = bytearray(pcapng_section())
    shb[8:12] = b"\x01\x02\x03\x04"
    frames, warnings = _read(bytes(shb) + pcapng_idb(1), "c.pcapng")
    assert frames == [] and len(warnings) == 1 and "section header" in warnings[0]


def test_every_cut_of_a_pcapng_file() -> None:
    ip = _pkts()[0].data
    blob = (pcapng_section() + pcapng_idb(1, tsresol=9) + pcapng_epb(0, 1.0, ethernet(ip), ticks_per_s=1e9)
            + pcapng_section() + pcapng_idb(113) + pcapng_epb(0, 2.0, sll(ip)))
    for n in range(4, len(blob)):
        try:
            frames, warnings = _read(blob[:n], "c.pcapng")
        except UsageError:
            assert n < 8
            continue
        assert len(warnings) <= 1


def test_every_cut_of_a_pcap_file(tmp_path: Path) -> None:
    blob = _pcap_bytes(tmp_path, _pkts())
    for n in range(len(blob)):
        try:
            frames, warnings = _read(blob[:n])
        except UsageError as e:
            assert n < 24 and ("cut short" in str(e) or "not a pcap" in str(e))
            continue
        assert len(warnings) == (0 if n in (24, 24 + 16 + len(_pkts()[0].data)) else 1) or frames


def test_directory() -> None:
    with pytest.raises(UsageError, match="it is a directory"):
        CaptureFile(str(Path(__file__).parent))


def test_pcapng_section_of_many_interfaces_costs_little_per_interface() -> None:
    # A 20-byte Interface Description Block took about 90 bytes once read (a tuple in a list):
    # a 100 MB section of them took 465 MB.
    ip = _pkts()[0].data
    n = 50_000
    blob = pcapng_section() + pcapng_idb(1) * (n - 2) + _raw_block(1, b"\x01" * 4) + pcapng_idb(113, 9)
    blob += pcapng_epb(n - 1, 1.0, sll(ip), ticks_per_s=1e9) + pcapng_epb(n - 2, 2.0, ip) + pcapng_epb(0, 3.0, ip)
    with CaptureFile("c.pcapng", io.BytesIO(blob)) as cap:
        tracemalloc.start()
        try:
            frames = list(cap)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        warnings = cap.warnings
    assert [(f.number, f.ts, f.linktype) for f in frames] == [(1, 1.0, 113), (2, 3.0, 1)]
    assert warnings == ["c.pcapng: 1 packet block skipped (too short, or on an interface the capture does not "
                        "describe)"]
    assert peak < n * 40


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_gzip_of_repeated_records_stops_past_a_record_a_compressed_byte(
        monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    # 256 KB of gzip inflated to 16 million empty pcap records (or pcapng section headers):
    # read to the end, 38 s. Records past FREE_RECORDS (here none) are read only while they
    # take a compressed byte each.
    monkeypatch.setattr(pcapfile, "FREE_RECORDS", 0)
    n = 70_000
    if fmt == "pcap":
        plain = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + bytes(16) * n
    else:
        plain = pcapng_section() * n
    frames, warnings = _read(gzip.compress(plain), "c.gz")
    assert len(warnings) == 1 and "stopped, as a decompression bomb" in warnings[0]
    assert len(frames) == (65_535 if fmt == "pcap" else 0)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_gzip_of_large_records_of_zeros_stops_past_100_bytes_a_compressed_byte(
        monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    # 1.6 MB of gzip inflated to 1 GB of 65 KB TCP segments of zeros: few records, so the
    # records' bound never came into play, and decoding took 2.2 s of CPU (15 MB of such gzip,
    # over 20 s). Past FREE_INFLATED (here none) the bytes are read only while they take a
    # compressed byte a hundred.
    monkeypatch.setattr(pcapfile, "FREE_INFLATED", 0)
    monkeypatch.setattr(pcapfile, "_CHECK_BYTES", 1)
    frame = ethernet(TcpConn().segment(True, bytes(60_000)))
    if fmt == "pcap":
        plain = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        plain += (struct.pack("<IIII", 1, 0, len(frame), len(frame)) + frame) * 40
    else:
        plain = pcapng_section() + pcapng_idb(1) + pcapng_epb(0, 1.0, frame) * 40
    frames, warnings = _read(gzip.compress(plain, 9), "c.gz")
    assert len(warnings) == 1 and "a compressed byte): stopped, as a decompression bomb" in warnings[0]
    assert len(frames) < 40


def test_gzip_of_a_real_capture_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # Times and sequence numbers that advance as regularly as can be still take about 5
    # compressed bytes a record.
    monkeypatch.setattr(pcapfile, "FREE_RECORDS", 0)
    monkeypatch.setattr(pcapfile, "FREE_INFLATED", 0)
    monkeypatch.setattr(pcapfile, "_CHECK_BYTES", 1)
    frame = bytearray(ethernet(TcpConn().segment(True, b"\0" * 8)))
    records = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i in range(66_000):
        struct.pack_into(">I", frame, 38, i * 8)  # the TCP sequence number
        records.append(struct.pack("<IIII", 1700000000 + i // 1000, i % 1000 * 1000, len(frame), len(frame)))
        records.append(bytes(frame))
    frames, warnings = _read(gzip.compress(b"".join(records), 9), "c.gz")
    assert len(frames) == 66_000 and not warnings


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_record_past_64_mib_is_corruption(fmt: str) -> None:
    # A 200 MB packet block of zeros (200 KB of gzip) was read and decoded whole: 442 MB.
    claim = 64 * 1024 * 1024 + 4
    if fmt == "pcap":
        blob = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + struct.pack("<IIII", 1, 0, claim, claim)
    else:
        blob = pcapng_section() + pcapng_idb(1) + struct.pack("<II", 6, claim + 32)
    frames, warnings = _read(blob + bytes(1000), f"c.{fmt}")
    assert frames == [] and len(warnings) == 1 and "stopped" in warnings[0]


def test_raw_frame_is_a_value_as_a_frozen_dataclass() -> None:
    """RawFrame (an extension type when compiled) compares, hashes, shows, pickles and matches as
    the frozen dataclass of its five fields it was."""
    import copy
    import dataclasses
    import pickle

    @dataclasses.dataclass(frozen=True)
    class RawFrame_:
        number: int
        ts: float
        linktype: int
        data: bytes
        wirelen: int

    f = RawFrame(3, 1.5, 1, b"\x01\x02", 9)
    ref = RawFrame_(3, 1.5, 1, b"\x01\x02", 9)
    assert (f.number, f.ts, f.linktype, f.data, f.wirelen) == (3, 1.5, 1, b"\x01\x02", 9)
    assert repr(f) == "RawFrame(" + repr(ref).split("(", 1)[1]
    assert hash(f) == hash(ref) and f == RawFrame(3, 1.5, 1, b"\x01\x02", 9)
    assert f != RawFrame(4, 1.5, 1, b"\x01\x02", 9) and f != ref and f != (3, 1.5, 1, b"\x01\x02", 9)
    assert pickle.loads(pickle.dumps(f)) == f and copy.copy(f) == f and copy.deepcopy(f) == f
    match f:
        case RawFrame(number, ts, linktype, data, wirelen):
            assert (number, ts, linktype, data, wirelen) == (3, 1.5, 1, b"\x01\x02", 9)
        case _:
            raise AssertionError("no match")
    if type(f).__flags__ & (1 << 9):  # a heap type: the pure class (assignment is not checked)
        return
    with pytest.raises(AttributeError):
        f.number = 4  # type: ignore[misc]
    assert f.number == 3
