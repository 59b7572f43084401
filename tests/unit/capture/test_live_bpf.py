"""Capture filter programs: libpcap compilation, the in-kernel prefix checks, packing."""

from __future__ import annotations

import struct

import pytest
from pcapgen import ethernet, tcp_ip

from kdissect.capture import bpf
from kdissect.errors import UsageError

KAFKA = tcp_ip("127.0.0.1", "127.0.0.1", 40000, 9092, 1, 1, 0x18, b"x")
OTHER = tcp_ip("127.0.0.1", "127.0.0.1", 40000, 2181, 1, 1, 0x18, b"x")
KAFKA6 = tcp_ip("::1", "::1", 9092, 40000, 1, 1, 0x18, b"x")
HOST, OUTGOING = 0, bpf.PACKET_OUTGOING


def anc(pkttype: int = HOST, protocol: int = bpf.ETH_P_IP, ifindex: int = 1) -> dict[int, int]:
    return {bpf.SKF_AD_PKTTYPE: pkttype, bpf.SKF_AD_PROTOCOL: protocol, bpf.SKF_AD_IFINDEX: ifindex}


def needs_libpcap() -> None:
    if bpf._libpcap() is None:
        pytest.skip("libpcap is not installed")


def test_empty_filter_accepts_everything_without_libpcap() -> None:
    assert bpf.compile_filter("", bpf.DLT_EN10MB) == [(bpf.RET_K, 0, 0, bpf.SNAPLEN)]
    assert bpf.run(bpf.compile_filter("  ", bpf.DLT_EN10MB), ethernet(KAFKA)) == bpf.SNAPLEN


def test_port_filter_on_ethernet() -> None:
    needs_libpcap()
    prog = bpf.compile_filter("tcp port 9092", bpf.DLT_EN10MB)
    assert bpf.run(prog, ethernet(KAFKA)) == bpf.SNAPLEN
    assert bpf.run(prog, ethernet(KAFKA6)) == bpf.SNAPLEN
    assert bpf.run(prog, ethernet(OTHER)) == 0


def test_port_filter_on_raw_ip() -> None:
    needs_libpcap()
    prog = bpf.compile_filter("tcp port 9092", bpf.DLT_RAW)
    assert bpf.run(prog, KAFKA) == bpf.SNAPLEN
    assert bpf.run(prog, KAFKA6) == bpf.SNAPLEN
    assert bpf.run(prog, OTHER) == 0
    assert bpf.run(prog, ethernet(KAFKA)) == 0  # compiled for raw IP, not Ethernet


@pytest.mark.parametrize("expr", ["tcp prt 9092", "port 70000", "host", "tcp and ("])
def test_bad_filter_is_a_usage_error(expr: str) -> None:
    needs_libpcap()
    with pytest.raises(UsageError, match="bad capture filter"):
        bpf.compile_filter(expr, bpf.DLT_EN10MB)


def test_loopback_prefix_drops_the_outgoing_copy() -> None:
    prog = bpf.live_prefix(loopback=True, cooked=False) + bpf.ACCEPT_ALL
    pkt = ethernet(KAFKA)
    assert bpf.run(prog, pkt, anc(pkttype=HOST)) == bpf.SNAPLEN
    assert bpf.run(prog, pkt, anc(pkttype=OUTGOING)) == 0


def test_cooked_prefix_keeps_ip_only() -> None:
    prog = bpf.live_prefix(loopback=False, cooked=True) + bpf.ACCEPT_ALL
    assert bpf.run(prog, KAFKA, anc(protocol=bpf.ETH_P_IP)) == bpf.SNAPLEN
    assert bpf.run(prog, KAFKA6, anc(protocol=bpf.ETH_P_IPV6)) == bpf.SNAPLEN
    assert bpf.run(prog, b"\x00\x01" * 14, anc(protocol=0x0806)) == 0  # ARP


def test_any_prefix_drops_outgoing_on_loopback_only() -> None:
    prog = bpf.live_prefix(loopback=False, cooked=True, lo_index=1) + bpf.ACCEPT_ALL
    assert bpf.run(prog, KAFKA, anc(pkttype=OUTGOING, ifindex=1)) == 0
    assert bpf.run(prog, KAFKA, anc(pkttype=HOST, ifindex=1)) == bpf.SNAPLEN
    assert bpf.run(prog, KAFKA, anc(pkttype=OUTGOING, ifindex=2)) == bpf.SNAPLEN


def test_prefix_keeps_the_filter_jumps_intact() -> None:
    needs_libpcap()
    prog = bpf.program("tcp port 9092", bpf.DLT_EN10MB, loopback=True, cooked=False)
    assert bpf.run(prog, ethernet(KAFKA), anc()) == bpf.SNAPLEN
    assert bpf.run(prog, ethernet(OTHER), anc()) == 0
    assert bpf.run(prog, ethernet(KAFKA), anc(pkttype=OUTGOING)) == 0
    raw = bpf.program("tcp port 9092", bpf.DLT_RAW, loopback=False, cooked=True, lo_index=1)
    assert bpf.run(raw, KAFKA6, anc(protocol=bpf.ETH_P_IPV6, ifindex=3)) == bpf.SNAPLEN
    assert bpf.run(raw, OTHER, anc(ifindex=3)) == 0


def test_pack_is_a_sock_fprog() -> None:
    insns = bpf.live_prefix(True, False) + bpf.ACCEPT_ALL
    fprog, buf = bpf.pack(insns)
    n, addr = struct.unpack("HL", fprog)
    assert n == 4
    assert bytes(buf)[:8] == struct.pack("=HBBI", *insns[0])
    assert addr != 0
