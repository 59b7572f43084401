"""Reading captures by byte ranges, and in the blocks a line reader cuts: the frames of all the
parts, numbered by `stitch` (or `join`), are the sequential reader's, for every cut of real
captures (intact, cut short, damaged) and of random bytes; on intact real captures the boundary
scan finds every true record boundary."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from linesplits import block_bytes, line_splits
from pcapgen import pcapng_epb, pcapng_idb, pcapng_section
from support import CAPTURES, shared_captures

from kdissect.capture import ranges
from kdissect.capture.pcapfile import MAX_RECORD, CaptureFile, RawFrame
from kdissect.capture.ranges import HEAD, Layout, RangeReader, Span, layout, stitch

PROJECT = sorted(p for p in CAPTURES.glob("*/*.pcap*") if not p.name.endswith(".gz"))
SHARED_PROTOS = ("kafka", "pulsar", "rocketmq", "zookeeper")
FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- helpers -------------------------------------------------------------------------------

def _renumbered(fr: RawFrame, by: int) -> RawFrame:
    """The frame numbered `by` later."""
    return RawFrame(by + fr.number, fr.ts, fr.linktype, fr.data, fr.wirelen)


def _sequential(blob: bytes) -> list[RawFrame]:
    return list(CaptureFile("c", io.BytesIO(blob)))


def _boundaries(blob: bytes, lay: Layout) -> list[int]:
    """Where the records start, walked by their lengths (the last may be cut by the file's end)."""
    out, pos = [], lay.data_start
    hdr, at = (16, 8) if lay.kind == "pcap" else (8, 4)
    while pos + hdr <= len(blob):
        out.append(pos)
        length = struct.unpack_from(lay.order + "I", blob, pos + at)[0]
        pos += length + 16 if lay.kind == "pcap" else max(length, 1)
    return out


def _by_ranges(blob: bytes, lay: Layout, cuts: list[int]) -> tuple[list[RawFrame] | None, list[Span]]:
    """The frames of the ranges between `cuts`, renumbered by stitch (None when it refuses)."""
    f = io.BytesIO(blob)
    spans: list[tuple[int, int, Span]] = []
    frames: list[list[RawFrame]] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        reader = RangeReader(f, lay, start, end, len(blob))
        frames.append(list(reader))
        spans.append((start, end, reader.span))
    offsets = stitch(lay, spans)
    if offsets is None:
        return None, [s for _, _, s in spans]
    out = [_renumbered(fr, off) for off, got in zip(offsets, frames, strict=True)
           if off is not None for fr in got]
    return out, [s for _, _, s in spans]


def _draw_cuts(data: st.DataObject, lay: Layout, size: int, bounds: list[int]) -> list[int]:
    """1 to 6 ranges from data_start (or from 0) to size, cut anywhere, at record boundaries,
    near them, and close together (ranges smaller than a record)."""
    near = st.tuples(st.sampled_from(bounds or [lay.data_start]), st.integers(-20, 20)).map(sum)
    point = st.one_of(st.integers(0, size), near, near.flatmap(lambda p: st.integers(p, p + 40)))
    inner = data.draw(st.lists(point, max_size=5))
    start = data.draw(st.sampled_from([lay.data_start, 0]))
    return [start, *sorted(min(max(p, start), size) for p in inner), size]


def _late(blob: bytes, lay: Layout) -> bool:
    """Whether a pcapng has a section header or interface block after its head's."""
    return lay.kind == "pcapng" and any(
        struct.unpack_from(lay.order + "I", blob, b)[0] in (0x0A0D0D0A, 1) for b in _boundaries(blob, lay))


def _check_cuts(blob: bytes, data: st.DataObject, must_stitch: bool, blocks: bool = False) -> None:
    """Ranges between drawn cuts, or blocks (the splits of a line reader) between them."""
    lay = layout(blob[:HEAD])
    assert lay is not None
    cuts = _draw_cuts(data, lay, len(blob), _boundaries(blob, lay))
    got = _by_blocks(blob, lay, sorted({0, *cuts})) if blocks else _by_ranges(blob, lay, cuts)[0]
    if must_stitch:
        assert got is not None, cuts
    assert got is None or got == _sequential(blob), cuts


@cache
def _blob(path: Path) -> bytes:
    return path.read_bytes()


def _pcap_variant(blob: bytes, big_endian: bool, nano: bool) -> bytes:
    """The same records with another byte order and timestamp unit."""
    lay = layout(blob)
    assert lay is not None and lay.kind == "pcap"
    e = ">" if big_endian else "<"
    out = [struct.pack(e + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, lay.snaplen, lay.linktype)]
    for pos in _boundaries(blob, lay):
        sec, frac, caplen, wirelen = struct.unpack_from(lay.order + "IIII", blob, pos)
        frac = frac * 1000 + 999 if nano else frac
        out.append(struct.pack(e + "IIII", sec, frac, caplen, wirelen) + blob[pos + 16 : pos + 16 + caplen])
    return b"".join(out)


def _pcapng_variant(blob: bytes) -> bytes:
    """The same packets as pcapng: nanosecond enhanced packet blocks, simple packet blocks and
    interface statistics blocks among them."""
    frames = _sequential(blob)
    out = [pcapng_section(), pcapng_idb(frames[0].linktype if frames else 1, tsresol=9)]
    for i, fr in enumerate(frames):
        if i % 7 == 3:
            out.append(_block(3, struct.pack("<I", len(fr.data)) + fr.data))
        else:
            out.append(pcapng_epb(0, fr.ts, fr.data, ticks_per_s=1e9))
        if i % 11 == 5:
            out.append(_block(5, struct.pack("<III", 0, 1, 2)))
    return b"".join(out)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


VARIANTS: dict[str, Callable[[bytes], bytes]] = {
    "pcap": lambda b: b,
    "pcap-be-ns": lambda b: _pcap_variant(b, big_endian=True, nano=True),
    "pcapng": _pcapng_variant,
}


def _shared_sample() -> list[Path]:
    paths = [p for proto in SHARED_PROTOS for p in shared_captures(proto) if not p.name.endswith(".gz")]
    return paths[::3]


# -- the layout ----------------------------------------------------------------------------

def test_layout_of_each_format() -> None:
    blob = _blob(PROJECT[0])
    lay = layout(blob)
    assert lay == Layout("pcap", "<", 24, 1, 1e-6, 262144)
    be = layout(_pcap_variant(blob, big_endian=True, nano=True))
    assert be is not None and (be.order, be.unit, be.data_start) == (">", 1e-9, 24)
    ng = _pcapng_variant(blob)
    head = pcapng_section() + pcapng_idb(1, tsresol=9)
    lay_ng = layout(ng)
    assert lay_ng is not None and lay_ng.kind == "pcapng" and lay_ng.data_start == len(head)
    assert lay_ng.interfaces == ((1, 1e-9, 0, 10**9),)


@pytest.mark.parametrize("head", [
    b"", b"\x1f\x8b\x08\x00" + bytes(40), b"not a capture at all", _blob(PROJECT[0])[:23],
    pcapng_section()[:20], pcapng_section() + pcapng_idb(1)[:15],
    pcapng_section()[:8] + b"\1\2\3\4" + pcapng_section()[12:],
])
def test_layout_refuses(head: bytes) -> None:
    assert layout(head) is None


def test_layout_of_a_pcapng_whose_interfaces_do_not_fit_the_head() -> None:
    blob = pcapng_section() + pcapng_idb(1) * (HEAD // 20 + 1) + pcapng_epb(0, 1.0, b"x" * 60)
    assert layout(blob[:HEAD]) is None


@given(st.binary(max_size=300))
def test_layout_of_random_bytes(head: bytes) -> None:
    for h in (head, pcapng_section()[:8] + head, b"\xd4\xc3\xb2\xa1" + head):
        layout(h)


# -- the boundary scan on real captures -------------------------------------------------

def _every_boundary_found(blob: bytes) -> None:
    """From every offset of a record the scan finds the next record: one range per record, from
    its start (found there) or just after it to just after the next one's start (found there:
    nothing in between looked like a boundary)."""
    lay = layout(blob[:HEAD])
    assert lay is not None
    bounds = _boundaries(blob, lay)
    f = io.BytesIO(blob)
    for a, b in zip(bounds, [*bounds[1:], len(blob)], strict=True):
        for start, want in ((a, a), (a + 1, b if b < len(blob) else None)):
            reader = RangeReader(f, lay, start, b + 1, len(blob))
            next(iter(reader), None)
            assert reader.span.first == want, (start, want)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", PROJECT, ids=lambda p: p.name)
def test_scan_finds_every_boundary_of_project_captures(path: Path, variant: str) -> None:
    _every_boundary_found(VARIANTS[variant](_blob(path)))


@pytest.mark.parametrize("proto", SHARED_PROTOS)
def test_scan_finds_every_boundary_of_shared_captures(proto: str) -> None:
    for path in shared_captures(proto):
        if not path.name.endswith(".gz"):
            _every_boundary_found(_blob(path))


# -- ranges equal the sequential reader ----------------------------------------------------

@FEW
@given(data=st.data())
@pytest.mark.parametrize("path", PROJECT, ids=lambda p: p.name)
@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_parts_of_project_captures(path: Path, data: st.DataObject, blocks: bool) -> None:
    _check_cuts(_blob(path), data, must_stitch=True, blocks=blocks)


@FEW
@given(data=st.data())
@pytest.mark.parametrize("variant", ["pcap-be-ns", "pcapng"])
@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_parts_of_variants(variant: str, data: st.DataObject, blocks: bool) -> None:
    path = data.draw(st.sampled_from(PROJECT))
    _check_cuts(VARIANTS[variant](_blob(path)), data, must_stitch=True, blocks=blocks)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_parts_of_shared_captures(data: st.DataObject, blocks: bool) -> None:
    blob = _blob(data.draw(st.sampled_from(_shared_sample())))
    lay = layout(blob[:HEAD])
    assert lay is not None
    _check_cuts(blob, data, must_stitch=not _late(blob, lay), blocks=blocks)


def _damage(data: st.DataObject, blob: bytes) -> bytes:
    """The capture cut short, with a record length made bad or a lie, or with bytes flipped."""
    lay = layout(blob)
    assert lay is not None
    bounds = _boundaries(blob, lay)
    how = data.draw(st.sampled_from(["cut", "length", "flip"]))
    if how == "cut":
        return blob[: data.draw(st.integers(lay.data_start, len(blob)))]
    out = bytearray(blob)
    if how == "length":
        at = data.draw(st.sampled_from(bounds)) + (8 if lay.kind == "pcap" else 4)
        value = data.draw(st.sampled_from([0, 1, 7, 11, 12, 100, len(blob), MAX_RECORD + 1, 0xFFFFFFFF]))
        out[at : at + 4] = struct.pack(lay.order + "I", value)
    else:
        for pos, xor in data.draw(st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(1, 255)),
                                           min_size=1, max_size=8)):
            out[pos] ^= xor
    return bytes(out)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_parts_of_damaged_captures(data: st.DataObject, blocks: bool) -> None:
    path = data.draw(st.sampled_from(PROJECT))
    blob = _damage(data, VARIANTS[data.draw(st.sampled_from(list(VARIANTS)))](_blob(path)))
    if layout(blob[:HEAD]) is not None:
        _check_cuts(blob, data, must_stitch=False, blocks=blocks)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), body=st.binary(max_size=3000))
@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_parts_of_random_bytes(data: st.DataObject, body: bytes, blocks: bool) -> None:
    heads = [_blob(PROJECT[0])[:24], pcapng_section() + pcapng_idb(1),
             _pcap_variant(_blob(PROJECT[0])[:24], big_endian=True, nano=True)]
    blob = data.draw(st.sampled_from(heads)) + body
    _check_cuts(blob, data, must_stitch=False, blocks=blocks)


def _hostile_pcap(*records: tuple[int, int]) -> bytes:
    """Classic records given as (caplen field, bytes that follow)."""
    out = [_blob(PROJECT[0])[:24]]
    for caplen, n in records:
        out.append(struct.pack("<IIII", 1700000000, 5, caplen, caplen) + b"\xab" * n)
    return b"".join(out)


@pytest.mark.parametrize("blob", [
    _hostile_pcap((0, 0), (0, 0), (10, 10), (0, 0)),  # empty records: framed, never a scan candidate
    _hostile_pcap((10, 10), (0xFFFFFFFF, 40), (10, 10)),
    _hostile_pcap((10, 10), (MAX_RECORD, 40)),  # a length past the file's end
    _hostile_pcap((10, 10), (20, 3)),
    pcapng_section() + pcapng_idb(1) + _block(6, b"\0" * 8)[:4] + struct.pack("<I", 0) + b"\0" * 40,
    pcapng_section() + pcapng_idb(1) + struct.pack("<II", 6, 0xFFFFFFF0) + b"\0" * 60,
    pcapng_section() + pcapng_idb(1) + pcapng_epb(0, 1.0, b"x" * 60)[:-4] + b"\x01\x02\x03\x04" * 3,
])
def test_every_cut_of_hostile_files(blob: bytes) -> None:
    lay = layout(blob)
    assert lay is not None
    want = _sequential(blob)
    for a in range(len(blob) + 1):
        for b in (a, a + 1, a + 17, len(blob)):
            cuts = sorted({lay.data_start, min(max(a, lay.data_start), len(blob)),
                           min(max(b, lay.data_start), len(blob)), len(blob)})
            got, _ = _by_ranges(blob, lay, cuts)
            assert got is None or got == want, cuts


# -- pcapng blocks after the head ------------------------------------------------------------

@pytest.mark.parametrize("late", [pcapng_idb(113), pcapng_section() + pcapng_idb(113)])
def test_a_late_interface_or_section_makes_the_file_read_whole(late: bytes) -> None:
    epb = pcapng_epb(0, 1.0, b"y" * 60)
    blob = pcapng_section() + pcapng_idb(1) + epb * 20 + late + epb * 20
    lay = layout(blob)
    assert lay is not None
    at = blob.index(late)
    got, spans = _by_ranges(blob, lay, [lay.data_start, at - 3, len(blob)])
    assert got is None and spans[1].late
    got, spans = _by_ranges(blob, lay, [lay.data_start, len(blob)])
    assert got is None and spans[0].late and spans[0].frames == 20


# -- stitch ---------------------------------------------------------------------------------

def test_stitch() -> None:
    lay = Layout("pcap", "<", 24)
    ok = [(24, 100, Span(24, 130, 3)), (100, 120, Span(None, None, 0)), (120, 200, Span(130, 200, 2))]
    assert stitch(lay, ok) == [0, None, 3]
    assert stitch(lay, []) == []
    assert stitch(lay, [(0, 10, Span()), (10, 50, Span(24, 50, 1))]) == [None, 0]
    stopped = [(24, 100, Span(24, None, 3)), (100, 200, Span(130, 200, 2))]
    assert stitch(lay, stopped) == [0, None]
    disagreements = [
        [(24, 100, Span(24, 130, 3)), (100, 200, Span(140, 200, 2))],  # boundary found elsewhere
        [(24, 100, Span(24, 130, 3)), (100, 200, Span(None, None, 0))],  # boundary missed
        [(24, 100, Span(24, 130, 3)), (110, 200, Span(130, 200, 2))],  # a gap between ranges
        [(30, 200, Span(30, 200, 3))],  # not from the first record
        [(24, 100, Span(24, 100, 3, late=True))],
        [(24, 100, Span(24, 130, 3))],  # the last record past the ranges' end
    ]
    for spans in disagreements:
        assert stitch(lay, spans) is None


# -- what a range reads -----------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_bytes_read_stay_near_the_range(data: st.DataObject) -> None:
    """(end - start) + the last record + one chunk + the look-ahead, on a capture larger than
    those; and the ranges of a file read it about once."""
    blob = _big_capture()
    lay = layout(blob)
    assert lay is not None
    bounds = _boundaries(blob, lay)
    n = data.draw(st.integers(2, 12))
    cuts = [lay.data_start, *sorted(data.draw(st.lists(st.integers(lay.data_start, len(blob)),
                                                      min_size=n - 1, max_size=n - 1))), len(blob)]
    got, spans = _by_ranges(blob, lay, cuts)
    assert got == _sequential(blob)
    for (start, end), span in zip(zip(cuts, cuts[1:], strict=False), spans, strict=True):
        last = max((b for b in bounds if start <= b < end), default=None)
        record = 0 if last is None or span.next is None else span.next - last
        assert span.bytes_read <= (end - start) + record + ranges._CHUNK + ranges._LOOK
    assert sum(s.bytes_read for s in spans) <= len(blob) + n * (ranges._CHUNK + ranges._LOOK)


@cache
def _big_capture() -> bytes:
    """About 6 MB of a real capture's records, repeated."""
    blob = _blob(CAPTURES / "kafka" / "mock_ck_large_values.pcap")
    return blob[:24] + blob[24:] * 10


def test_scan_of_a_range_with_no_record_start_stops_at_its_end() -> None:
    blob = _blob(PROJECT[0])[:24] + struct.pack("<IIII", 1700000000, 0, 3_000_000, 3_000_000) + bytes(3_000_000)
    lay = layout(blob)
    assert lay is not None
    reader = RangeReader(io.BytesIO(blob), lay, 1_000_000, 1_500_000, len(blob))
    assert list(reader) == [] and reader.span.first is None
    assert reader.span.bytes_read <= 500_000 + ranges._CHUNK + ranges._LOOK


# -- blocks: the file cut where a line reader cuts it, each piece read alone -----------------

def _by_blocks(blob: bytes, lay: Layout, cuts: list[int], keep: int = 1 << 30) -> list[RawFrame] | None:
    """The frames of the blocks, numbered by join (None when it refuses)."""
    got = [ranges.read_block(block_bytes(lines), lay, s == 0, keep) for s, lines in line_splits(blob, cuts)]
    joined = ranges.join(lay, len(blob), [b for _, b in got])
    if joined is None:
        return None
    out = [_renumbered(fr, off) for off, (frames, _) in zip(joined.offsets, got, strict=True)
           if off is not None for fr in frames]
    return sorted(out + joined.frames, key=lambda fr: fr.number)


def test_line_blocks_give_the_file_back() -> None:
    blob = b"ab\n\ncd\nef"
    for cuts in ([0, 9], [0, 1, 9], [0, 2, 3, 4, 9], [0, 3, 6, 7, 9], [0, *range(1, 10)]):
        assert b"".join(block_bytes(lines) for _, lines in line_splits(blob, cuts)) == blob + b"\n", cuts


def test_a_block_whose_head_was_not_kept_makes_the_file_read_whole() -> None:
    blob = _blob(PROJECT[0])
    lay = layout(blob)
    assert lay is not None
    cuts = [0, len(blob) // 2, len(blob)]
    assert _by_blocks(blob, lay, cuts) == _sequential(blob)
    assert _by_blocks(blob, lay, cuts, keep=0) is None


def test_missing_bytes_make_the_file_read_whole() -> None:
    blob = _blob(PROJECT[0])
    lay = layout(blob)
    assert lay is not None
    halves = line_splits(blob, [0, len(blob) // 2, len(blob)])
    got = [ranges.read_block(block_bytes(lines), lay, s == 0, 1 << 30) for s, lines in halves]
    short = ranges.Block(replace(got[1][1].span, bytes_read=got[1][1].span.bytes_read - 100), None, b"")
    assert ranges.join(lay, len(blob), [got[0][1], short]) is None
