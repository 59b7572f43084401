from __future__ import annotations

import struct

import pytest
from pcapgen import ethernet, null_loop, sll, sll2, tcp_ip

from kdissect.capture.l2l4 import decode, format_addr
from kdissect.capture.pcapfile import RawFrame

V4 = tcp_ip("192.0.2.1", "192.0.2.2", 40000, 9092, 100, 200, 0x18, b"hello")
V6 = tcp_ip("2001:db8::1", "2001:db8::2", 40000, 9092, 100, 200, 0x18, b"hello")


@pytest.mark.parametrize(
    ("linktype", "data"),
    [
        (1, ethernet(V4)),
        (1, ethernet(V4, vlans=(10,))),
        (1, ethernet(V4, vlans=(10, 20))),
        (113, sll(V4)),
        (276, sll2(V4)),
        (0, null_loop(V4)),
        (101, V4),
        (228, V4),
        (1, ethernet(V6)),
        (113, sll(V6)),
        (0, null_loop(V6)),
        (229, V6),
    ],
)
def test_link_layers(linktype: int, data: bytes) -> None:
    seg = decode(RawFrame(1, 0.0, linktype, data, len(data)))
    assert seg is not None
    assert (seg.sport, seg.dport, seg.seq, seg.ack, seg.payload) == (40000, 9092, 100, 200, b"hello")
    assert seg.missing == 0


def test_ipv6_extension_headers() -> None:
    # Insert a hop-by-hop options header (8 bytes) between the IPv6 header and TCP.
    ip6 = bytearray(V6)
    tcp = bytes(ip6[40:])
    hbh = bytes([6, 0]) + b"\x01\x04\x00\x00\x00\x00"
    ip6[6] = 0  # next header: hop-by-hop
    ip6[4:6] = struct.pack(">H", len(hbh) + len(tcp))
    pkt = bytes(ip6[:40]) + hbh + tcp
    seg = decode(RawFrame(1, 0.0, 229, pkt, len(pkt)))
    assert seg is not None and seg.payload == b"hello"
    assert format_addr(seg.src, seg.sport) == "[2001:db8::1]:40000"


def test_ethernet_padding_is_not_payload() -> None:
    small = tcp_ip("192.0.2.1", "192.0.2.2", 1, 2, 0, 0, 0x10, b"")
    frame = ethernet(small) + b"\x00" * 6  # padded to the 60-byte minimum
    seg = decode(RawFrame(1, 0.0, 1, frame, len(frame)))
    assert seg is not None and seg.payload == b""


def test_snaplen_cut_reports_missing_bytes() -> None:
    full = ethernet(tcp_ip("192.0.2.1", "192.0.2.2", 1, 2, 0, 0, 0x18, b"x" * 100))
    cut = full[:80]
    seg = decode(RawFrame(1, 0.0, 1, cut, len(full)))
    assert seg is not None
    assert len(seg.payload) + seg.missing == 100


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00" * 13, ethernet(V4)[:20], b"\xff" * 60,
     ethernet(b"\x45" + b"\x00" * 8 + b"\x11" + b"\x00" * 30)],  # UDP
)
def test_not_tcp_or_short(data: bytes) -> None:
    assert decode(RawFrame(1, 0.0, 1, data, len(data))) is None


def test_unknown_linktype() -> None:
    assert decode(RawFrame(1, 0.0, 9999, ethernet(V4), 100)) is None


def _loop_be(ip: bytes) -> bytes:
    return struct.pack(">I", 2 if ip[0] >> 4 == 4 else 24) + ip


# Real frames of every link type kdissect reads (and VLAN-tagged Ethernet), IPv4 and IPv6.
FRAMES = [
    (lt, build(ip))
    for ip in (V4, V6)
    for lt, build in [
        (1, ethernet), (1, lambda p: ethernet(p, vlans=(10,))), (1, lambda p: ethernet(p, vlans=(10, 20))),
        (113, sll), (276, sll2), (0, null_loop), (108, _loop_be),
        (101, lambda p: p), (12, lambda p: p), (14, lambda p: p), (228, lambda p: p), (229, lambda p: p),
    ]
]


def test_every_link_type_is_covered() -> None:
    from kdissect.capture.l2l4 import LINK_LAYERS

    assert {lt for lt, _ in FRAMES} == set(LINK_LAYERS)


@pytest.mark.parametrize(("linktype", "data"), FRAMES)
def test_every_truncation_of_every_link_type(linktype: int, data: bytes) -> None:
    """A frame cut at any length (by the snaplen or by damage) is TCP with bytes missing, or not
    a segment at all; never an exception."""
    assert decode(RawFrame(1, 0.0, linktype, data, len(data))) is not None
    for n in range(len(data)):
        seg = decode(RawFrame(1, 0.0, linktype, data[:n], len(data)))
        if seg is not None:
            assert seg.payload == b"hello"[: len(seg.payload)]
            assert len(seg.payload) + seg.missing == 5


def test_header_lengths_below_the_minimum_are_not_tcp() -> None:
    ihl4 = bytearray(V4)
    ihl4[0] = 0x44  # IPv4 header length 16 bytes
    doff4 = bytearray(V4)
    doff4[20 + 12] = 0x40  # TCP data offset 16 bytes
    for pkt in (bytes(ihl4), bytes(doff4)):
        assert decode(RawFrame(1, 0.0, 101, pkt, len(pkt))) is None


@pytest.mark.parametrize("window", [0, 1, 0x1234, 0xFFFF])
def test_window_is_read_as_sent(window: int) -> None:
    ip = bytearray(V4)
    ip[20 + 14 : 20 + 16] = struct.pack(">H", window)  # the TCP header's window field
    data = ethernet(bytes(ip))
    seg = decode(RawFrame(1, 0.0, 1, data, len(data)))
    assert seg is not None and seg.window == window and seg.payload == b"hello"
