"""The pieces of packet output and merged input: the frame bitmap, the pcapng writer (read back
by our reader) and the time-ordered merge of several files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.capture.pcapfile import CaptureFile, MergedCapture, RawFrame, open_capture
from kdissect.capture.pcapwriter import PcapngWriter, PcapWriter
from kdissect.errors import UsageError
from kdissect.pipeline.packets import FrameSet, write_packets


def test_frame_set() -> None:
    s = FrameSet()
    assert not s and 1 not in s and s.last == 0
    for n in (5, 1, 1000, 5, 9, 0, -3):
        s.add(n)
    assert len(s) == 4 and s.last == 1000
    assert [n for n in range(-5, 1100) if n in s] == [1, 5, 9, 1000]


def frames() -> list[RawFrame]:
    return [
        RawFrame(1, 1700000000.000001, 1, b"\x01" * 60, 60),
        RawFrame(2, 1700000000.5, 113, b"\x02" * 33, 1500),  # another link type, cut by a snaplen
        RawFrame(3, 1700000001.123456, 1, b"\x03" * 61, 61),  # needs padding
    ]


def test_pcapng_writer_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "w.pcapng"
    with PcapngWriter(str(out)) as w:
        for f in frames():
            w.write(f.data, f.wirelen, f.ts, f.linktype)
    assert w.packets == 3
    with CaptureFile(str(out)) as cap:
        back = list(cap)
        assert cap.warnings == []
    assert [(f.number, f.linktype, f.data, f.wirelen) for f in back] == \
        [(f.number, f.linktype, f.data, f.wirelen) for f in frames()]
    assert [round(f.ts * 1e6) for f in back] == [round(f.ts * 1e6) for f in frames()]


def write_pcap(path: Path, times: list[float], tag: int) -> None:
    with PcapWriter(str(path), 1) as w:
        for i, t in enumerate(times):
            w.write(bytes([tag, i]) * 20, 40, round(t * 1e9))


def test_merge_orders_by_time_first_file_first_on_ties(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    write_pcap(a, [1.0, 3.0, 3.0, 7.0], 0xA)
    write_pcap(b, [0.5, 3.0, 8.0], 0xB)
    with MergedCapture([str(a), str(b)]) as cap:
        got = [(f.number, f.ts, f.data[:2]) for f in cap]
    assert got == [(1, 0.5, b"\x0b\x00"), (2, 1.0, b"\x0a\x00"), (3, 3.0, b"\x0a\x01"), (4, 3.0, b"\x0a\x02"),
                   (5, 3.0, b"\x0b\x01"), (6, 7.0, b"\x0a\x03"), (7, 8.0, b"\x0b\x02")]
    assert isinstance(open_capture([str(a)]), CaptureFile)


def test_merge_of_a_missing_file_closes_the_others(tmp_path: Path) -> None:
    a = tmp_path / "a.pcap"
    write_pcap(a, [1.0], 1)
    with pytest.raises(UsageError, match="cannot open"):
        MergedCapture([str(a), str(tmp_path / "missing.pcap")])
    with pytest.raises(UsageError, match="no capture"):
        open_capture([])


def test_write_packets_copies_the_selected_frames_in_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    write_pcap(a, [1.0, 2.0, 3.0], 0xA)
    write_pcap(b, [1.5, 2.5], 0xB)
    sel = FrameSet()
    for n in (4, 2, 5):
        sel.add(n)
    out = tmp_path / "out.pcapng"
    assert write_packets([str(a), str(b)], sel, str(out)) == 3
    with CaptureFile(str(out)) as cap:
        assert [(f.ts, f.data[:2]) for f in cap] == [(1.5, b"\x0b\x00"), (2.5, b"\x0b\x01"), (3.0, b"\x0a\x02")]
    assert write_packets(str(a), FrameSet(), str(out)) == 0
    assert list(CaptureFile(str(out))) == []
