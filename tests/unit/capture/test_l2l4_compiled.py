"""The compiled decode (kdissect/capture/_l2l4.pyx) against the pure one (l2l4.decode): the same
TcpSegment, field for field and type for type, or None, for every frame of the own captures
(as captured, moved to every link type, cut short), for generated frames of every link type
(VLAN tags, IPv4 options and fragments, IPv6 extension headers, TSO lengths, snaplen cuts),
their mutations, and random bytes."""

from __future__ import annotations

import random
import struct
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcapgen import tcp_ip

from kdissect import accel
from kdissect.capture import l2l4
from kdissect.capture.l2l4 import LINK_LAYERS, VLAN_TYPES, TcpSegment
from kdissect.capture.pcapfile import CaptureFile, RawFrame

twin = pytest.importorskip("kdissect.capture._l2l4", reason="the compiled twin of l2l4 is not built")
if accel.PURE:  # the twin lays out the compiled TcpSegment; KDISSECT_PURE=1 loads the pure classes
    pytest.skip("the compiled twin cannot run beside the pure classes of KDISSECT_PURE=1", allow_module_level=True)
pure_decode = accel.pure("kdissect.capture.l2l4", "decode")
compiled_decode = twin.decode

REPO = Path(__file__).resolve().parents[3]
CAPTURES = sorted(p for p in (REPO / "captures").rglob("*") if p.is_file()
                  and p.name.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")))
RAW_IP = (101, 12, 14, 228, 229)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IPV6_EXT = (0, 43, 60, 51, 44, 135, 139, 140)


def same(frame: Any) -> TcpSegment | None:
    """Decode with both; they agree on every field's value and type. Returns the segment."""
    want = pure_decode(frame)
    got = compiled_decode(frame)
    if want is None:
        assert got is None, frame
        return None
    assert type(got) is TcpSegment and type(want) is TcpSegment, frame
    for name in TcpSegment.__slots__:
        a, b = getattr(want, name), getattr(got, name)
        assert type(a) is type(b) and a == b, (name, a, b, frame)
    return got


def test_the_twin_is_in_place() -> None:
    if accel.PURE:
        assert accel.compiled("kdissect.capture.l2l4", "decode") is None
        assert l2l4.decode is pure_decode
    else:
        assert l2l4.decode is compiled_decode
        assert "kdissect.capture._l2l4" in accel.loaded()


# -- the own captures --------------------------------------------------------------------------

@cache
def captured() -> list[RawFrame]:
    frames: list[RawFrame] = []
    for path in CAPTURES:
        with CaptureFile(str(path)) as cap:
            frames += list(cap)
    return frames


def _network(frame: RawFrame) -> bytes | None:
    """The IP packet of an Ethernet frame (after any VLAN tags)."""
    d = frame.data
    if frame.linktype != 1 or len(d) < 14:
        return None
    off = 14
    etype = struct.unpack_from(">H", d, 12)[0]
    while etype in VLAN_TYPES and len(d) >= off + 4:
        etype = struct.unpack_from(">H", d, off + 2)[0]
        off += 4
    return d[off:] if etype in (0x0800, 0x86DD) else None


def relinked(ip: bytes) -> list[tuple[int, bytes]]:
    """The IP packet in a frame of every link type (and Ethernet with tags)."""
    v6 = ip[0] >> 4 == 6 if ip else False
    etype = struct.pack(">H", 0x86DD if v6 else 0x0800)
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"
    out = [
        (1, eth + etype + ip),
        (1, eth + b"\x81\x00\x00\x0a" + etype + ip),
        (1, eth + b"\x88\xa8\x00\x0a\x81\x00\x00\x14" + etype + ip),
        (113, struct.pack(">HHH8s", 0, 772, 6, b"\0" * 8) + etype + ip),
        (276, etype + struct.pack(">HIHBB8s", 0, 1, 772, 0, 6, b"\0" * 8) + ip),
        (0, struct.pack("<I", 30 if v6 else 2) + ip),
        (0, struct.pack(">I", 24 if v6 else 2) + ip),
        (108, struct.pack(">I", 24 if v6 else 2) + ip),
        (108, struct.pack("<I", 28 if v6 else 2) + ip),
    ]
    return out + [(lt, ip) for lt in RAW_IP]


def test_there_are_captures() -> None:
    assert CAPTURES and len(captured()) > 100
    assert {p.parent.name for p in CAPTURES} >= {"kafka", "zookeeper", "pulsar", "rocketmq"}


def test_every_captured_frame() -> None:
    segments = 0
    for frame in captured():
        segments += same(frame) is not None
    assert segments > 0.9 * len(captured())


def test_every_captured_frame_on_every_link_type() -> None:
    for frame in captured():
        ip = _network(frame)
        if ip is None:
            continue
        for lt, data in relinked(ip):
            assert same(RawFrame(frame.number, frame.ts, lt, data, len(data))) is not None
            # the same packet cut by a snaplen, in the TCP header and in the payload
            for keep in {14, 34, 54, 60, 74, 94, len(data) // 2, len(data) - 1}:
                if 0 <= keep < len(data):
                    same(RawFrame(frame.number, frame.ts, lt, data[:keep], len(data)))


def test_every_cut_of_some_captured_frames() -> None:
    for frame in captured()[::25]:
        d = frame.data
        for n in range(min(len(d), 200)):
            same(RawFrame(frame.number, frame.ts, frame.linktype, d[:n], frame.wirelen))
            same(RawFrame(frame.number, frame.ts, frame.linktype, d[:n], n))


def test_mutated_captured_frames() -> None:
    rng = random.Random(20240601)
    linktypes = sorted(LINK_LAYERS)
    for frame in captured():
        for _ in range(8):
            data = bytearray(frame.data)
            for _ in range(rng.randint(1, 4)):
                if not data:
                    break
                pos = rng.randrange(min(len(data), 120))  # mostly in the headers
                data[pos] = rng.randrange(256) if rng.random() < 0.7 else data[pos] ^ (1 << rng.randrange(8))
            lt = frame.linktype if rng.random() < 0.5 else rng.choice(linktypes)
            wirelen = rng.choice([len(data), frame.wirelen, 0, len(data) + rng.randrange(1, 5000)])
            same(RawFrame(frame.number, frame.ts, lt, bytes(data), wirelen))


# -- generated frames --------------------------------------------------------------------------

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
GOOD = st.sampled_from([True, True, True, True, False])


def mostly(draw: st.DrawFn, good: Any, other: st.SearchStrategy[Any]) -> Any:
    """good four times in five, else a value of other: frames that are mostly well-formed."""
    return good if draw(GOOD) else draw(other)


@st.composite
def tcp_segment(draw: st.DrawFn) -> bytes:
    options = draw(st.integers(0, 10)) * 4
    doff = mostly(draw, 5 + options // 4, st.integers(0, 15))
    hdr = struct.pack(">HHIIBBHHH", draw(u16), draw(u16), draw(u32), draw(u32),
                      doff << 4 | draw(st.integers(0, 15)), draw(u8), draw(u16), draw(u16), draw(u16))
    return hdr + draw(st.binary(min_size=options, max_size=options)) + draw(st.binary(max_size=80))


@st.composite
def ipv4(draw: st.DrawFn) -> bytes:
    l4 = mostly(draw, draw(tcp_segment()), st.binary(max_size=40))
    options = draw(st.sampled_from([0, 0, 4, 12, 40]))
    ihl = mostly(draw, 5 + options // 4, st.integers(0, 15))
    version = mostly(draw, 4, st.integers(0, 15))
    proto = mostly(draw, 6, u8)
    frag = mostly(draw, draw(st.sampled_from([0, 0x4000, 0x2000])),
                  st.sampled_from([0x2001, 0x0001, 0x1FFF, 0xFFFF]) | u16)
    size = 20 + options + len(l4)
    total = mostly(draw, draw(st.sampled_from([size, size, size, 0])),
                   st.sampled_from([size - 1, size + 1, 0]) | u16)
    hdr = struct.pack(">BBHHHBBH4s4s", version << 4 | ihl, 0, total & 0xFFFF, draw(u16), frag,
                      draw(u8), proto, 0, draw(st.binary(min_size=4, max_size=4)),
                      draw(st.binary(min_size=4, max_size=4)))
    return hdr + draw(st.binary(min_size=options, max_size=options)) + l4


@st.composite
def ipv6(draw: st.DrawFn) -> bytes:
    l4 = mostly(draw, draw(tcp_segment()), st.binary(max_size=40))
    chain = draw(st.lists(st.sampled_from(IPV6_EXT), max_size=4))
    last = mostly(draw, 6, u8)
    body = b""
    for i, kind in enumerate(chain):
        nxt = chain[i + 1] if i + 1 < len(chain) else last
        if kind == 44:  # fragment header: offset and M flag
            frag = mostly(draw, draw(st.sampled_from([0, 1])), st.sampled_from([8, 0xFFF8, 0xFFF9]) | u16)
            body += struct.pack(">BBHI", nxt, 0, frag, draw(u32))
        elif kind == 51:  # AH: length in 4-byte units, minus 2
            words = draw(st.integers(0, 6))
            body += bytes([nxt, words]) + draw(st.binary(min_size=(words + 2) * 4 - 2,
                                                         max_size=(words + 2) * 4 - 2))
        else:  # length in 8-byte units, minus 1
            units = draw(st.integers(0, 3))
            body += bytes([nxt, units]) + draw(st.binary(min_size=(units + 1) * 8 - 2,
                                                         max_size=(units + 1) * 8 - 2))
    first = chain[0] if chain else last
    size = len(body) + len(l4)
    plen = mostly(draw, draw(st.sampled_from([size, size, size, 0])),
                  st.sampled_from([size - 1 if size else 1, size + 1]) | u16)
    version = mostly(draw, 6, st.integers(0, 15))
    hdr = struct.pack(">IHBB16s16s", version << 28 | draw(st.integers(0, 0xFFFFFFF)), plen & 0xFFFF,
                      first, draw(u8), draw(st.binary(min_size=16, max_size=16)),
                      draw(st.binary(min_size=16, max_size=16)))
    return hdr + body + l4


@st.composite
def linked(draw: st.DrawFn, ip: bytes) -> tuple[int, bytes]:
    """A frame of a link type of LINK_LAYERS (or another) carrying ip."""
    lt = mostly(draw, draw(st.sampled_from(sorted(LINK_LAYERS))), st.sampled_from([2, 9999, 147, -1, 2**40]))
    v6 = bool(ip) and ip[0] >> 4 == 6
    etype = mostly(draw, 0x86DD if v6 else 0x0800, st.sampled_from([0x0800, 0x86DD]) | u16)
    if lt == 1:
        tags = draw(st.lists(st.tuples(st.sampled_from(VLAN_TYPES + (0x0800,)), u16), max_size=3))
        hdr = draw(st.binary(min_size=12, max_size=12))
        for tpid, tci in tags:
            hdr += struct.pack(">HH", tpid, tci)
        return lt, hdr + struct.pack(">H", etype) + ip
    if lt == 113:
        return lt, draw(st.binary(min_size=14, max_size=14)) + struct.pack(">H", etype) + ip
    if lt == 276:
        return lt, struct.pack(">H", etype) + draw(st.binary(min_size=18, max_size=18)) + ip
    if lt in (0, 108):
        af = mostly(draw, 24 if v6 else 2,
                    st.sampled_from([2, 10, 24, 28, 30, 0x02000000, 0x1E000000, 0x18000000]) | u32)
        return lt, struct.pack(draw(st.sampled_from(["<I", ">I"])), af) + ip
    return lt, ip


@st.composite
def frames(draw: st.DrawFn) -> RawFrame:
    ip = draw(st.one_of(ipv4(), ipv6()))
    lt, full = draw(linked(ip))
    keep = draw(st.sampled_from([len(full), len(full)]) | st.integers(0, len(full)))
    data = bytearray(full[:keep])
    for pos, value in mostly(draw, [], st.lists(st.tuples(st.integers(0, 200), u8), max_size=3)):
        if pos < len(data):
            data[pos] = value
    wirelen = mostly(draw, len(full), st.sampled_from([keep, 0, len(full) + 1000]) | st.integers(0, 2**17))
    number = draw(st.integers(1, 2**40))
    return RawFrame(number, draw(st.floats(0, 2e9)), lt, bytes(data), wirelen)


@SETTINGS
@given(frames())
def test_generated_frames(frame: RawFrame) -> None:
    same(frame)


@SETTINGS
@given(st.sampled_from(sorted(LINK_LAYERS)), st.one_of(ipv4(), ipv6()))
def test_generated_segments_on_every_link_type(lt: int, ip: bytes) -> None:
    """Well-formed link headers, every cut of the frame."""
    for link, data in relinked(ip):
        if link != lt:
            continue
        for n in range(len(data) + 1):
            same(RawFrame(1, 1.5, lt, data[:n], len(data)))


@SETTINGS
@given(st.sampled_from(sorted(LINK_LAYERS)) | st.integers(-5, 300), st.binary(max_size=200),
       st.integers(0, 4000))
def test_random_bytes(lt: int, data: bytes, wirelen: int) -> None:
    same(RawFrame(1, 0.0, lt, data, wirelen))
    same(RawFrame(1, 0.0, lt, data, len(data)))


def test_tso_and_snaplen_lengths() -> None:
    """Total length 0 (segmentation offload) and payload lengths 0: the wire length decides."""
    tcp = struct.pack(">HHIIBBHHH", 40000, 9092, 1, 2, 5 << 4, 0x18, 0, 0, 0) + b"x" * 100
    v4 = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 0, 0, 0, 64, 6, 0, b"\x0a\0\0\x01", b"\x0a\0\0\x02") + tcp
    v6 = struct.pack(">IHBB16s16s", 6 << 28, 0, 6, 64, b"\x20" * 16, b"\x21" * 16) + tcp
    for ip in (v4, v6):
        for lt, data in relinked(ip):
            for cut in (0, 10, 50, len(data) - 60, len(data) - 1, len(data)):
                for wirelen in (len(data), len(data) + 500, cut, 0, 2**62 - 1, 2**62, 2**63, -(2**63) - 1, -5):
                    same(RawFrame(1, 0.0, lt, data[: max(cut, 0)], wirelen))
        seg = same(RawFrame(1, 0.0, 101, v4[:80], len(v4) + 7))
        assert seg is not None and (len(seg.payload), seg.missing) == (40, 67)


def test_frames_it_hands_to_the_pure_decode() -> None:
    """Data that is not bytes, integers that are not ints or beyond 64 bits, objects that are
    not RawFrames: the pure decode's answer, or its exception."""
    v4 = relinked(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, b"\x01" * 4, b"\x02" * 4)
                  + struct.pack(">HHIIBBHHH", 1, 2, 3, 4, 0x50, 0x02, 0, 0, 0))
    for lt, data in v4:
        for frame in (RawFrame(1, 0.0, lt, bytearray(data), len(data)),  # type: ignore[arg-type]
                      RawFrame(1, 0.0, lt, memoryview(data), len(data)),  # type: ignore[arg-type]
                      RawFrame(1, 0.0, lt, data, 2**70), RawFrame(1, 0.0, lt + 2**64, data, 5),
                      RawFrame(1, 0.0, True, data, len(data)),
                      RawFrame("n", "t", lt, data, len(data))):  # type: ignore[arg-type]
            want, got = pure_decode(frame), compiled_decode(frame)
            assert (want is None) == (got is None) and want == got
    bad = RawFrame(1, 0.0, 1, v4[0][1], None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pure_decode(bad)
    with pytest.raises(TypeError):
        compiled_decode(bad)


def test_a_link_type_added_to_the_pure_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LINK_LAYERS, 4242, LINK_LAYERS[101])
    ip = relinked(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, b"\x01" * 4, b"\x02" * 4)
                  + struct.pack(">HHIIBBHHH", 1, 2, 3, 4, 0x50, 0x02, 0, 0, 0))[-1][1]
    assert same(RawFrame(1, 0.0, 4242, ip, len(ip))) is not None


def _tcp_bytes(payload: bytes = b"hello") -> bytes:
    return struct.pack(">HHIIBBHHH", 40000, 9092, 7, 9, 5 << 4, 0x18, 0, 0, 0) + payload


def _v4(options: bytes = b"", frag: int = 0) -> bytes:
    l4 = _tcp_bytes()
    return struct.pack(">BBHHHBBH4s4s", 0x45 + len(options) // 4, 0, 20 + len(options) + len(l4), 1,
                       frag, 64, 6, 0, b"\xc0\x00\x02\x01", b"\xc0\x00\x02\x02") + options + l4


def _v6(chain: tuple[int, ...] = ()) -> bytes:
    body = b""
    for i, kind in enumerate(chain):
        nxt = chain[i + 1] if i + 1 < len(chain) else 6
        if kind == 44:
            body += struct.pack(">BBHI", nxt, 0, 1, 77)  # first fragment, more to come
        elif kind == 51:
            body += bytes([nxt, 1]) + b"\0" * 10
        else:
            body += bytes([nxt, 0]) + b"\x01\x04\0\0\0\0"
    l4 = body + _tcp_bytes()
    return struct.pack(">IHBB16s16s", 6 << 28, len(l4), chain[0] if chain else 6, 64,
                       b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x01", b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x02") + l4


PACKETS = [_v4(), _v4(b"\x01\x01\x01\x00"), _v4(frag=0x4000), _v6(), _v6((44,)), _v6((0, 44)), _v6((51,)),
           _v6((60, 43, 44)), _v6((135, 139, 140))]
BYTE_VALUES = (0x00, 0x01, 0x02, 0x04, 0x06, 0x08, 0x0F, 0x10, 0x2C, 0x3F, 0x40, 0x45, 0x60, 0x7F, 0x80,
               0x81, 0x86, 0x88, 0x91, 0x92, 0xA8, 0xDD, 0xF0, 0xF8, 0xFF)


@pytest.mark.parametrize("ip", PACKETS, ids=range(len(PACKETS)))
def test_every_header_byte_changed(ip: bytes) -> None:
    """Each of the first 120 bytes of well-formed frames of every link type set to values near
    the fields' limits and masks, one at a time."""
    assert same(RawFrame(1, 0.0, 101, ip, len(ip))) is not None
    for lt, data in relinked(ip):
        assert same(RawFrame(1, 0.0, lt, data, len(data))) is not None
        for pos in range(min(len(data), 120)):
            changed = bytearray(data)
            for value in BYTE_VALUES:
                changed[pos] = value
                same(RawFrame(1, 0.0, lt, bytes(changed), len(data)))


@pytest.mark.parametrize("tpid", VLAN_TYPES + (0x0800, 0x8101))
def test_vlan_tags(tpid: int) -> None:
    for depth in range(4):
        for ip in (_v4(), _v6()):
            etype = struct.pack(">H", 0x86DD if ip[0] >> 4 == 6 else 0x0800)
            data = b"\x02" * 12 + struct.pack(">HH", tpid, 10) * depth + etype + ip
            seg = same(RawFrame(1, 0.0, 1, data, len(data)))
            assert (seg is not None) == (depth == 0 or tpid in VLAN_TYPES)
            for n in range(len(data)):
                same(RawFrame(1, 0.0, 1, data[:n], len(data)))


def test_fragments() -> None:
    for frag in (0, 1, 2, 4, 6, 7, 8, 9, 0x10, 0xFFF8, 0xFFFF):
        ip = bytearray(_v6((0, 44)))
        ip[48 + 2 : 48 + 4] = struct.pack(">H", frag)
        seg = same(RawFrame(1, 0.0, 229, bytes(ip), len(ip)))
        assert (seg is not None) == (frag < 8)
    for frag in (0, 0x2000, 0x4000, 0x8000, 0x6000, 0x0001, 0x0100, 0x1000, 0x1FFF, 0x2001, 0xFFFF):
        ip4 = _v4(frag=frag)
        seg = same(RawFrame(1, 0.0, 228, ip4, len(ip4)))
        assert (seg is not None) == (frag & 0x1FFF == 0)



@pytest.mark.parametrize("window", [0, 1, 0x00FF, 0xFF00, 0xFFFF])
def test_window_field(window: int) -> None:
    """The window field, read the same by both on every link type, IPv4 and IPv6."""
    for ip in (tcp_ip("192.0.2.1", "192.0.2.2", 1, 2, 3, 4, 0x10, b"x"),
               tcp_ip("2001:db8::1", "2001:db8::2", 1, 2, 3, 4, 0x10, b"x")):
        raw = bytearray(ip)
        tcp = 20 if ip[0] >> 4 == 4 else 40
        raw[tcp + 14 : tcp + 16] = struct.pack(">H", window)
        for lt, data in relinked(bytes(raw)):
            seg = same(RawFrame(1, 0.0, lt, data, len(data)))
            assert seg is not None and seg.window == window
